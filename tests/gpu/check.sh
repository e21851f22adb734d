#!/usr/bin/env bash
# check.sh [BUNDLE]: the GPU check of ppl's CUDA backend, on a machine with an
# NVIDIA GPU and its driver, without Go and without building anything: it
# runs what `make gpu-bundle` put in BUNDLE (default bin/gpu-bundle, or this
# script's folder when it lies in a bundle) and writes its results to $OUT
# (default ./gpu-out):
#
#   summary.txt  one line per part and case, PASS/FAIL/SKIP/TIMEOUT (printed last)
#   env.log      GPU, driver, the libraries found
#   parity.log   (1) every kernel against its CPU reference (cuda.test -run
#                '(Parity|FlashVsPlain|SharedWeights)/gpu': the attention
#                kernels against the plain one and attn_fx against float64
#                too; a model's weights spread over two engines of the GPU,
#                and shared by two, scoring as one model's to the bit)
#   cli.log      (2) ppl-score --device cuda against the CPU reference's output
#                on the same model, every oracle model and text (bf16 cache: max
#                |Δ log p| <= 0.012, |PPL ratio - 1| <= 0.001; the mixture of
#                experts tiny-qwen3moe: mean |Δ log p| <= 0.008, |PPL ratio - 1|
#                <= 0.003, compare.py), other caches, a reference model (KLD),
#                long windows; on the bundle of `make gpu-bundle-archs` instead
#                tiny-qwen35 and -mistral3 (as llama), tiny-qwen35moe,
#                -qwen3next and -deepseek2 (as tiny-qwen3moe), tiny-gemma4
#                (mean 0.03, PPL 0.008: flips in a model of sharp
#                attention); on that of `make gpu-bundle-core-archs`
#                tiny-gemma3 (max 0.09, mean 0.009, PPL 0.001), tiny-gpt-oss
#                and -glm4moe (as tiny-qwen3moe)
#                (2c) the first case again with two engines on the one GPU
#                (--devices 0,0): the same scores as one engine, the two
#                sharing one copy of the weights
#   bench.log    (3) throughput on synthetic Llama 1B and 8B, context 4096/2048
#   bench.json       and 32768/16384, a synthetic Qwen3-30B-A3B (128 experts,
#                    8 per token), a Qwen3.5-27B-like hybrid (48 Gated
#                    DeltaNet layers, 16 of attention with heads of 256 on
#                    the tensor-core kernel), a gpt-oss-20b (32 experts, 4
#                    per token; sinks, a 128-key window on alternate
#                    layers), a Gemma-3-27B (a 1,024-key window on 5 of
#                    6 layers) and a Gemma-4-31B-like model (its global
#                    layers' heads of 512) at 4096/2048 (the sliding layers and
#                    gpt-oss's sinks on the tensor-core kernel), then the
#                    Qwen3.5-27B at 65,536/32,768 (about 4.1 PFLOP a
#                    window, 30 to 50 s for its three) when its time,
#                    projected from its 4096 setting, fits what is left:
#                    tokens/s, MFU against the measured bf16 GEMM peak,
#                    peak memory (the mixtures also with their experts
#                    run one at a time: the ratio of running them
#                    together); settings left when PPL_GPU_BENCH_SECONDS
#                    is spent, or that would not fit it, say "skipped".
#                    Each bundle runs its own families' shapes (its
#                    bench.env): Llama and Qwen3-30B-A3B in `make
#                    gpu-bundle`'s, the Qwen3.5-27B alone in the archs
#                    bundle's, gpt-oss-20b, Gemma-3-27B and Gemma-4-31B
#                    in the core-archs bundle's
#   e2e.log      the same parity as (2) through the Go API (cuda.test -run
#                EndToEnd/gpu: TestEndToEnd, TestEndToEndKV and, for the models
#                the bundle has, TestEndToEndArchs, TestEndToEndGenerated (phi3,
#                glm4, Mixtral-style llama, granite, smollm3, olmo2, seed_oss,
#                exaone4, minimax-m2, ernie4_5-moe, dots1, the Mamba-2 hybrids
#                granitehybrid, nemotron_h and nemotron_h_moe, lfm2 and
#                lfm2moe, gemma2 and llama4 on generated files),
#                TestEndToEndKLD (KL(CPU || GPU) over the vocabulary),
#                TestEndToEndScoreVisit (the logits ppl-score --kld-base and
#                --write-kld-base read back) and
#                TestEndToEndInt8, the int8 mode against the CPU's), also for
#                the all-bf16 precision, for the record
#   weights.log  (4) weights kept quantized on the device (issue #17): a
#                synthetic Llama-70B-shaped Q4_K_M scores a 4096-token window
#                within the file's size + 10 GiB of device memory; Llama-8B
#                Q4_K_M and Q8_0 throughput, quantized against the host's bf16
#                copy, and Q4_K_M in the int8 mode (cuda.test -run
#                TestBenchmarkWeights); the parity of the
#                two storages against the CPU is in (1) (TestWeightStorageParity:
#                the quantized weights closer than the bf16 copy); in `make
#                gpu-bundle`'s bundle only (bench.env's BENCH_WEIGHTS)
#
# Each part runs on its own, under its own time limit, and a failure in one
# does not stop the others; the whole stays within PPL_GPU_CHECK_SECONDS
# (default 480). Exit status: 0 when every part passed.
set -u
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
B=${1:-}
if [ -z "$B" ]; then
	if [ -f "$here/cases.tsv" ]; then B=$here; else B=bin/gpu-bundle; fi
fi
B=$(cd "$B" 2>/dev/null && pwd) || { echo "check.sh: no bundle at ${1:-bin/gpu-bundle}: run make gpu-bundle" >&2; exit 2; }
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/pplgpu.XXXXXX)
SUM=$OUT/summary.txt
: > "$SUM"
start=$SECONDS
deadline=$((SECONDS + ${PPL_GPU_CHECK_SECONDS:-480}))
status=0

note() { echo "$*" | tee -a "$SUM"; }

# limit CAP: the seconds a part may take: CAP, or what is left before the
# deadline (minus a little for the summary), whichever is less.
limit() {
	local left=$((deadline - SECONDS - 5))
	if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# run LOG CAP CMD...: CMD under a time limit, output appended to LOG;
# returns its status (124 on timeout, 125 when no time was left).
run() {
	local log=$1 cap
	cap=$(limit "$2")
	shift 2
	if [ "$cap" -lt 10 ]; then
		echo "(skipped: the check's time is spent)" >> "$log"
		return 125
	fi
	timeout -k 5 "$cap" "$@" >> "$log" 2>&1
}

verdict() { # verdict NAME STATUS T0
	local v=PASS
	case $2 in
	0) ;;
	124 | 137) v=TIMEOUT ;;
	125) v=SKIP ;;
	*) v=FAIL ;;
	esac
	[ "$v" = PASS ] || status=1
	note "$(printf '%-8s %-28s %4ds' "$v" "$1" $((SECONDS - $3)))"
}

# --- unpack -------------------------------------------------------------
for f in ppl-score cuda.test; do
	if ! gzip -dc "$B/$f.gz" > "$W/$f" 2>> "$OUT/env.log"; then
		note "FAIL     unpacking $f.gz from $B"
		exit 1
	fi
	chmod +x "$W/$f"
done
mkdir -p "$W/inputs" "$W/got" "$W/oracle/models"
for f in "$B"/inputs/*.ndjson.gz; do gzip -dc "$f" > "$W/inputs/$(basename "$f" .gz)"; done
cp "$B/oracle/README.md" "$W/oracle/"
for f in "$B"/oracle/models/*.gguf.gz; do gzip -dc "$f" > "$W/oracle/models/$(basename "$f" .gz)"; done
export CUDA_CACHE_PATH=$W/nvcache CUDA_CACHE_MAXSIZE=1073741824 PPL_CACHE_DIR=$W/cache
export PPL_REQUIRE_GPU=1 # the test binary fails, not skips, without a GPU
export PPL_ORACLE_DIR=$W/oracle

# --- environment ----------------------------------------------------------
t0=$SECONDS
{
	echo "== $(date -u) on $(uname -a)"
	timeout 20 nvidia-smi 2>&1 | head -20 || echo "nvidia-smi: not available"
	echo "== libcuda and cuBLAS in the loader cache"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcublas' || echo "(none)"
} >> "$OUT/env.log" 2>&1
# cuBLAS outside the loader's search path (a toolkit or a Python wheel):
# put its folders on LD_LIBRARY_PATH (the binary also looks there itself).
dirs=$(timeout 25 find /usr/local /usr/lib /opt -maxdepth 9 -name 'libcublas.so.1[23]' 2>/dev/null | xargs -r -n1 dirname | sort -u | head -4)
for d in $dirs; do LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
echo "== cuBLAS folders found: ${dirs:-none}; LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$OUT/env.log"
run "$OUT/env.log" 30 "$W/cuda.test" -test.run '^TestEmbedParity$/gpu' -test.v -test.count=1
verdict "environment (first GPU use)" $? "$t0"

# --- (1) kernel parity ------------------------------------------------------
t0=$SECONDS
PPL_CUDA_SYNC=1 run "$OUT/parity.log" 90 "$W/cuda.test" -test.run '(Parity|FlashVsPlain|SharedWeights)/gpu' -test.v -test.count=1 -test.timeout 85s
rc=$?
verdict "kernel parity" $rc "$t0"
# every failing test and case first (a long list of passes must not hide
# one), then each kernel's GPU verdict
{
	grep -E -e '--- FAIL' "$OUT/parity.log" | grep -v '/sim' | head -100
	grep -E -e '--- (PASS|SKIP): Test[A-Za-z]+/gpu ' "$OUT/parity.log"
} | sed 's/^ *//' | awk '{print "           " $0}' >> "$SUM"

# --- (2) ppl-score end to end ------------------------------------------------
t0=$SECONDS
cli_rc=0
first=1
while IFS=$'\t' read -r name model in flags class; do
	[ -n "$name" ] || continue
	mpath=$W/oracle/models/$model.gguf
	# shellcheck disable=SC2086 # flags are words
	set -- ${flags//@REF/$mpath}
	c0=$SECONDS
	cap=$(limit 45)
	if [ "$cap" -lt 10 ]; then
		note "$(printf 'SKIP     cli %-24s the check'"'"'s time is spent' "$name")"
		cli_rc=1
		continue
	fi
	timeout -k 5 "$cap" "$W/ppl-score" --device cuda --no-cache --model "$mpath" "$@" "$W/inputs/$in.ndjson" \
		> "$W/got/$name.ndjson" 2> "$W/got/$name.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		note "$(printf 'FAIL     cli %-24s ppl-score exit %d' "$name" $rc)"
		{ echo "== $name: ppl-score exit $rc"; tail -5 "$W/got/$name.err"; } >> "$OUT/cli.log"
		cli_rc=1
		continue
	fi
	line=$(python3 "$here/compare.py" "$B/expected/$name.ndjson.gz" "$W/got/$name.ndjson" "$class" "$name" 2>&1)
	rc=$?
	[ $rc -eq 0 ] || cli_rc=1
	echo "$line ($((SECONDS - c0)) s)" >> "$OUT/cli.log"
	note "           $line"
	if [ $first = 1 ]; then
		first=0
		{ echo "== ppl-score's log for $name:"; cat "$W/got/$name.err"; echo "== its score header:"; grep -m1 '"stage":"score"' "$W/got/$name.ndjson"; } >> "$OUT/cli.log"
	fi
done < "$B/cases.tsv"
verdict "ppl-score vs CPU reference" $cli_rc "$t0"

# --- (2c) two engines on the one GPU write the output of one ----------------
t0=$SECONDS
dev_rc=1
IFS=$'\t' read -r name model in flags class < "$B/cases.tsv"
if [ -s "$W/got/$name.ndjson" ]; then
	mpath=$W/oracle/models/$model.gguf
	# shellcheck disable=SC2086 # flags are words
	set -- ${flags//@REF/$mpath}
	timeout -k 5 "$(limit 45)" "$W/ppl-score" --device cuda --devices 0,0 --no-cache --model "$mpath" "$@" "$W/inputs/$in.ndjson" \
		> "$W/got/$name.devices.ndjson" 2> "$W/got/$name.devices.err" &&
		cmp <(grep -v '"type":"header"' "$W/got/$name.ndjson") <(grep -v '"type":"header"' "$W/got/$name.devices.ndjson") >> "$OUT/cli.log" 2>&1 &&
		grep -q "weights: one copy on cuda:0, shared by its 2 engines" "$W/got/$name.devices.err"
	dev_rc=$?
	{ echo "== --devices 0,0 on $name: exit $dev_rc"; tail -3 "$W/got/$name.devices.err"; } >> "$OUT/cli.log"
fi
verdict "--devices 0,0 = one engine" $dev_rc "$t0"

# --- (3) throughput -------------------------------------------------------
t0=$SECONDS
left=$((deadline - SECONDS - 60))
# The bundle names its families' shapes (bench.env, mkbundle.sh); without
# one, every shape.
BENCH_MODELS=
BENCH_WEIGHTS=1
[ -f "$B/bench.env" ] && . "$B/bench.env"
PPL_GPU_BENCH=1 PPL_GPU_BENCH_OUT=$OUT/bench.json PPL_GPU_BENCH_SECONDS=$((left > 150 ? 120 : left - 30)) \
	PPL_GPU_BENCH_MODELS=$BENCH_MODELS run "$OUT/bench.log" 170 "$W/cuda.test" -test.run '^TestBenchmark$' -test.v -test.count=1 -test.timeout 165s
verdict "throughput benchmark" $? "$t0"
grep '^bench:' "$OUT/bench.log" | sed 's/^bench: /           /' >> "$SUM"

# --- (4) weights kept quantized: 70B memory, 8B throughput -------------------
if [ "$BENCH_WEIGHTS" = 1 ]; then
	t0=$SECONDS
	PPL_GPU_BENCH_WEIGHTS=1 run "$OUT/weights.log" 150 "$W/cuda.test" -test.run '^TestBenchmarkWeights$' -test.v -test.count=1 -test.timeout 145s
	verdict "quantized weights (70B, 8B)" $? "$t0"
	grep '^bench:' "$OUT/weights.log" | sed 's/^bench: /           /' >> "$SUM"
fi

# --- (2b) the same through the Go API --------------------------------------
t0=$SECONDS
PPL_CUDA_SYNC=1 run "$OUT/e2e.log" 120 "$W/cuda.test" -test.run 'EndToEnd/gpu' -test.v -test.count=1 -test.timeout 115s
verdict "end to end (Go API)" $? "$t0"
{ # the failures and what they wanted first, then KL(CPU || GPU), then the figures
	grep -E -e '--- FAIL' -e '; want ' "$OUT/e2e.log" | grep -v '/sim' | head -60
	grep -E 'KL\(CPU' "$OUT/e2e.log"
	grep -E 'cache|reference|--- PASS' "$OUT/e2e.log" | grep -v '/sim' | grep -v '; want ' | head -40
} | sed 's/^ *//; s/^[a-z0-9_]*_test.go:[0-9]*: //' | awk '{print "           " $0}' >> "$SUM"

note "$(printf '%-8s %-28s %4ds' "$([ $status = 0 ] && echo PASS || echo FAIL)" "gpu check (all parts)" $((SECONDS - start)))"
# the driver's compiled kernels (the first use's 20-30 s): whether they
# fit CUDA's default cache of 256 MiB, which users' runs get
echo "== the PTX compiled for this GPU: $(du -sh "$CUDA_CACHE_PATH" 2>/dev/null | cut -f1) in $CUDA_CACHE_PATH" >> "$OUT/env.log"
echo "== summary ($SUM)"
cat "$SUM"
rm -rf "$W"
exit $status
