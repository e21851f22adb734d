#!/usr/bin/env bash
# mkbundle.sh [DIR]: build the GPU check bundle (default bin/gpu-bundle), the
# folder tests/gpu/check.sh runs on a machine with an NVIDIA GPU and no Go.
# Run through `make gpu-bundle` on a machine with Go and ../shared/oracle.
#
# It holds, with the repository's files under 63 MiB:
#   ppl-score.gz, cuda.test.gz  the tool and the CUDA package's test binary
#                               (CGO_ENABLED=0, stripped, gzipped)
#   oracle/models/*.gguf.gz     tiny-llama-spm-q8_0, tiny-llama3-q8_0 and tiny-qwen3moe
#                               (with PPL_GPU_BUNDLE=archs instead: tiny-qwen35,
#                               -qwen35moe, -qwen3next, -deepseek2, -gemma4,
#                               -mistral3; with PPL_GPU_BUNDLE=core-archs:
#                               tiny-gemma3, -gpt-oss, -glm4moe)
#                               gzipped, and a README so
#                               the test binary's oracle lookup finds them once
#                               check.sh has unpacked them
#   inputs/*.ndjson.gz          ppl-window output for the oracle texts
#   expected/*.ndjson.gz        the CPU reference's ppl-score output for each
#                               case, made here on the same models with the
#                               case's flags
#   cases.tsv                   name, model, input, flags, bounds class
#   bench.env                   BENCH_MODELS, the benchmark's shapes, and
#                               BENCH_WEIGHTS (1: run the quantized-weights
#                               part), for check.sh
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
B=${1:-bin/gpu-bundle}
ORACLE=${PPL_ORACLE_DIR:-../shared/oracle}
[ -f "$ORACLE/README.md" ] || { echo "mkbundle: no oracle at $ORACLE (set PPL_ORACLE_DIR)" >&2; exit 1; }
GO=${GO:-go}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rm -rf "$B"
mkdir -p "$B/oracle/models" "$B/inputs" "$B/expected"

echo "mkbundle: building (CGO_ENABLED=0)"
CGO_ENABLED=0 $GO build -trimpath -ldflags='-s -w' -o "$T/" ./score/cmd/ppl-score ./tokenize/cmd/ppl-tokenize ./window/cmd/ppl-window
CGO_ENABLED=0 $GO test -c -trimpath -ldflags='-s -w' -o "$T/cuda.test" ./score/cuda
gzip -9 -c "$T/ppl-score" > "$B/ppl-score.gz"
gzip -9 -c "$T/cuda.test" > "$B/cuda.test.gz"

# tiny-qwen3-q8_0 stays out: the device machine takes the bundle with the
# repository's own files, 64 MiB in all (see the size check at the end).
MODELS="tiny-llama-spm-q8_0 tiny-llama3-q8_0 tiny-qwen3moe"
# Each bundle benchmarks its own families' large shapes (check.sh's part
# 3, score/cuda's benchShapes) and only the first the quantized weights
# (part 4), so that a bundle's time goes to its own models: the archs
# bundle's Qwen3.5-27B at 65,536/32,768 has the whole benchmark budget.
BENCH_MODELS=llama-1b,llama-8b,qwen3moe-30b-a3b
BENCH_WEIGHTS=1
# PPL_GPU_BUNDLE=archs: the architectures that need package ml's extension
# interfaces instead (their float32 models do not fit beside the others
# in what may travel), and mistral3: make gpu-bundle-archs, then check.sh
# on that bundle. PPL_GPU_BUNDLE=core-archs: the other architectures of
# package ml's core operations, in a bundle of their own for the same
# reason.
ARCHS=
case ${PPL_GPU_BUNDLE:-} in
archs)
	ARCHS=1
	MODELS="tiny-qwen35 tiny-qwen35moe tiny-qwen3next tiny-deepseek2 tiny-gemma4 tiny-mistral3"
	BENCH_MODELS=qwen35-27b,deepseek-v2-lite
	BENCH_WEIGHTS=0
	;;
core-archs)
	ARCHS=1
	MODELS="tiny-gemma3 tiny-gpt-oss tiny-glm4moe"
	BENCH_MODELS=gpt-oss-20b,gemma3-27b,gemma4-31b
	BENCH_WEIGHTS=0
	;;
esac
TEXTS="en-gpl3 zh-tang code-go-strings mixed-unicode"
cp "$ORACLE/README.md" "$B/oracle/README.md"
printf 'BENCH_MODELS=%s\nBENCH_WEIGHTS=%s\n' "$BENCH_MODELS" "$BENCH_WEIGHTS" > "$B/bench.env"
for m in $MODELS; do
	gzip -9 -c "$ORACLE/models/$m.gguf" > "$B/oracle/models/$m.gguf.gz"
done

# input NAME MODEL CONTEXT STRIDE TEXT...: ppl-tokenize | ppl-window
input() {
	local name=$1 model=$2 ctx=$3 stride=$4
	shift 4
	"$T/ppl-tokenize" --model "$ORACLE/models/$model.gguf" --text "$@" 2>/dev/null |
		"$T/ppl-window" --context "$ctx" --stride "$stride" 2>/dev/null > "$T/$name.ndjson"
	gzip -9 -c "$T/$name.ndjson" > "$B/inputs/$name.ndjson.gz"
}

# case NAME MODEL INPUT CLASS FLAGS...: the CPU reference's output; check.sh
# runs the same flags on the GPU with the same model. "@REF" in FLAGS stands
# for the model itself (a reference model).
: > "$B/cases.tsv"
case_() {
	local name=$1 model=$2 in=$3 class=$4
	shift 4
	local flags=("$@") cpu=()
	for f in "${flags[@]}"; do cpu+=("${f//@REF/$ORACLE/models/$model.gguf}"); done
	local t0=$SECONDS
	"$T/ppl-score" --device cpu --no-cache --model "$ORACLE/models/$model.gguf" "${cpu[@]}" "$T/$in.ndjson" 2>"$T/err" |
		gzip -9 > "$B/expected/$name.ndjson.gz" || { cat "$T/err" >&2; exit 1; }
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$model" "$in" "${flags[*]}" "$class" >> "$B/cases.tsv"
	echo "mkbundle: case $name ($((SECONDS - t0)) s on the CPU)"
}

# checksize: the bundle travels to the GPU machine with the repository's
# tracked files, 64 MiB together: fail here, not there.
checksize() {
	local size tree
	size=$(du -sb "$B" | cut -f1)
	tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
	if [ $((size + tree)) -gt $((63 * 1024 * 1024)) ]; then
		echo "mkbundle: $B ($size bytes) and the repository's files ($tree) come to over the 63 MiB that may travel" >&2
		exit 1
	fi
	du -sh "$B"
	echo "mkbundle: $B ready ($size bytes; with the repository's files $((size + tree))); run: bash tests/gpu/check.sh $B"
}

texts=()
for t in $TEXTS; do texts+=("$ORACLE/texts/$t.txt"); done
for m in $MODELS; do
	class=bf16
	case $m in
	*moe*) class=moe ;; # bounded by mean and PPL (compare.py)
	tiny-qwen3next | tiny-deepseek2 | tiny-gpt-oss) class=moe ;; # mixtures of experts too
	tiny-gemma4) class=gemma4 ;;
	tiny-gemma3) class=gemma3 ;;
	esac
	input "$m-texts" "$m" 256 128 "${texts[@]}"
	case_ "$m-bf16" "$m" "$m-texts" "$class" --kv-dtype bf16
done
if [ -n "$ARCHS" ]; then # the KV dtypes, reference and long windows are the main bundle's
	cp tests/gpu/check.sh tests/gpu/compare.py "$B/"
	checksize
	exit 0
fi
# Every other KV cache dtype on one model and two texts.
input spm-two tiny-llama-spm-q8_0 256 128 "$ORACLE/texts/en-gpl3.txt" "$ORACLE/texts/mixed-unicode.txt"
for kv in f32 f16 int8 fp8 k8v4 nvfp4 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl rk8v4 rk4v4 rk2v4; do
	case_ "spm-$kv" tiny-llama-spm-q8_0 spm-two "$kv" --kv-dtype "$kv"
done
# A reference model: the same weights with an exact cache (KL divergence).
case_ spm-kld tiny-llama-spm-q8_0 spm-two bf16 --kv-dtype bf16 --reference @REF --reference-kv-dtype f32
# Long windows: RoPE at large positions, attention over many tiles.
input spm-long tiny-llama-spm-q8_0 4096 2048 "$ORACLE/golden-long/all-texts.txt"
case_ spm-long-4096 tiny-llama-spm-q8_0 spm-long bf16 --kv-dtype bf16
input llama3-long tiny-llama3-q8_0 8192 4096 "$ORACLE/golden-long/all-texts.txt"
case_ llama3-long-8192 tiny-llama3-q8_0 llama3-long bf16 --kv-dtype bf16

cp tests/gpu/check.sh tests/gpu/compare.py "$B/"
checksize
