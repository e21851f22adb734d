# CPU benchmark of ppl-score (bench/cpubench): include from the top-level
# Makefile (include bench/bench.mk) and run from the repository root.
#
#   make bench-cpu                      100M models, F16/Q8_0/Q4_K_M, both modes, 1..all threads
#   make bench-cpu LLAMA="chroot /tmp/sid llama-perplexity" LLAMA_ROOT=/tmp/sid
#                                       and against llama.cpp, back to back, best of 3
#   make bench-cpu LONG=65536           and the peak RSS of one 64k-token window
#   make bench-cpu BASELINE=DIR         and this build against the ppl-score in DIR, round by round
#   make bench-cpu BENCH_FLAGS="--levels generic,neon"
#                                       and each CPU kernel level against the first, round by round
#   make bench-quant                    package quant's decode kernels per CPU level against plain Go
BENCH_FLAGS ?=
LLAMA ?=
LLAMA_ROOT ?=
LONG ?= 0
BASELINE ?=

.PHONY: bench-cpu
bench-cpu:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./tokenize/cmd/ppl-tokenize ./window/cmd/ppl-window ./score/cmd/ppl-score ./eval/cmd/ppl-mkmodel
	$(GO) run ./bench/cpubench --bin $(BIN) --llama "$(LLAMA)" --llama-root "$(LLAMA_ROOT)" --long $(LONG) --baseline "$(BASELINE)" $(BENCH_FLAGS)

# Decode throughput of package quant's kernels per CPU level against the
# plain Go reference, as a Markdown table (bench/quant-kernels.sh).
QUANT_COUNT ?= 5
.PHONY: bench-quant
bench-quant:
	bench/quant-kernels.sh $(QUANT_COUNT)
