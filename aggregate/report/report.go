// Package report is the schema of report.json, the file ppl-aggregate
// writes and ppl-compare reads. docs/report.md describes every field.
//
// The report is the published artefact of a perplexity run, so it keeps
// everything needed to check or redo it: the header records of every
// pipeline stage (provenance), the streams and protocol (workload), and
// unrounded float64 results for every window, stream, domain and the
// whole corpus. Only the "run" object depends on when and from which files
// the report was made; everything else is a function of the scores, so two
// runs of the same measurement, sharded or not, agree byte for byte
// outside "run".
//
// The schema is versioned by the top-level "schema" number: a reader
// refuses any other version than the one it knows. Adding a field keeps
// the number; renaming, removing or changing the meaning of one bumps it.
package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"ppl.dev/pipe"
)

// Schema is the version of the report format this package writes and reads.
const Schema = 1

// FileName is the report's name inside its output directory.
const FileName = "report.json"

// F is a float64 that encodes as the shortest decimal that reads back to
// the same bits (strconv 'g', precision -1), and as null when it is not
// finite: a perplexity can overflow float64 (mean NLL above 709.78), and a
// report must stay valid JSON. null decodes to NaN.
type F float64

// MarshalJSON implements json.Marshaler.
func (f F) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *F) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = F(math.NaN())
		return nil
	}
	x, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("number %q: %w", b, err)
	}
	*f = F(x)
	return nil
}

// Report is the content of report.json.
type Report struct {
	Schema     int        `json:"schema"`
	Tool       string     `json:"tool"`
	Version    string     `json:"version"`
	Run        Run        `json:"run"`
	Provenance Provenance `json:"provenance"`
	Workload   Workload   `json:"workload"`
	Method     Method     `json:"method"`
	Overall    Group      `json:"overall"`
	Domains    []Group    `json:"domains"`
	Streams    []Stream   `json:"streams"`
	// Warnings: streams that got no window under the protocol (shorter
	// than the context), and ppl-score's warnings about its settings.
	Warnings []string `json:"warnings,omitempty"`
}

// Run says when and from which inputs the report was made.
type Run struct {
	Created string  `json:"created"` // UTC, RFC 3339
	Inputs  []Input `json:"inputs"`
	// Build is the build of the ppl-aggregate that wrote the report.
	Build *Build `json:"build,omitempty"`
	// WallSeconds is ppl-aggregate's wall time, from its start to the
	// report: in a pipeline (or under ppl run) it starts with the other
	// stages and ends last, so this is the run's wall time; from files,
	// only the aggregation's. TokensPerSecond is the scored tokens over
	// it. Both absent when $SOURCE_DATE_EPOCH asks for a reproducible
	// report.
	WallSeconds     F `json:"wall_seconds,omitempty"`
	TokensPerSecond F `json:"tokens_per_second,omitempty"`
}

// Build identifies a tool's build, from runtime/debug.ReadBuildInfo: the
// Go version and, when it was built from a git checkout, the commit,
// its time and whether the tree had uncommitted changes.
type Build struct {
	Go       string `json:"go"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// Input is one record file the report was made from.
type Input struct {
	Name    string `json:"name"`
	Shard   string `json:"shard,omitempty"`
	Windows int    `json:"windows"`
}

// Provenance holds the distinct header records of each stage, in the
// order first seen, as JSON objects. Shard-specific fields (protocol.shard
// and flags.shard of the window header) are removed, so the shards of one
// run contribute one window header; Run.Inputs says which shard each input
// was.
type Provenance struct {
	Tokenize []json.RawMessage `json:"tokenize"`
	Window   []json.RawMessage `json:"window"`
	Score    []json.RawMessage `json:"score"`
}

// Workload is what was measured: model, tokenizer, corpus, protocol and
// streams.
type Workload struct {
	Model     *pipe.Model     `json:"model,omitempty"`
	Reference *pipe.Model     `json:"reference,omitempty"`
	KVDtype   string          `json:"kv_dtype,omitempty"`
	Tokenizer *pipe.Tokenizer `json:"tokenizer,omitempty"`
	Corpus    *pipe.Corpus    `json:"corpus,omitempty"`
	Protocol  pipe.Protocol   `json:"protocol"`
	// Streams lists every stream of the input, in input order.
	Streams      []WorkStream `json:"streams"`
	Tokens       int          `json:"tokens"`
	ScoredTokens int          `json:"scored_tokens"`
}

// WorkStream is one stream of the workload.
type WorkStream struct {
	ID           string `json:"id"`
	Domain       string `json:"domain"`
	Source       string `json:"source,omitempty"`
	SHA256       string `json:"sha256"`
	Bytes        int64  `json:"bytes"`
	Words        int64  `json:"words,omitempty"`
	Tokens       int    `json:"tokens"`
	Windows      int    `json:"windows"`
	ScoredTokens int    `json:"scored_tokens"`
}

// Method records how the numbers were computed.
type Method struct {
	Summation  string    `json:"summation"`
	Percentile string    `json:"percentile"`
	NaiveError string    `json:"naive_error"`
	Confidence F         `json:"confidence"`
	Z          F         `json:"z"`
	Bootstrap  Bootstrap `json:"bootstrap"`
}

// Bootstrap records the block bootstrap's settings.
type Bootstrap struct {
	Resamples int    `json:"resamples"`
	Seed      uint64 `json:"seed"`
	Block     string `json:"block"`
	Generator string `json:"generator"`
	Interval  string `json:"interval"`
}

// Group is the result for the whole corpus, one domain or one stream.
type Group struct {
	// Name is "overall", the domain, or the stream id.
	Name         string `json:"name"`
	Streams      int    `json:"streams"`
	Windows      int    `json:"windows"`
	ScoredTokens int    `json:"scored_tokens"`
	Bytes        int64  `json:"bytes"`
	Words        int64  `json:"words,omitempty"`

	// Perplexity is null when the group has no scored token.
	Perplexity *Perplexity `json:"perplexity"`
	// The blocks below are present when the scores carry the matching
	// fields: kld, top1_agree, ref_logprobs.
	KLD       *KLD       `json:"kld,omitempty"`
	Top1      *Top1      `json:"top1,omitempty"`
	DeltaP    *DeltaP    `json:"delta_p,omitempty"`
	Reference *Reference `json:"reference,omitempty"`
}

// Perplexity is the model's own result on a group's scored tokens.
type Perplexity struct {
	SumLogprob F `json:"sum_logprob"`
	MeanNLL    F `json:"mean_nll"`
	PPL        F `json:"ppl"`
	// NLLStddev is the population standard deviation of the per-token NLL.
	NLLStddev F `json:"nll_stddev"`
	// Naive treats tokens as independent: se = σ/√(N−1); absent for N < 2.
	Naive *Naive `json:"naive,omitempty"`
	// Bootstrap resamples whole windows; absent for fewer than 2 windows
	// or --bootstrap 0.
	Bootstrap *Interval `json:"bootstrap,omitempty"`
	// Tokenizer-independent normalisations over the UTF-8 bytes (and
	// whitespace-separated words) of the group's scored streams.
	BitsPerByte    F  `json:"bits_per_byte"`
	BytePerplexity F  `json:"byte_perplexity"`
	WordPerplexity *F `json:"word_perplexity,omitempty"`
}

// Naive is the standard error of the mean NLL for independent tokens.
type Naive struct {
	SE        F    `json:"se"`          // of the mean NLL
	PPLSE     F    `json:"ppl_se"`      // PPL·se, llama-perplexity's "±"
	MeanNLLCI [2]F `json:"mean_nll_ci"` // mean ± z·se
	PPLCI     [2]F `json:"ppl_ci"`      // exp of MeanNLLCI
}

// Interval is a block-bootstrap estimate for the mean NLL.
type Interval struct {
	SE        F    `json:"se"`
	MeanNLLCI [2]F `json:"mean_nll_ci"`
	PPLCI     [2]F `json:"ppl_ci"`
}

// Dist summarises a per-token quantity: mean ± naive error, extremes and
// nearest-rank percentiles (P999 is the 99.9th, P01 the 0.1th).
type Dist struct {
	Mean F `json:"mean"`
	SE   F `json:"se"`
	Max  F `json:"max"`
	P999 F `json:"p99.9"`
	P99  F `json:"p99"`
	P95  F `json:"p95"`
	P90  F `json:"p90"`
	P50  F `json:"p50"`
	P10  F `json:"p10"`
	P5   F `json:"p5"`
	P1   F `json:"p1"`
	P01  F `json:"p0.1"`
	Min  F `json:"min"`
}

// KLD is KL(reference || model) per target.
type KLD struct {
	Dist
	Histogram Histogram `json:"histogram"`
}

// Histogram counts values in fixed bins: Counts[0] those below Edges[0],
// Counts[i] those in [Edges[i-1], Edges[i]), the last those >= the last
// edge.
type Histogram struct {
	Edges  []F   `json:"edges"`
	Counts []int `json:"counts"`
}

// Top1 is the agreement of the two models' most probable tokens.
type Top1 struct {
	Agree     int `json:"agree"`
	Targets   int `json:"targets"`
	Agreement F   `json:"agreement"`
	SE        F   `json:"se"` // binomial: sqrt(p(1−p)/(N−1))
}

// DeltaP is p_reference(target) − p_model(target) per target.
type DeltaP struct {
	Dist
	RMS   F `json:"rms"`
	RMSSE F `json:"rms_se"`
}

// Reference compares the model with the reference model on the same
// targets, with errors that use the covariance of the paired NLLs.
type Reference struct {
	MeanNLL      F `json:"mean_nll"`
	PPL          F `json:"ppl"`
	PPLSE        F `json:"ppl_se"`
	Correlation  F `json:"correlation"`
	LnPPLRatio   F `json:"ln_ppl_ratio"`
	LnPPLRatioSE F `json:"ln_ppl_ratio_se"`
	PPLRatio     F `json:"ppl_ratio"`
	PPLRatioSE   F `json:"ppl_ratio_se"`
	PPLDiff      F `json:"ppl_diff"`
	PPLDiffSE    F `json:"ppl_diff_se"`
}

// Stream is one stream's result and its windows.
type Stream struct {
	Group
	Domain  string   `json:"domain"`
	Windows []Window `json:"window_results"`
}

// Window is one window's result.
type Window struct {
	Index        int  `json:"index"`
	Begin        int  `json:"begin"`
	End          int  `json:"end"`
	ScoreFrom    int  `json:"score_from"`
	BOS          bool `json:"bos,omitempty"`
	ScoredTokens int  `json:"scored_tokens"`
	SumLogprob   F    `json:"sum_logprob"`
	MeanNLL      F    `json:"mean_nll"`
	PPL          F    `json:"ppl"`
	MeanKLD      *F   `json:"mean_kld,omitempty"`
}

// Encode returns the report as indented JSON with a final newline. Strings
// are kept as they are (no HTML escaping of <, > and &).
func Encode(r *Report) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", " ")
	if err := e.Encode(r); err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode parses a report and checks its schema version.
func Decode(data []byte) (*Report, error) {
	var probe struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("not a report: %v", err)
	}
	if probe.Schema == nil {
		return nil, errors.New(`not a report: no "schema" field`)
	}
	if *probe.Schema != Schema {
		return nil, fmt.Errorf("report schema %d: this tool reads schema %d", *probe.Schema, Schema)
	}
	var r Report
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("malformed report: %v", err)
	}
	return &r, nil
}

// MaxBytes bounds a report file that Read reads. A report holds about 200
// bytes a window, so 1 GiB is a corpus of millions of windows.
const MaxBytes = 1 << 30

// Read reads and decodes a report file (or report.json inside a directory).
func Read(path string) (*Report, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, FileName)
	}
	if err := pipe.CheckRegular(path); err != nil {
		return nil, err
	}
	if st, err := os.Stat(path); err == nil && st.Size() > MaxBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d a report", path, st.Size(), MaxBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: larger than the limit of %d bytes a report", path, MaxBytes)
	}
	r, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteDir writes the report as dir/report.json, atomically (a temporary
// file renamed into place). dir must be empty or absent; it is created.
func WriteDir(dir string, r *Report) (string, error) {
	b, err := Encode(r)
	if err != nil {
		return "", err
	}
	if err := PrepareDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName)
	f, err := pipe.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return "", err
	}
	// The temporary file was private (0600); a report is for sharing.
	if err := os.Chmod(path, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// PrepareDir checks that dir is empty or absent and creates it. Temporary
// files a killed write left behind (pipe.IsTemp) do not count, and are
// removed.
func PrepareDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case err == nil:
		for _, e := range ents {
			if !pipe.IsTemp(e.Name()) || !e.Type().IsRegular() {
				return fmt.Errorf("output directory %s is not empty", dir)
			}
		}
		for _, e := range ents {
			os.Remove(filepath.Join(dir, e.Name()))
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	default:
		return fmt.Errorf("output directory: %w", err)
	}
}

// NonFinite returns the path of the first NaN or infinite number in v (a
// Group, Window, Report, ...), such as "perplexity.ppl = +Inf", or "" when
// every number is finite. A report must hold none: ppl-aggregate refuses to
// write one, and ppl-compare to read one.
func NonFinite(v any) string { return nonFinite(reflect.ValueOf(v), "") }

// nonFinite returns the path of the first non-finite float (F included)
// under v, or "".
func nonFinite(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return strings.TrimPrefix(path, ".") + " = " + strconv.FormatFloat(f, 'g', -1, 64)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return nonFinite(v.Elem(), path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if name == "-" {
				continue
			}
			if f.Anonymous {
				name = ""
			} else {
				name = "." + name
			}
			if p := nonFinite(v.Field(i), path+name); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if p := nonFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}
