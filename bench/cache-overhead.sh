#!/usr/bin/env bash
# What ppl-score's window cache costs and saves, measured in one run on one
# model and text (default: the shared oracle's tiny-llama-spm-q8_0 on
# en-gpl3, context 256, stride 128), each timing the best of 3:
#   no cache     --no-cache: the baseline
#   cold cache   every window a miss, looked up, scored and written
#   warm cache   every window replayed from the cache
# and prints the cold run's overhead and the warm run's time, both as a
# percentage of the baseline.
# Usage: bench/cache-overhead.sh [MODEL.gguf] [TEXT]
set -euo pipefail
cd "$(dirname "$0")/.."
oracle=${PPL_ORACLE_DIR:-../shared/oracle}
model=${1:-$oracle/models/tiny-llama-spm-q8_0.gguf}
text=${2:-$oracle/texts/en-gpl3.txt}
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin/ppl-tokenize --model "$model" --text "$text" --no-cache --log-level warn \
  | bin/ppl-window --context 256 --stride 128 > "$tmp/win.ndjson"

# best CMD...: the best wall time of 3 runs of CMD, in seconds.
best() {
  local b=999999 t0 t
  for _ in 1 2 3; do
    t0=$(date +%s.%N)
    "$@" > /dev/null
    t=$(echo "$(date +%s.%N) - $t0" | bc -l)
    b=$(echo "if ($t < $b) $t else $b" | bc -l)
  done
  echo "$b"
}
score() { bin/ppl-score --model "$model" --log-level warn "$@" "$tmp/win.ndjson"; }
cold() { rm -rf "$tmp/cache"; score --cache-dir "$tmp/cache"; }

base=$(best score --no-cache)
coldt=$(best cold)
score --cache-dir "$tmp/cache" > /dev/null
warm=$(best score --cache-dir "$tmp/cache")
printf 'windows: %d\n' "$(grep -c '"type":"window"' "$tmp/win.ndjson")"
printf 'no cache    %8.3f s\n' "$base"
printf 'cold cache  %8.3f s  (lookups and writes add %+.2f%%)\n' "$coldt" "$(echo "100 * ($coldt - $base) / $base" | bc -l)"
printf 'warm cache  %8.3f s  (%.2f%% of the uncached run)\n' "$warm" "$(echo "100 * $warm / $base" | bc -l)"
