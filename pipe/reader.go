package pipe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/bytedance/sonic"
)

// Record is one decoded line. Exactly one of the typed pointers is set,
// according to Type. Raw is the line as read (without its newline), valid
// until the next call to Next.
type Record struct {
	Line   int
	Type   string
	Raw    []byte
	Header *Header
	Stream *Stream
	Tokens *Tokens
	Window *Window
	Scores *Scores
	End    *End
}

// Stage returns the stage the record belongs to.
func (r *Record) Stage() string {
	switch {
	case r.Header != nil:
		return r.Header.Stage
	case r.End != nil:
		return r.End.Stage
	}
	return StageOf(r.Type)
}

// Reader reads and validates records. Besides each record's own fields it
// checks the stage accounting: a header before a stage's records, one
// header per stage, and at the end of input an end trailer for every stage
// whose count matches.
type Reader struct {
	name   string
	r      *bufio.Reader
	line   int
	buf    []byte
	max    int // longest line accepted, in bytes
	count  map[string]int
	ended  map[string]bool
	sawAny bool
}

// NewReader reads records from r; name (a file name, or "<stdin>") starts
// every error message.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, r: bufio.NewReaderSize(r, 1<<20), max: MaxLineBytes, count: map[string]int{}, ended: map[string]bool{}}
}

// Name returns the input's name.
func (r *Reader) Name() string { return r.name }

// Errorf returns an error that names the input and the current line.
func (r *Reader) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", r.name, r.line, fmt.Sprintf(format, args...))
}

// Next returns the next record, or io.EOF after the last one when the input
// was complete. Blank lines are skipped.
func (r *Reader) Next() (*Record, error) {
	for {
		line, err := r.readLine()
		if err == io.EOF {
			return nil, r.finish()
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: read: %w", r.name, r.line+1, err)
		}
		r.line++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, err := decode(line)
		if err != nil {
			if r.line == 1 && bytes.HasPrefix(line, zstdMagic) {
				return nil, r.Errorf("zstd-compressed data: name the file *.zst, or decompress it")
			}
			return nil, r.Errorf("%v", err)
		}
		rec.Line = r.line
		if err := r.account(rec); err != nil {
			return nil, r.Errorf("%v", err)
		}
		r.sawAny = true
		return rec, nil
	}
}

func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.r.ReadSlice('\n')
		r.buf = append(r.buf, chunk...)
		if err == bufio.ErrBufferFull {
			if len(r.buf) > r.max {
				return nil, fmt.Errorf("line longer than the limit of %d bytes a record (%s)", r.max, noteZstd(r.buf))
			}
			continue
		}
		if err == io.EOF && len(r.buf) > 0 {
			err = nil // last line without a newline
		} else if err == nil {
			r.buf = r.buf[:len(r.buf)-1]
		}
		if err != nil {
			return nil, err
		}
		if len(r.buf) > r.max {
			return nil, fmt.Errorf("line of %d bytes exceeds the limit of %d a record", len(r.buf), r.max)
		}
		return r.buf, nil
	}
}

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// noteZstd says what an overlong first line probably is.
func noteZstd(b []byte) string {
	if bytes.HasPrefix(b, zstdMagic) {
		return "zstd-compressed data: name the file *.zst, or decompress it"
	}
	return "not a ppl record stream?"
}

func (r *Reader) account(rec *Record) error {
	st := rec.Stage()
	switch {
	case rec.Header != nil:
		if _, ok := r.count[st]; ok {
			return fmt.Errorf("second header for stage %q", st)
		}
		r.count[st] = 1
		return nil
	case rec.End != nil:
		n, ok := r.count[st]
		if !ok {
			return fmt.Errorf("end record for stage %q, which has no header", st)
		}
		if r.ended[st] {
			return fmt.Errorf("second end record for stage %q", st)
		}
		if n < rec.End.Records {
			return fmt.Errorf("end record of stage %q counts %d records, but %d were read: records lost", st, rec.End.Records, n)
		}
		if n > rec.End.Records {
			return fmt.Errorf("end record of stage %q counts %d records, but %d were read: %d extra records (inputs concatenated or edited?)", st, rec.End.Records, n, n-rec.End.Records)
		}
		r.ended[st] = true
		return nil
	}
	if _, ok := r.count[st]; !ok {
		return fmt.Errorf("%s record before the header of stage %q", rec.Type, st)
	}
	if r.ended[st] {
		return fmt.Errorf("%s record after the end record of stage %q", rec.Type, st)
	}
	r.count[st]++
	return nil
}

func (r *Reader) finish() error {
	if !r.sawAny {
		return fmt.Errorf("%s: no records: empty input", r.name)
	}
	var open []string
	for st := range r.count {
		if !r.ended[st] {
			open = append(open, st)
		}
	}
	if len(open) > 0 {
		sort.Strings(open)
		return fmt.Errorf("%s:%d: truncated input: no end record for stage %q", r.name, r.line, open[0])
	}
	return io.EOF
}

// Stages returns the stages whose headers were read so far.
func (r *Reader) Stages() []string {
	var s []string
	for st := range r.count {
		s = append(s, st)
	}
	sort.Strings(s)
	return s
}

// wire is the union of all record fields; pointers tell a missing field
// from a zero one.
type wire struct {
	Type *string `json:"type"`

	V           *int      `json:"v"`
	Stage       *string   `json:"stage"`
	Tool        *string   `json:"tool"`
	Records     *int      `json:"records"`
	ID          *string   `json:"id"`
	Domain      *string   `json:"domain"`
	SHA256      *string   `json:"sha256"`
	Bytes       *int64    `json:"bytes"`
	NTokens     *int      `json:"n_tokens"`
	Stream      *string   `json:"stream"`
	Offset      *int      `json:"offset"`
	IDs         *[]int32  `json:"ids"`
	Index       *int      `json:"index"`
	Begin       *int      `json:"begin"`
	End         *int      `json:"end"`
	ScoreFrom   *int      `json:"score_from"`
	BOS         bool      `json:"bos"`
	Logprobs    []float64 `json:"logprobs"`
	Argmax      []int32   `json:"argmax"`
	KLD         []float64 `json:"kld"`
	RefLogprobs []float64 `json:"ref_logprobs"`
	Top1Agree   []bool    `json:"top1_agree"`
	Source      string    `json:"source"`
	Words       int64     `json:"words"`
	Replaced    int       `json:"replaced"`
}

var errMissing = errors.New("missing")

func decode(line []byte) (*Record, error) {
	var w wire
	if err := sonic.Unmarshal(line, &w); err != nil {
		// Off amd64 sonic's decoder refuses some lines its JIT and
		// encoding/json read (a null in an int32 array, which checkNulls
		// names below): they take encoding/json's reading, so that a line
		// gets the same verdict on every machine.
		w = wire{}
		if json.Unmarshal(line, &w) != nil {
			return nil, fmt.Errorf("malformed JSON: %s", explain(line, err))
		}
	}
	if w.Type == nil {
		return nil, errors.New(`record has no "type"`)
	}
	rec := &Record{Type: *w.Type, Raw: line}
	var err error
	switch rec.Type {
	case TypeHeader:
		err = decodeHeader(line, &w, rec)
	case TypeStream:
		err = decodeStream(&w, rec)
	case TypeTokens:
		err = decodeTokens(&w, rec)
	case TypeWindow:
		err = decodeWindow(&w, rec)
	case TypeScores:
		err = decodeScores(&w, rec)
	case TypeEnd:
		err = decodeEnd(&w, rec)
	default:
		return nil, fmt.Errorf("unknown record type %q", rec.Type)
	}
	if err == nil && bytes.Contains(line, []byte("null")) {
		err = checkNulls(line)
	}
	if err != nil {
		return nil, fmt.Errorf("%s record: %w", rec.Type, err)
	}
	return rec, nil
}

// explain describes why a line failed to decode. sonic's messages span
// lines and quote the input, so the error path asks encoding/json, whose
// messages are one short line, falling back to sonic's first line.
func explain(line []byte, err error) string {
	var w wire
	if jerr := json.Unmarshal(line, &w); jerr != nil {
		var syn *json.SyntaxError
		if errors.As(jerr, &syn) {
			return fmt.Sprintf("%v at byte %d", jerr, syn.Offset)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(jerr, &typ) {
			return fmt.Sprintf("field %q is a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
		}
		return jerr.Error()
	}
	s := err.Error()
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// nullable has the array fields with pointer elements, to find a null
// among them: sonic, like encoding/json, reads a null element as 0.
type nullable struct {
	IDs         []*int32   `json:"ids"`
	Logprobs    []*float64 `json:"logprobs"`
	Argmax      []*int32   `json:"argmax"`
	KLD         []*float64 `json:"kld"`
	RefLogprobs []*float64 `json:"ref_logprobs"`
	Top1Agree   []*bool    `json:"top1_agree"`
}

// checkNulls returns an error naming the first null array element. Only
// lines that contain "null" at all pay for it.
func checkNulls(line []byte) error {
	var n nullable
	if err := json.Unmarshal(line, &n); err != nil {
		return nil // not about nulls: the main decode reports it
	}
	for _, f := range []struct {
		name, want string
		null       int
	}{
		{"ids", "a token id", firstNil(n.IDs)},
		{"logprobs", "a number", firstNil(n.Logprobs)},
		{"argmax", "a token id", firstNil(n.Argmax)},
		{"kld", "a number", firstNil(n.KLD)},
		{"ref_logprobs", "a number", firstNil(n.RefLogprobs)},
		{"top1_agree", "true or false", firstNil(n.Top1Agree)},
	} {
		if f.null >= 0 {
			return fmt.Errorf("%s[%d] is null, want %s", f.name, f.null, f.want)
		}
	}
	return nil
}

func firstNil[T any](xs []*T) int {
	for i, x := range xs {
		if x == nil {
			return i
		}
	}
	return -1
}

func need(name string, ok bool) error {
	if !ok {
		return fmt.Errorf("field %q: %w", name, errMissing)
	}
	return nil
}

func decodeHeader(line []byte, w *wire, rec *Record) error {
	if err := firstErr(need("v", w.V != nil), need("stage", w.Stage != nil), need("tool", w.Tool != nil)); err != nil {
		return err
	}
	if *w.V != Version {
		return fmt.Errorf("unsupported format version %d (this tool reads version %d)", *w.V, Version)
	}
	switch *w.Stage {
	case StageTokenize, StageWindow, StageScore:
	default:
		return fmt.Errorf("unknown stage %q", *w.Stage)
	}
	var h Header
	if err := sonic.Unmarshal(line, &h); err != nil {
		return fmt.Errorf("malformed: %s", explain(line, err))
	}
	rec.Header = &h
	return nil
}

func decodeStream(w *wire, rec *Record) error {
	if err := firstErr(need("id", w.ID != nil), need("domain", w.Domain != nil), need("sha256", w.SHA256 != nil),
		need("bytes", w.Bytes != nil), need("n_tokens", w.NTokens != nil)); err != nil {
		return err
	}
	if *w.ID == "" {
		return errors.New(`field "id" is empty`)
	}
	if *w.Bytes < 0 || *w.NTokens < 0 {
		return fmt.Errorf("negative size (bytes %d, n_tokens %d)", *w.Bytes, *w.NTokens)
	}
	rec.Stream = &Stream{Type: TypeStream, ID: *w.ID, Domain: *w.Domain, Source: w.Source, SHA256: *w.SHA256,
		Bytes: *w.Bytes, Words: w.Words, NTokens: *w.NTokens, Replaced: w.Replaced}
	return nil
}

func decodeTokens(w *wire, rec *Record) error {
	if err := firstErr(need("stream", w.Stream != nil), need("offset", w.Offset != nil), need("ids", w.IDs != nil)); err != nil {
		return err
	}
	if *w.Offset < 0 {
		return fmt.Errorf("offset %d is negative", *w.Offset)
	}
	if len(*w.IDs) > MaxTokensPerRecord {
		return fmt.Errorf("%d ids exceed the limit of %d a record", len(*w.IDs), MaxTokensPerRecord)
	}
	for i, id := range *w.IDs {
		if id < 0 {
			return fmt.Errorf("ids[%d] = %d is negative", i, id)
		}
	}
	rec.Tokens = &Tokens{Type: TypeTokens, Stream: *w.Stream, Offset: *w.Offset, IDs: *w.IDs}
	return nil
}

func checkSpan(w *wire) error {
	if err := firstErr(need("stream", w.Stream != nil), need("index", w.Index != nil), need("begin", w.Begin != nil),
		need("end", w.End != nil), need("score_from", w.ScoreFrom != nil)); err != nil {
		return err
	}
	if *w.Index < 0 {
		return fmt.Errorf("index %d is negative", *w.Index)
	}
	if b, s, e := *w.Begin, *w.ScoreFrom, *w.End; b < 0 || s <= b || e <= s {
		return fmt.Errorf("span begin %d, score_from %d, end %d: want 0 <= begin < score_from < end", b, s, e)
	}
	return nil
}

func decodeWindow(w *wire, rec *Record) error {
	if err := checkSpan(w); err != nil {
		return err
	}
	rec.Window = &Window{Type: TypeWindow, Stream: *w.Stream, Index: *w.Index, Begin: *w.Begin, End: *w.End, ScoreFrom: *w.ScoreFrom, BOS: w.BOS}
	return nil
}

func decodeScores(w *wire, rec *Record) error {
	if err := checkSpan(w); err != nil {
		return err
	}
	if err := need("logprobs", w.Logprobs != nil); err != nil {
		return err
	}
	s := Scores{Type: TypeScores, Stream: *w.Stream, Index: *w.Index, Begin: *w.Begin, End: *w.End, ScoreFrom: *w.ScoreFrom,
		BOS: w.BOS, Logprobs: w.Logprobs, Argmax: w.Argmax, KLD: w.KLD, RefLogprobs: w.RefLogprobs, Top1Agree: w.Top1Agree}
	n := s.End - s.ScoreFrom
	for _, f := range []struct {
		name string
		n    int
		set  bool
	}{
		{"logprobs", len(s.Logprobs), true},
		{"argmax", len(s.Argmax), s.Argmax != nil},
		{"kld", len(s.KLD), s.KLD != nil},
		{"ref_logprobs", len(s.RefLogprobs), s.RefLogprobs != nil},
		{"top1_agree", len(s.Top1Agree), s.Top1Agree != nil},
	} {
		if f.set && f.n != n {
			return fmt.Errorf("%s has %d values for %d targets", f.name, f.n, n)
		}
	}
	if err := checkLogprobs("logprobs", s.Logprobs); err != nil {
		return err
	}
	if err := checkLogprobs("ref_logprobs", s.RefLogprobs); err != nil {
		return err
	}
	for i, k := range s.KLD {
		if k < -1e-9 || math.IsNaN(k) || math.IsInf(k, 0) {
			return fmt.Errorf("kld[%d] = %v: want a finite value >= 0", i, k)
		}
	}
	for i, a := range s.Argmax {
		if a < 0 {
			return fmt.Errorf("argmax[%d] = %d is negative", i, a)
		}
	}
	rec.Scores = &s
	return nil
}

// checkLogprobs requires finite values <= 0 (of a probability's log).
func checkLogprobs(name string, lps []float64) error {
	for i, lp := range lps {
		if lp > 0 {
			return fmt.Errorf("%s[%d] = %v is positive", name, i, lp)
		}
		if math.IsNaN(lp) || math.IsInf(lp, 0) {
			return fmt.Errorf("%s[%d] = %v is not finite", name, i, lp)
		}
	}
	return nil
}

// CheckScores validates a scores record's arrays as the reader does: one
// value per target, log-probs finite and <= 0, kld >= 0, argmax >= 0. For
// scores that did not come through a Reader, such as a cache replay.
func CheckScores(s *Scores) error {
	w := wire{Stream: &s.Stream, Index: &s.Index, Begin: &s.Begin, End: &s.End, ScoreFrom: &s.ScoreFrom, BOS: s.BOS,
		Logprobs: s.Logprobs, Argmax: s.Argmax, KLD: s.KLD, RefLogprobs: s.RefLogprobs, Top1Agree: s.Top1Agree}
	var rec Record
	return decodeScores(&w, &rec)
}

func decodeEnd(w *wire, rec *Record) error {
	if err := firstErr(need("stage", w.Stage != nil), need("records", w.Records != nil)); err != nil {
		return err
	}
	if *w.Records < 0 {
		return fmt.Errorf("records %d is negative", *w.Records)
	}
	rec.End = &End{Type: TypeEnd, Stage: *w.Stage, Records: *w.Records}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
