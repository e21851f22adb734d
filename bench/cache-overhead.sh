#!/usr/bin/env bash
# What ppl-score's window cache costs and saves, measured in one run on one
# model and text, each timing the best of 3 (in seconds, wall clock):
#   no cache     --no-cache: the baseline
#   cold cache   every window looked up in vain, scored and written
#                (a fresh cache directory per run)
#   warm cache   every window replayed from the cache
# and prints the cold run's overhead and the warm run's time, both as a
# percentage of the baseline, and the share of each run that ppl-score
# itself timed in its cache (its "window cache:" log line): the direct
# measure of what lookups add, free of the run-to-run noise of a shared
# machine.
#
# Default workload: the 100M-parameter Q8_0 Llama of make bench-cpu
# (profiles/bench-cpu/llama-100m-q8_0.gguf, generated if absent) on the
# shared oracle's all-texts.txt, context 512, stride 256: windows that take
# a fraction of a second each, the smallest a real evaluation scores.
# Usage: bench/cache-overhead.sh [MODEL.gguf [TEXT [CONTEXT [STRIDE]]]]
set -euo pipefail
cd "$(dirname "$0")/.."
oracle=${PPL_ORACLE_DIR:-../shared/oracle}
model=${1:-profiles/bench-cpu/llama-100m-q8_0.gguf}
text=${2:-$oracle/golden-long/all-texts.txt}
context=${3:-512}
stride=${4:-256}
make -s build
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  vocab=()
  [ -f "$oracle/models/tiny-llama-spm-q8_0.gguf" ] && vocab=(--vocab-from "$oracle/models/tiny-llama-spm-q8_0.gguf")
  bin/ppl-mkmodel --params 100M --type Q8_0 "${vocab[@]}" -o "$model"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin/ppl-tokenize --model "$model" --text "$text" --no-cache --log-level warn \
  | bin/ppl-window --context "$context" --stride "$stride" > "$tmp/win.ndjson"

# timed CMD...: runs CMD, prints its wall time in seconds; its stderr goes
# to $tmp/last.err.
timed() {
  local t0
  t0=$(date +%s.%N)
  "$@" > /dev/null 2> "$tmp/last.err"
  echo "$(date +%s.%N) - $t0" | bc -l
}
min() { echo "if ($1 < $2) $1 else $2" | bc -l; }
score() { bin/ppl-score --model "$model" --device cpu --log-level info "$@" "$tmp/win.ndjson"; }
# ppl-score's own account of the time its window cache took.
cachepct() { sed -n 's/.*window cache: .*(\(.*\)% of the run).*/\1/p' "$tmp/last.err"; }

# Rounds of no cache, cold cache (a fresh directory each time) and warm
# cache, alternating so that a slow spell of a shared machine hits all
# three alike; the best of each is kept.
score --cache-dir "$tmp/warm" > /dev/null 2>&1
base=999999 coldt=999999 warm=999999
for i in 1 2 3; do
  base=$(min "$base" "$(timed score --no-cache)")
  coldt=$(min "$coldt" "$(timed score --cache-dir "$tmp/cold$i")")
  coldpct=$(cachepct)
  warm=$(min "$warm" "$(timed score --cache-dir "$tmp/warm")")
  warmpct=$(cachepct)
done
windows=$(grep -c '"type":"window"' "$tmp/win.ndjson")
printf '%s, %s, context %s stride %s: %d windows\n' "$(basename "$model")" "$(basename "$text")" "$context" "$stride" "$windows"
printf 'no cache    %8.3f s\n' "$base"
printf 'cold cache  %8.3f s  (%+.2f%% of the uncached time; lookups and writes: %s%% of the run by ppl-score'"'"'s clock)\n' \
  "$coldt" "$(echo "100 * ($coldt - $base) / $base" | bc -l)" "$coldpct"
printf 'warm cache  %8.3f s  (%.2f%% of the uncached time; lookups and replays: %s%% of the run by ppl-score'"'"'s clock)\n' \
  "$warm" "$(echo "100 * $warm / $base" | bc -l)" "$warmpct"
