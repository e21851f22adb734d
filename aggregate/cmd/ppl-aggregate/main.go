// Command ppl-aggregate turns the scores of a perplexity run into its
// report: report.json for the record, and a table for the reader.
//
// It is the last stage of the pipeline:
//
//	ppl-tokenize --corpus eval/corpora/ppl-mixed-v1 model.gguf |
//	  ppl-window --context 4096 --stride 2048 |
//	  ppl-score model.gguf | ppl-aggregate
//
// or, with the windows of one run split between three machines,
//
//	ppl-window --shard 2/3 ... | ppl-score ... > scores-2.ndjson.zst   # on each machine
//	ppl-aggregate --output profiles/perplexity/q4-run scores-*.ndjson.zst
//
// Inputs are the files named on the command line (.ndjson, or zstd-compressed
// .ndjson.zst), or standard input when there are none; "-" names standard input
// among files. Every input must be a complete pipeline (tokenize, window and
// score headers and end trailers). Several inputs are merged: they must agree on
// the model's sha256, the tokenizer id, the corpus, the protocol (mode, context,
// stride and shard count), the KV cache dtype and the reference model, or
// ppl-aggregate stops with a message naming the field and both values; and
// together they must score every window the protocol defines for every stream
// exactly once, or it stops naming the missing (or twice-scored) windows.
//
// Standard output gets one line per domain and one for the whole corpus:
// streams, scored tokens, mean NLL, PPL, the 95% confidence interval of the PPL
// computed as if tokens were independent (naive), and the one from a block
// bootstrap over windows, which accounts for correlated tokens; with a
// reference model, mean KLD, 99th-percentile KLD and top-1 agreement.
//
// report.json (schema 1, described in docs/report.md) holds the provenance (every
// header record), the workload (corpus, streams, token counts, protocol) and
// unrounded float64 results for every window, stream, domain and the corpus:
// sums of log-probabilities, mean NLL, PPL, errors, bits per byte, byte and word
// perplexity, and the KLD, Δp, top-1 and PPL-ratio statistics that
// llama-perplexity prints. It is written atomically. A result that is not a
// finite number (log-probs so large that their sum overflows) is an error
// naming the stream and window, never a NaN in a report.
//
// Flags:
//
//	-o, --output DIR   directory for report.json, which must be empty or absent
//	                   (a temporary file a killed run left there does not count);
//	                   default profiles/perplexity/<UTC timestamp>-<model stem>/
//	--bootstrap N      bootstrap resamples (default 1000, at most 100000; 0 turns it off)
//	--seed S           seed of the bootstrap (default 1)
//
// The report's timestamp is the current time, or $SOURCE_DATE_EPOCH when set.
// Exit status: 0 on success, 1 on failure, 2 on a usage error.
package main

import (
	"os"

	"ppl.dev/aggregate/cli"
)

func main() { os.Exit(cli.Main()) }
