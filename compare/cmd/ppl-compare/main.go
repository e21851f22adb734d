// Command ppl-compare sets perplexity reports side by side and says whether
// a candidate is better, worse or equal within noise.
//
//	ppl-compare profiles/perplexity/f16/report.json profiles/perplexity/q4_k_m/report.json
//	ppl-compare --format html -o compare.html base.json q8.json q4.json
//
// BASE and each CANDIDATE are report.json files written by ppl-aggregate, or
// the directories holding them. For each domain, then for the whole corpus,
// it prints one row per report: scored tokens, PPL with the report's own 95%
// interval, and for each candidate the difference and the ratio of its PPL to
// the base's, the ratio's 95% interval, whether that interval came from a
// paired or an unpaired bootstrap, a verdict, and the mean KLD, p99 KLD and
// top-1 agreement when the report was scored against a reference model.
//
// The interval is a bootstrap over windows: when both reports scored the same
// windows of the same tokens (same tokenizer, corpus and protocol), each
// replicate draws windows with replacement and takes the difference of the
// two models' NLL on the same draw, so the difficulty both models share
// cancels; otherwise the two are resampled independently ("unpaired"). The
// verdict is "better" when the whole interval of the ratio lies below 1,
// "worse" when above, else "equal within noise"; "n/a" when there are fewer
// than two windows or --bootstrap 0. When both reports have KLD against the
// same reference model (and reference KV cache), the verdict is on the mean
// KLD instead, from a paired bootstrap of its difference over windows, and
// reads "worse (KLD)": a KV format can leave PPL within noise and still move
// the distribution. Across tokenizers the verdict is on bits per byte
// ("(bits/byte)"), which counts the same bytes for both.
//
// Before the tables it lists the settings that differ between the reports:
// model, general.name, weight types, KV dtype, activations, device, RoPE,
// SSM state dtype, reference and its KV dtype, protocol, tokenizer, corpus
// (JSON: "differences"). After each domain's table, when a report has KLD,
// a second table gives llama-perplexity's --kl-divergence statistics: mean
// KLD and the candidate's difference with its interval, KLD median, p90,
// p99, p99.9 and max, mean and RMS Δp with llama.cpp's sign (p_model −
// p_reference: negative when the model is worse; the report's delta_p has
// the opposite sign), PPL(Q)/PPL(ref) ± its error and "same top p".
//
// Reports whose corpus, stream sha256s, protocol, context or stride differ
// measure different things: ppl-compare stops with exit status 1 and a message
// naming the field and both values, unless --allow-protocol-mismatch, which
// compares anyway and prints every difference (on standard error, and in the
// output). A different tokenizer is allowed but noted: PPL then counts
// different tokens, and bits per byte is the fairer measure.
//
// Flags:
//
//	-f, --format F              table (default), json, markdown or html
//	-o, --output FILE           write there (atomically) instead of standard output
//	-l, --label NAME            name a report; one per report, base first (default: directory names)
//	--log-level L               debug, info (default), warn or error
//	--allow-protocol-mismatch   compare reports of different corpus or protocol
//	--bootstrap N               resamples (default 1000; 0: no interval, no verdict)
//	--seed S                    seed of the bootstrap (default 1)
//
// The html format is one self-contained file, no network access: per-domain bar
// charts of PPL with intervals, the tables, the per-window NLL curve of each
// stream for every report with a legend, and the KLD histogram of every report
// that has one. Bar charts of close values start near the smallest, not at 0,
// and say so; wide tables scroll inside their box.
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error.
package main

import (
	"os"

	"ppl.dev/compare/cli"
)

func main() { os.Exit(cli.Main()) }
