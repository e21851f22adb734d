package pipe

import (
	"bytes"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSample(t testing.TB, lp []float64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := NewWriter(&buf, StageTokenize)
	must(t, tw.Header(Header{Tool: "ppl-tokenize", Version: "test", Corpus: &Corpus{Name: "c"}}))
	must(t, tw.Stream(&Stream{ID: "s\"1\n", Domain: "en", SHA256: strings.Repeat("a", 64), Bytes: 10, NTokens: 4}))
	must(t, tw.Tokens(&Tokens{Stream: "s\"1\n", Offset: 0, IDs: []int32{1, 2}}))
	must(t, tw.Tokens(&Tokens{Stream: "s\"1\n", Offset: 2, IDs: []int32{3, 2147483647}}))
	must(t, tw.Flush())
	sw := NewWriter(&buf, StageScore)
	must(t, sw.Header(Header{Tool: "ppl-score", Version: "test", Score: &Score{Device: "cpu", KVDtype: "f32"}}))
	must(t, sw.Scores(&Scores{Stream: "s\"1\n", Index: 0, Begin: 0, End: 1 + len(lp), ScoreFrom: 1, Logprobs: lp}))
	must(t, sw.Flush())
	must(t, tw.End())
	must(t, tw.Flush())
	must(t, sw.End())
	must(t, sw.Flush())
	return buf.Bytes()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(t testing.TB, data []byte) ([]*Record, error) {
	t.Helper()
	r := NewReader(bytes.NewReader(data), "in")
	var out []*Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		rec.Raw = append([]byte(nil), rec.Raw...)
		out = append(out, rec)
	}
}

// Log-probabilities must survive a write and a read to the last bit.
func TestFloatRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	lp := []float64{0, -0.0, -1e-300, -5e-324, -math.MaxFloat64, -1, -0.1, -1e-5, -123456789.125, -math.SmallestNonzeroFloat64}
	for i := 0; i < 20000; i++ {
		switch i % 3 {
		case 0:
			lp = append(lp, -rng.ExpFloat64()*10)
		case 1:
			if f := math.Float64frombits(rng.Uint64() >> 1); !math.IsNaN(f) && !math.IsInf(f, 0) {
				lp = append(lp, -f)
			}
		default:
			lp = append(lp, -float64(float32(rng.Float64()*30)))
		}
	}
	recs, err := readAll(t, writeSample(t, lp))
	must(t, err)
	var got []float64
	for _, r := range recs {
		if r.Scores != nil {
			got = r.Scores.Logprobs
		}
	}
	if len(got) != len(lp) {
		t.Fatalf("got %d logprobs, want %d", len(got), len(lp))
	}
	for i := range lp {
		if math.Float64bits(got[i]) != math.Float64bits(lp[i]) && !(got[i] == 0 && lp[i] == 0) {
			t.Fatalf("logprobs[%d]: wrote %v (%x), read %v (%x)", i, lp[i], math.Float64bits(lp[i]), got[i], math.Float64bits(got[i]))
		}
	}
}

func TestRoundTripRecords(t *testing.T) {
	data := writeSample(t, []float64{-1.5, -2})
	recs, err := readAll(t, data)
	must(t, err)
	types := []string{}
	for _, r := range recs {
		types = append(types, r.Type)
	}
	if got := strings.Join(types, ","); got != "header,stream,tokens,tokens,header,scores,end,end" {
		t.Fatalf("types %s", got)
	}
	if s := recs[1].Stream; s.ID != "s\"1\n" || s.NTokens != 4 || s.Bytes != 10 {
		t.Fatalf("stream %+v", s)
	}
	if ids := recs[3].Tokens.IDs; ids[1] != 2147483647 {
		t.Fatalf("ids %v", ids)
	}
	if h := recs[4].Header; h.Stage != StageScore || h.Score.KVDtype != "f32" || h.V != Version {
		t.Fatalf("header %+v", h)
	}
	ss := NewStreams()
	for _, r := range recs {
		_, err := ss.Add(r)
		must(t, err)
	}
	must(t, ss.CheckComplete())
	if st, _ := ss.Get("s\"1\n"); len(st.IDs) != 4 {
		t.Fatalf("assembled %v", st.IDs)
	}
	// Passing records through reproduces the input byte for byte.
	var out bytes.Buffer
	w := NewWriter(&out, StageWindow)
	for _, r := range recs {
		must(t, w.Pass(r))
	}
	must(t, w.Flush())
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("pass-through changed the records:\n%s\n%s", out.Bytes(), data)
	}
}

func TestReaderErrors(t *testing.T) {
	good := string(writeSample(t, []float64{-1, -2}))
	lines := strings.Split(strings.TrimSuffix(good, "\n"), "\n")
	join := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	hdr := lines[0]
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "in: no records: empty input"},
		{"truncated", join(lines[:6]...), `in:6: truncated input: no end record for stage "score"`},
		{"cut mid-line", good[:len(good)-20], "in:8: malformed JSON"},
		{"not json", join(hdr, "{oops"), "in:2: malformed JSON"},
		{"no type", join(hdr, `{"stage":"x"}`), `in:2: record has no "type"`},
		{"unknown type", join(hdr, `{"type":"bogus"}`), `in:2: unknown record type "bogus"`},
		{"bad version", `{"type":"header","v":2,"stage":"tokenize","tool":"x"}`, "in:1: header record: unsupported format version 2"},
		{"unknown stage", `{"type":"header","v":1,"stage":"mystery","tool":"x"}`, `in:1: header record: unknown stage "mystery"`},
		{"missing field", join(hdr, `{"type":"tokens","stream":"a","ids":[1]}`), `in:2: tokens record: field "offset": missing`},
		{"negative id", join(hdr, `{"type":"tokens","stream":"a","offset":0,"ids":[1,-3]}`), `in:2: tokens record: ids[1] = -3 is negative`},
		{"id overflow", join(hdr, `{"type":"tokens","stream":"a","offset":0,"ids":[2147483648]}`), `in:2: malformed JSON`},
		{"bad span", join(hdr, `{"type":"window","stream":"a","index":0,"begin":5,"end":9,"score_from":5}`), `in:2: window record: span begin 5, score_from 5, end 9`},
		{"before header", `{"type":"window","stream":"a","index":0,"begin":0,"end":9,"score_from":1}`, `in:1: window record before the header of stage "window"`},
		{"count", join(hdr, `{"type":"end","stage":"tokenize","records":3}`), `in:2: end record of stage "tokenize" counts 3 records, but 1 were read`},
		{"second header", join(hdr, hdr), `in:2: second header for stage "tokenize"`},
		{"scores length", join(lines[0], lines[4], `{"type":"scores","stream":"a","index":0,"begin":0,"end":4,"score_from":1,"logprobs":[-1,-2]}`), `in:3: scores record: logprobs has 2 values for 3 targets`},
		{"positive logprob", join(lines[0], lines[4], `{"type":"scores","stream":"a","index":0,"begin":0,"end":2,"score_from":1,"logprobs":[0.5]}`), `in:3: scores record: logprobs[0] = 0.5 is positive`},
		{"string number", join(hdr, `{"type":"tokens","stream":"a","offset":"0","ids":[1]}`), `in:2: malformed JSON`},
		{"null id", join(hdr, `{"type":"tokens","stream":"a","offset":0,"ids":[1,null,2]}`), `in:2: tokens record: ids[1] is null, want a token id`},
		{"null logprob", join(lines[0], lines[4], `{"type":"scores","stream":"null","index":0,"begin":0,"end":3,"score_from":1,"logprobs":[-1,null]}`), `in:3: scores record: logprobs[1] is null, want a number`},
		{"null argmax", join(lines[0], lines[4], `{"type":"scores","stream":"a","index":0,"begin":0,"end":2,"score_from":1,"logprobs":[-1],"argmax":[null]}`), `in:3: scores record: argmax[0] is null, want a token id`},
		{"null kld", join(lines[0], lines[4], `{"type":"scores","stream":"a","index":0,"begin":0,"end":2,"score_from":1,"logprobs":[-1],"kld":[null]}`), `in:3: scores record: kld[0] is null, want a number`},
		{"extra record", join(hdr, lines[1], `{"type":"end","stage":"tokenize","records":1}`), `in:3: end record of stage "tokenize" counts 1 records, but 2 were read: 1 extra records`},
		{"zstd", "\x28\xb5\x2f\xfd\x00garbage\n", `in:1: zstd-compressed data: name the file *.zst`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, []byte(tc.in))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

// A line beyond the limit is an error, whether or not it ends.
func TestReaderLineLimit(t *testing.T) {
	good := writeSample(t, []float64{-1, -2})
	for _, tc := range []struct {
		name, in, want string
	}{
		{"long line", strings.Repeat("x", 5000) + "\n", "in:1: read: line of 5000 bytes exceeds the limit of 4096 a record"},
		{"no newline", strings.Repeat("\x00", 3<<20), "in:1: read: line longer than the limit of 4096 bytes a record"},
	} {
		r := NewReader(strings.NewReader(tc.in), "in")
		r.max = 4096
		_, err := r.Next()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want prefix %q", tc.name, err, tc.want)
		}
	}
	r := NewReader(bytes.NewReader(good), "in")
	r.max = 4096
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("records under the limit: %v", err)
		}
	}
}

// A small .zst that decompresses to one endless line stops at the limit.
func TestZstdBombBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bomb.ndjson.zst")
	a, err := Create(p)
	must(t, err)
	a.Write(make([]byte, 8<<20))
	must(t, a.Commit())
	rc, err := Open(p)
	must(t, err)
	defer rc.Close()
	r := NewReader(rc, p)
	r.max = 1 << 20
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "line longer than the limit of 1048576 bytes a record") {
		t.Fatal(err)
	}
}

func TestCheckScores(t *testing.T) {
	ok := Scores{Stream: "a", Begin: 0, ScoreFrom: 1, End: 3, Logprobs: []float64{-1, -2}, Argmax: []int32{4, 5}}
	must(t, CheckScores(&ok))
	for _, tc := range []struct {
		name string
		edit func(*Scores)
		want string
	}{
		{"positive", func(s *Scores) { s.Logprobs = []float64{-1, 2} }, "logprobs[1] = 2 is positive"},
		{"inf", func(s *Scores) { s.Logprobs = []float64{math.Inf(-1), -1} }, "logprobs[0] = -Inf is not finite"},
		{"short argmax", func(s *Scores) { s.Argmax = []int32{1} }, "argmax has 1 values for 2 targets"},
		{"negative kld", func(s *Scores) { s.KLD = []float64{-1, 0} }, "kld[0] = -1: want a finite value >= 0"},
	} {
		s := ok
		tc.edit(&s)
		if err := CheckScores(&s); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Create's temporary name is short (a 255-byte output name works) and
// recognized by IsTemp; CheckRegular and CheckNotInput refuse what they
// should.
func TestCreateAndInputChecks(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("r", 251)+".zst")
	a, err := Create(long)
	must(t, err)
	if !IsTemp(filepath.Base(a.tmp.Name())) {
		t.Errorf("temporary %s not recognized", a.tmp.Name())
	}
	a.Write([]byte("x\n"))
	must(t, a.Commit())
	if err := CheckRegular(dir); err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Errorf("directory: %v", err)
	}
	must(t, CheckRegular(long))
	must(t, CheckRegular(filepath.Join(dir, "absent"))) // opening it reports why
	link := filepath.Join(dir, "link")
	must(t, os.Symlink(long, link))
	if err := CheckNotInput(link, "-", long); err == nil || !strings.Contains(err.Error(), "is the input") {
		t.Errorf("link to an input: %v", err)
	}
	must(t, CheckNotInput(filepath.Join(dir, "new"), long))
}

func TestStreamsErrors(t *testing.T) {
	st := func(id string, n int) *Record { return &Record{Stream: &Stream{ID: id, NTokens: n}} }
	tk := func(id string, off int, ids ...int32) *Record {
		return &Record{Tokens: &Tokens{Stream: id, Offset: off, IDs: ids}}
	}
	tests := []struct {
		name string
		recs []*Record
		want string
	}{
		{"dup", []*Record{st("a", 1), st("a", 1)}, `stream "a" announced twice`},
		{"orphan", []*Record{tk("a", 0, 1)}, `tokens for stream "a" before its stream record`},
		{"gap", []*Record{st("a", 4), tk("a", 1, 1)}, `tokens of stream "a" at offset 1, expected offset 0`},
		{"overflow", []*Record{st("a", 1), tk("a", 0, 1, 2)}, `stream "a" has more than its n_tokens 1 ids`},
	}
	for _, tc := range tests {
		ss := NewStreams()
		var err error
		for _, r := range tc.recs {
			if _, err = ss.Add(r); err != nil {
				break
			}
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	ss := NewStreams()
	ss.Add(st("b", 3))
	ss.Add(tk("b", 0, 7))
	if err := ss.CheckComplete(); err == nil || err.Error() != `stream "b": 1 of its 3 tokens present` {
		t.Fatal(err)
	}
}

func TestWriterRejectsNaN(t *testing.T) {
	w := NewWriter(io.Discard, StageScore)
	err := w.Scores(&Scores{Stream: "x", Index: 3, Begin: 0, End: 3, ScoreFrom: 1, Logprobs: []float64{-1, math.NaN()}})
	if err == nil || err.Error() != `window 3 of x: logprobs[1] is NaN` {
		t.Fatal(err)
	}
}

func TestFilesZstdAtomic(t *testing.T) {
	dir := t.TempDir()
	data := writeSample(t, []float64{-1, -2})
	for _, name := range []string{"a.ndjson", "a.ndjson.zst"} {
		p := filepath.Join(dir, name)
		f, err := Create(p)
		must(t, err)
		f.Write(data)
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s visible before Commit", name)
		}
		must(t, f.Commit())
		r, err := Open(p)
		must(t, err)
		got, err := io.ReadAll(r)
		must(t, err)
		r.Close()
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: read back differs", name)
		}
		raw, _ := os.ReadFile(p)
		if IsZstd(name) == bytes.Equal(raw, data) {
			t.Fatalf("%s: compression %v", name, IsZstd(name))
		}
	}
	f, err := Create(filepath.Join(dir, "b.ndjson"))
	must(t, err)
	f.Write([]byte("half"))
	f.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("abandoned file left behind: %d entries", len(ents))
	}
}

func FuzzReader(f *testing.F) {
	f.Add(writeSample(f, []float64{-1, -2}))
	f.Add([]byte(`{"type":"header","v":1,"stage":"window","tool":"x"}` + "\n" + `{"type":"window","stream":"a","index":0,"begin":0,"end":9,"score_from":1}`))
	f.Add([]byte(`{"type":"scores","stream":"a","index":0,"begin":0,"end":2,"score_from":1,"logprobs":[-1e308]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readAll(t, data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		// Whatever reads cleanly re-reads identically after a pass-through.
		var out bytes.Buffer
		w := NewWriter(&out, StageWindow)
		for _, r := range recs {
			w.Pass(r)
		}
		w.Flush()
		again, err := readAll(t, out.Bytes())
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-read: %v (%d vs %d records)", err, len(again), len(recs))
		}
	})
}
