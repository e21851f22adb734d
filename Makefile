# ppl: build, test and run the perplexity toolkit. `make help` lists targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
TOOLS := ppl-tokenize ppl-window ppl-score ppl-aggregate ppl-compare
MODULES = $(shell $(GO) list -m -f '{{.Path}}/...')
FUZZTIME ?= 10s

.PHONY: all build test test-short fuzz demo help clean vet

all: build

help:
	@echo "make build       build all tools into $(BIN)/"
	@echo "make test        run every test (the CI command)"
	@echo "make test-short  the quick subset"
	@echo "make fuzz        run each fuzz target for FUZZTIME (default $(FUZZTIME))"
	@echo "make demo        run the pipeline on the bundled model and corpus"

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./tokenize/cmd/ppl-tokenize ./window/cmd/ppl-window ./score/cmd/ppl-score ./aggregate/cmd/ppl-aggregate ./compare/cmd/ppl-compare

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

clean:
	rm -rf $(BIN)
