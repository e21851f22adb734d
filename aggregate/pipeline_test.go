package aggregate

import (
	"bytes"
	"cmp"
	"strings"
	"testing"

	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// testStream is one stream of a hand-made run and its scored windows.
type testStream struct {
	id, domain string
	bytes      int64
	words      int64
	tokens     []int32
	windows    []pipe.Scores // Stream and Index are filled in
}

// testRun describes a run to write as pipelines.
type testRun struct {
	model       pipe.Model
	tokenizerID string
	scoreTokID  string // the tokenizer id in the score header; "": tokenizerID, as ppl-score writes
	kv          string
	ref         *pipe.Model
	proto       pipe.Protocol
	streams     []testStream
	device      func(*pipe.Score) // sets the score header's device fields; nil: the CPU in fp32
}

// scoreHeader is the score header's Score as ppl-score writes it.
func (tr testRun) scoreHeader() *pipe.Score {
	sc := &pipe.Score{Tokenizer: cmp.Or(tr.scoreTokID, tr.tokenizerID), Device: "cpu", Activations: "fp32", KVDtype: tr.kv, Reference: tr.ref,
		Extra: map[string]any{"math": "fe94f7a0b307"}}
	if tr.device != nil {
		tr.device(sc)
	}
	return sc
}

// pipeline writes the run as ppl-tokenize | ppl-window [--shard] |
// ppl-score would: three headers, the tokenize records of every stream,
// the window records of the shard's windows (dealt round-robin over the
// global window order, as protocol.Shard.Owns), their scores, and the
// three trailers.
func (tr testRun) pipeline(t testing.TB, shard protocol.Shard) []byte {
	t.Helper()
	var buf bytes.Buffer
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tw := pipe.NewWriter(&buf, pipe.StageTokenize)
	tok := &pipe.Tokenizer{Model: "llama", ID: tr.tokenizerID, NVocab: 32000, AddBOS: true, BOS: 1}
	model := tr.model
	must(tw.Header(pipe.Header{Tool: "ppl-tokenize", Version: "test", Model: &model, Tokenizer: tok,
		Corpus: &pipe.Corpus{Name: "oracle-texts", Version: "1"}}))
	for _, s := range tr.streams {
		must(tw.Stream(&pipe.Stream{ID: s.id, Domain: s.domain, SHA256: strings.Repeat("5", 64), Bytes: s.bytes, Words: s.words, NTokens: len(s.tokens)}))
		for off := 0; off < len(s.tokens); off += 1000 {
			must(tw.Tokens(&pipe.Tokens{Stream: s.id, Offset: off, IDs: s.tokens[off:min(off+1000, len(s.tokens))]}))
		}
	}
	must(tw.Flush())
	ww := pipe.NewWriter(&buf, pipe.StageWindow)
	p := tr.proto
	p.Shard = shard.String()
	flags := map[string]any{"context": p.Context}
	if shard.N > 0 {
		flags["shard"] = shard.String()
	}
	must(ww.Header(pipe.Header{Tool: "ppl-window", Version: "test", Protocol: &p, Flags: flags}))
	type owned struct {
		s *pipe.Scores
	}
	var mine []owned
	g := 0
	for _, s := range tr.streams {
		for i := range s.windows {
			if shard.Owns(g) {
				w := s.windows[i]
				w.Stream, w.Index = s.id, i
				mine = append(mine, owned{&w})
				spec := w.WindowSpec()
				must(ww.Window(&spec))
			}
			g++
		}
	}
	must(ww.Flush())
	sw := pipe.NewWriter(&buf, pipe.StageScore)
	must(sw.Header(pipe.Header{Tool: "ppl-score", Version: "test", Model: &model,
		Score: tr.scoreHeader()}))
	for _, o := range mine {
		must(sw.Scores(o.s))
	}
	must(sw.Flush())
	for _, w := range []*pipe.Writer{tw, ww, sw} {
		must(w.End())
		must(w.Flush())
	}
	return buf.Bytes()
}

func sources(named map[string][]byte, order ...string) []Source {
	var out []Source
	for _, n := range order {
		out = append(out, Source{Name: n, R: bytes.NewReader(named[n])})
	}
	return out
}
