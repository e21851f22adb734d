#!/usr/bin/env bash
# For every shared oracle model and every --kv-dtype: the PPL ratio and the KL
# divergence against the exact f32 cache, from one ppl-score run with the same
# model as --reference at --reference-kv-dtype f32. Prints a Markdown table
# (the one in the README). Usage: bench/kv-dtypes.sh [ORACLE_DIR] [TEXT]
# KV_DTYPES="q8_0 rk4v4" measures only those formats; MODELS="tiny-qwen3-q8_0
# ..." only those model stems (default: the README's five models).
set -euo pipefail
cd "$(dirname "$0")/.."
oracle=${1:-../shared/oracle}
text=${2:-en-gpl3}
dtypes=${KV_DTYPES:-f16 bf16 int8 fp8 k8v4 nvfp4 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl rk8v4 rk4v4 rk2v4}
models=${MODELS:-tiny-llama-spm-f16 tiny-llama-spm-q4_k_m tiny-llama-spm-q8_0 tiny-llama3-q8_0 tiny-qwen3-q8_0}
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| model | KV dtype | targets | PPL / PPL(f32) | mean KLD | p99 KLD | top-1 agreement |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for stem in $models; do
  m=$oracle/models/$stem.gguf
  bin/ppl-tokenize --model "$m" --text "$oracle/texts/$text.txt" --log-level warn \
    | bin/ppl-window --context 256 --stride 128 > "$tmp/win.ndjson"
  args=()
  for kv in $dtypes; do
    bin/ppl-score --model "$m" --kv-dtype $kv --reference "$m" --reference-kv-dtype f32 --log-level warn "$tmp/win.ndjson" \
      | bin/ppl-aggregate --output "$tmp/$stem-$kv" > /dev/null 2>&1
    args+=("$kv=$tmp/$stem-$kv/report.json")
  done
  go run ./bench/kvtable "$stem" "${args[@]}"
done
