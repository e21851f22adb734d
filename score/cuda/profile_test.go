package cuda

import (
	"strings"
	"testing"
	"time"

	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

// The table: kinds by time, the numbers out of their labels, the kinds
// past top summed, and the host's time between the operations of a window
// (1 + 0 + 2 ms; not before its first).
func TestProfileTable(t *testing.T) {
	p := newProfile()
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p.add("product blk.0.attn_q.weight", at(10), at(13)) // 10 ms before the window's first: not counted
	p.add("layer 0 attention", at(14), at(20))
	p.add("product blk.1.attn_q.weight", at(20), at(23))
	p.add("experts blk.1.ffn_up_exps.weight", at(25), at(26))
	p.window()
	p.add("RMSNorm", at(100), at(101))
	want := `time by operation (PPL_CUDA_PROFILE=1: the device synchronized after each; 0.017 s in all):
   35.3%     0.006 s        1× layer N attention
   35.3%     0.006 s        2× product blk.N.attn_q.weight
   11.8%     0.002 s        2× the 2 other kinds
   17.6%     0.003 s        0× the host, between operations (routing, the model's code)`
	if got := p.table(2); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if got := newProfile().table(5); got != "no operation profiled" {
		t.Errorf("empty table: %q", got)
	}
}

// PPL_CUDA_PROFILE=1 counts every operation of a window: each layer's
// attention once, and the report ends with the table.
func TestProfileRun(t *testing.T) {
	dir := oracle.Require(t)
	t.Setenv("PPL_CUDA_PROFILE", "1")
	path := oracle.Model(dir, "tiny-llama-spm-q8_0")
	g, err := loadOn(simEngine(), path, model.Options{KVDtype: "bf16"}, Mixed)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	toks := e2eTokens(dir, "tiny-llama-spm-q8_0", g.Vocab(), 64)
	if _, err := g.Score(toks, 1); err != nil {
		t.Fatal(err)
	}
	layers := g.Model.Info().HParams.Layers
	if o := g.b.prof.kinds["layer N attention"]; o == nil || o.calls != layers {
		t.Errorf("attention counted %v times, want once per layer (%d): %v", o, layers, g.b.prof.kinds)
	}
	if r := g.Report(); !strings.Contains(r, "\ntime by operation (PPL_CUDA_PROFILE=1") || !strings.Contains(r, "× layer N attention") {
		t.Errorf("report without the profile: %s", r)
	}
}
