package report

import (
	"math"
	"strings"
	"testing"
)

func TestFloatEncoding(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{268337.39724723255, "268337.39724723255"},
		{0.1, "0.1"},
		{1e-7, "1e-07"},
		{math.Inf(1), "null"},
		{math.NaN(), "null"},
		{math.Copysign(0, -1), "-0"},
	} {
		b, err := F(c.f).MarshalJSON()
		if err != nil || string(b) != c.want {
			t.Errorf("%v: %s, %v; want %s", c.f, b, err, c.want)
		}
		var back F
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		if !(float64(back) == c.f || math.IsNaN(c.f) && math.IsNaN(float64(back)) || math.IsInf(c.f, 0) && math.IsNaN(float64(back))) {
			t.Errorf("%v read back as %v", c.f, back)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"schema": 2}`, "report schema 2: this tool reads schema 1"},
		{`{}`, `no "schema" field`},
		{`[1]`, "not a report"},
		{`{"schema": 1, "overall": {"perplexity": {"ppl": "x"}}}`, "malformed report"},
	} {
		if _, err := Decode([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
}

// Decode never panics, and what it accepts encodes again.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema":1,"overall":{"name":"overall","perplexity":{"ppl":1.5,"naive":{"ppl_ci":[1,2]}}},"streams":[{"name":"a","window_results":[{"index":0,"ppl":null}]}]}`))
	f.Add([]byte(`{"schema":1}`))
	f.Add([]byte(`{"schema":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		if _, err := Encode(r); err != nil {
			t.Fatalf("decoded report does not encode: %v", err)
		}
	})
}
