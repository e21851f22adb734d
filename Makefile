# ppl: build, test and run the perplexity toolkit. `make help` lists targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
MODULES = $(shell $(GO) list -m -f '{{.Path}}/...')
FUZZTIME ?= 10s

.PHONY: all build test test-short fuzz help clean vet

all: build

help:
	@echo "make build       build all tools into $(BIN)/"
	@echo "make test        run every test (the CI command)"
	@echo "make test-short  the quick subset"
	@echo "make fuzz        run each fuzz target for FUZZTIME (default $(FUZZTIME))"
	@echo "make demo        run the pipeline on the bundled model and corpus"
	@echo "make bench-cpu   CPU throughput on generated 100M models (bench/bench.mk)"
	@echo "make kernels     regenerate kernels/*.ptx.gz from kernels/*.cu (needs nvcc)"
	@echo "make gpu-bundle  build bin/gpu-bundle for tests/gpu/check.sh on a GPU machine"
	@echo "make gpu-bundle-archs  the same for qwen35, qwen35moe, qwen3next, deepseek2, gemma4, mistral3"
	@echo "make gpu-bundle-core-archs  the same for gemma3, gpt-oss, glm4moe"
	@echo "make eval MODEL=m.gguf [CORPUS=ppl-heldout-v1] [KV=bf16] [CONTEXT=4096] [STRIDE=2048] [QUICK=1] [REFERENCE=ref.gguf]"
	@echo "                 one evaluation, each stage's output kept under profiles/eval/ so"
	@echo "                 a rerun redoes only the stages whose inputs changed"

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./tokenize/cmd/ppl-tokenize ./window/cmd/ppl-window ./score/cmd/ppl-score ./aggregate/cmd/ppl-aggregate ./compare/cmd/ppl-compare ./cache/cmd/ppl-cache ./eval/cmd/ppl-mkmodel ./eval/cmd/ppl-corpus ./run/cmd/ppl ./slurm/cmd/ppl-slurm

vet:
	$(GO) vet $(MODULES)

test: vet
	$(GO) test -count=1 -timeout 60m $(MODULES)

test-short:
	$(GO) test -short $(MODULES)

# Every Fuzz* target, each for FUZZTIME, one after another.
fuzz:
	@set -e; for pkg in $$($(GO) list $(MODULES)); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# One evaluation, stage by stage; make skips the stages whose inputs are
# unchanged, and ppl-score's window cache skips the windows scored before.
CORPUS ?= ppl-heldout-v1
KV ?= bf16
CONTEXT ?= 4096
STRIDE ?= 2048
QUICK ?=
REFERENCE ?=
MANIFEST = eval/corpora/$(CORPUS)/manifest.json
EVAL = profiles/eval/$(notdir $(basename $(MODEL)))/$(CORPUS)$(if $(QUICK),-quick)
# With a reference model, scores and reports are kept apart per reference.
REFTAG = $(if $(REFERENCE),-vs-$(notdir $(basename $(REFERENCE))))
# A split model's shards (M-00001-of-0000N.gguf names the first): all of
# them are the stages' inputs.
shards = $(sort $(1) $(wildcard $(subst -00001-of-,-?????-of-,$(1))))
.PHONY: eval
eval: build
	@test -n "$(MODEL)" || { echo "make eval: set MODEL=path/to/model.gguf" >&2; exit 2; }
	@$(MAKE) --no-print-directory $(EVAL)/report-$(KV)-c$(CONTEXT)-s$(STRIDE)$(REFTAG)/report.json
	@cat $(EVAL)/report-$(KV)-c$(CONTEXT)-s$(STRIDE)$(REFTAG)/table.txt

$(EVAL)/tokens.ndjson: $(call shards,$(MODEL)) $(MANIFEST)
	@mkdir -p $(@D)
	$(BIN)/ppl-tokenize --model $(MODEL) --corpus $(MANIFEST) $(if $(QUICK),--quick) > $@.tmp && mv $@.tmp $@

$(EVAL)/windows-c$(CONTEXT)-s$(STRIDE).ndjson: $(EVAL)/tokens.ndjson
	$(BIN)/ppl-window --context $(CONTEXT) --stride $(STRIDE) $< > $@.tmp && mv $@.tmp $@

$(EVAL)/scores-$(KV)-c$(CONTEXT)-s$(STRIDE)$(REFTAG).ndjson: $(EVAL)/windows-c$(CONTEXT)-s$(STRIDE).ndjson $(call shards,$(REFERENCE))
	$(BIN)/ppl-score --model $(MODEL) --kv-dtype $(KV) $(if $(REFERENCE),--reference $(REFERENCE)) $< > $@.tmp && mv $@.tmp $@

$(EVAL)/report-$(KV)-c$(CONTEXT)-s$(STRIDE)$(REFTAG)/report.json: $(EVAL)/scores-$(KV)-c$(CONTEXT)-s$(STRIDE)$(REFTAG).ndjson
	rm -rf $(@D)
	$(BIN)/ppl-aggregate --output $(@D) $< > $(@D).table.tmp && mv $(@D).table.tmp $(@D)/table.txt

clean:
	rm -rf $(BIN)

# demo, demo-model, corpus: the bundled model and corpora (eval/).
include eval/eval.mk

# CUDA kernels: kernels/*.cu -> kernels/*.ptx.gz (committed, embedded by
# ppl.dev/score/cuda). Needs nvcc (Debian non-free: nvidia-cuda-toolkit);
# kernels/gen.sh heads each file with the command, nvcc's version and the
# sources' sha256, which kernels_test.go checks.
.PHONY: kernels gpu-bundle gpu-bundle-archs gpu-bundle-core-archs
KERNEL_SRC := $(wildcard kernels/*.cu)
kernels: $(KERNEL_SRC:.cu=.ptx.gz)
kernels/%.ptx.gz: kernels/%.cu $(wildcard kernels/*.cuh) kernels/kvids.cuh kernels/libmdata.cuh kernels/gen.sh
	kernels/gen.sh $*
# The KV format ids' header, generated from the Go table (kernels/kvformat.go).
kernels/kvids.cuh: kernels/kvformat.go
	cd kernels && $(GO) generate .
# glibc's expf and logf tables, generated from nn's (score/nn/libm.go).
kernels/libmdata.cuh: score/nn/libm.go
	cd score/cuda && $(GO) generate .

# The GPU check's bundle: binaries (CGO_ENABLED=0), the Q8_0 oracle models,
# pipeline inputs and the CPU reference's outputs (under 60 MiB). Run it on
# a GPU machine with: bash tests/gpu/check.sh bin/gpu-bundle
gpu-bundle:
	tests/gpu/mkbundle.sh $(BIN)/gpu-bundle
# The same for the architectures of package ml's extension interfaces
# (qwen35, qwen35moe, qwen3next, deepseek2, gemma4) and mistral3: bash tests/gpu/check.sh bin/gpu-bundle-archs
gpu-bundle-archs:
	PPL_GPU_BUNDLE=archs tests/gpu/mkbundle.sh $(BIN)/gpu-bundle-archs

# The same for the other architectures of core operations (gemma3, gpt-oss,
# glm4moe): bash tests/gpu/check.sh bin/gpu-bundle-core-archs
gpu-bundle-core-archs:
	PPL_GPU_BUNDLE=core-archs tests/gpu/mkbundle.sh $(BIN)/gpu-bundle-core-archs

# bench-cpu: ppl-score's CPU throughput, optionally against llama.cpp (bench/).
include bench/bench.mk
