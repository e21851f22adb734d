package aggregate

import (
	"bytes"
	"strings"
	"testing"

	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// costShard writes shard sh of tr (the whole run for the zero Shard) as ppl-window --shard --split cost
// would deal it (protocol.Deal over protocol.Cost), with the split and
// the flags in the window header, and the tokenize and score flags a
// real run records.
func (tr testRun) costShard(t *testing.T, sh protocol.Shard, attn int) []byte {
	t.Helper()
	var costs []int64
	for _, s := range tr.streams {
		for _, w := range s.windows {
			costs = append(costs, protocol.Cost(protocol.Span{Begin: w.Begin, End: w.End, ScoreFrom: w.ScoreFrom}, attn))
		}
	}
	owner, load := protocol.Deal(costs, max(sh.N, 1))
	counts := make([]int, len(load))
	for _, k := range owner {
		counts[k]++
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	model := tr.model
	tok := &pipe.Tokenizer{Model: "llama", ID: tr.tokenizerID, NVocab: 32000, AddBOS: true, BOS: 1}
	tw := pipe.NewWriter(&buf, pipe.StageTokenize)
	must(tw.Header(pipe.Header{Tool: "ppl-tokenize", Version: "test", Model: &model, Tokenizer: tok,
		Corpus: &pipe.Corpus{Name: "oracle-texts", Version: "1"},
		Flags:  map[string]any{"model": "m.gguf", "text": []string{"a.txt", "b c.txt"}, "utf8": "strict"}}))
	for _, s := range tr.streams {
		must(tw.Stream(&pipe.Stream{ID: s.id, Domain: s.domain, SHA256: strings.Repeat("5", 64), Bytes: s.bytes, Words: s.words, NTokens: len(s.tokens)}))
		for off := 0; off < len(s.tokens); off += 1000 {
			must(tw.Tokens(&pipe.Tokens{Stream: s.id, Offset: off, IDs: s.tokens[off:min(off+1000, len(s.tokens))]}))
		}
	}
	ww := pipe.NewWriter(&buf, pipe.StageWindow)
	p := tr.proto
	p.Shard = sh.String()
	flags := map[string]any{"context": p.Context}
	if sh.N > 0 {
		p.Split = &pipe.Split{By: "cost", Attention: attn, Windows: counts, Cost: load}
		flags["shard"], flags["split"], flags["split_attention"] = sh.String(), "cost", attn
	}
	must(ww.Header(pipe.Header{Tool: "ppl-window", Version: "test", Protocol: &p, Flags: flags}))
	var mine []*pipe.Scores
	g := 0
	for _, s := range tr.streams {
		for i := range s.windows {
			if int(owner[g]) == max(sh.K, 1)-1 {
				w := s.windows[i]
				w.Stream, w.Index = s.id, i
				mine = append(mine, &w)
				spec := w.WindowSpec()
				must(ww.Window(&spec))
			}
			g++
		}
	}
	sw := pipe.NewWriter(&buf, pipe.StageScore)
	must(sw.Header(pipe.Header{Tool: "ppl-score", Version: "test", Model: &model,
		Flags: map[string]any{"model": "m.gguf", "kv_dtype": tr.kv, "threads": 2},
		Score: &pipe.Score{Tokenizer: tr.tokenizerID, Device: "cpu", KVDtype: tr.kv, Reference: tr.ref}}))
	for _, s := range mine {
		must(sw.Scores(s))
	}
	for _, w := range []*pipe.Writer{tw, ww, sw} {
		must(w.Flush())
	}
	for _, w := range []*pipe.Writer{tw, ww, sw} {
		must(w.End())
		must(w.Flush())
	}
	return buf.Bytes()
}

// Shards dealt by cost merge into the unsharded report, byte for byte
// outside "run" (the split, like the shard, is not in the report's window
// header); a missing shard is named with the command that makes it; shards
// dealt differently are refused.
func TestCostShards(t *testing.T) {
	tr := synthRun(t, sliding, false, 300, 5, 41, 2, 120, 9)
	whole, err := Aggregate(sources(map[string][]byte{"whole": tr.costShard(t, protocol.Shard{}, 8)}, "whole"), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := encodeNoRun(t, whole)
	files := map[string][]byte{}
	for k := 1; k <= 3; k++ {
		sh := protocol.Shard{K: k, N: 3}
		files[sh.String()] = tr.costShard(t, sh, 8)
	}
	got, err := Aggregate(sources(files, "3/3", "1/3", "2/3"), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if b := encodeNoRun(t, got); !bytes.Equal(b, want) {
		t.Errorf("report differs from the unsharded one:\n%s", firstDiff(b, want))
	}

	_, err = Aggregate(sources(files, "1/3", "3/3"), testOptions)
	wantMsg := `(shard 2/3 not among the inputs; rerun it with: ppl-tokenize --model m.gguf --text --utf8 strict a.txt 'b c.txt'` +
		` | ppl-window --context 16 --shard 2/3 --split cost --split-attention 8 | ppl-score --kv-dtype f16 --model m.gguf --threads 2 > shard-2.ndjson)`
	if err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("missing shard: err = %v\nwant it to contain %s", err, wantMsg)
	}
	_, err = Aggregate(sources(files, "1/3"), testOptions)
	if err == nil || !strings.Contains(err.Error(), "(shard 2/3, 3/3 not among the inputs; rerun each (K = 2, 3) with: ppl-tokenize") ||
		!strings.Contains(err.Error(), "--shard K/3 --split cost") || !strings.Contains(err.Error(), "> shard-K.ndjson)") {
		t.Errorf("two missing shards: err = %v", err)
	}

	// Shard 2 dealt with another attention length, or round-robin.
	files["other"] = tr.costShard(t, protocol.Shard{K: 2, N: 3}, 1000)
	_, err = Aggregate(sources(files, "1/3", "other", "3/3"), testOptions)
	if err == nil || !strings.Contains(err.Error(), `other: shard split "{\"by\":\"cost\",\"attention\":1000,`) {
		t.Errorf("other split: err = %v", err)
	}
	files["rr"] = tr.pipeline(t, protocol.Shard{K: 2, N: 3})
	_, err = Aggregate(sources(files, "1/3", "rr"), testOptions)
	if err == nil || !strings.Contains(err.Error(), `rr: shard split "count" differs from`) {
		t.Errorf("round-robin shard: err = %v", err)
	}
}
