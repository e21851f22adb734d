# Targets of the eval module: the demo run, the demo model and the built
# corpus. The top-level Makefile includes this file (include eval/eval.mk);
# run them from the repository root.

DEMO_MODEL  := eval/models/ppl-demo-bigram-q8_0.gguf
DEMO_CORPUS := eval/corpora/ppl-heldout-v1/manifest.json
MIXED_CORPUS := eval/corpora/ppl-mixed-v1/manifest.json
DEMO_TOOLS  := ./tokenize/cmd/ppl-tokenize ./window/cmd/ppl-window ./score/cmd/ppl-score ./aggregate/cmd/ppl-aggregate

# The flags that made $(DEMO_MODEL). mkmodel/cli's TestDemoModelReproducible
# reads this line, regenerates the model and checks its sha256.
DEMO_MODEL_FLAGS := --bigram eval/corpora/ppl-heldout-v1/manifest.json --vocab-size 2048 --embd 128 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --ffn 256 --context 2048 --rank 126 --refine 20 --type Q8_0 --seed 1 --name ppl-demo-bigram

.PHONY: demo demo-model corpus corpus-verify

# Build the four pipeline tools and score the bundled model on the quick
# streams of the held-out corpus; prints the domain table (report.json goes
# to profiles/perplexity/). No network, well under a minute.
demo:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ $(DEMO_TOOLS)
	set -o pipefail; $(BIN)/ppl-tokenize --model $(DEMO_MODEL) --corpus $(DEMO_CORPUS) --quick \
	  | $(BIN)/ppl-window --context 512 --stride 256 \
	  | $(BIN)/ppl-score --model $(DEMO_MODEL) \
	  | $(BIN)/ppl-aggregate

# Regenerate the committed demo model; the result is byte-identical.
demo-model:
	$(GO) run ./eval/cmd/ppl-mkmodel $(DEMO_MODEL_FLAGS) -o $(DEMO_MODEL)

# Rebuild ppl-mixed-v1 from pinned Debian packages (apt-get download, no
# root needed; run `apt-get update` once first). Idempotent.
corpus:
	$(GO) run ./eval/cmd/ppl-corpus build $(MIXED_CORPUS)

corpus-verify:
	$(GO) run ./eval/cmd/ppl-corpus verify eval/corpora/ppl-heldout-v1/manifest.json
	$(GO) run ./eval/cmd/ppl-corpus verify $(MIXED_CORPUS)
