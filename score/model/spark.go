package model

import (
	"cmp"

	"ppl.dev/score/ml"
)

func init() { Register("spark2_5", newSpark25) }

// spark2_5: Spark-X2.5 (1.7B, 4B), as llama.cpp 0.7.0 runs it: llama's
// block with NeoX RoPE and without q/k norms (q, k and v fused in attn_qkv
// or apart), the head counts per layer (attention.head_count and
// head_count_kv, arrays or numbers); the layers
// attention.sliding_window_pattern flags (an array of one flag per layer,
// required) attend to the last attention.sliding_window keys (required)
// with RoPE of rope.freq_base_swa's base over rope.dimension_count_swa
// dimensions (the global values when absent) and the file's scaling, as
// llama.cpp copies it there, the others with the file's RoPE over
// rope.dimension_count; a sigmoid gate per head on the attention's output
// (attn_gate, one row per head, required); a dense GeGLU MLP (ggml's tanh
// GELU); the output tied to the embeddings when the file has none.
func newSpark25(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("attention.sliding_window", "attention.sliding_window_pattern")
	var heads, kv []int
	if err == nil {
		heads, kv, err = m.layerHeads(hp.Layers)
	}
	window := 0
	if err == nil {
		window, err = m.positive("attention.sliding_window", -1)
	}
	var slides []bool
	if err == nil {
		slides, err = m.layerFlags("attention.sliding_window_pattern", hp.Layers, false)
	}
	baseSWA, dimsSWA := 0.0, 0
	if err == nil {
		baseSWA, dimsSWA, err = m.swaRoPE()
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	local := d.rope.WithDims(cmp.Or(dimsSWA, d.rope.Dims), false)
	local.Base = cmp.Or(baseSWA, d.rope.Base)
	if err := local.Validate(); err != nil {
		l.Failf("sliding layers' RoPE: %v", err)
		return nil
	}
	E, hd := hp.Embd, hp.HeadDim
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.headsLayer(d, i, p, heads[i], kv[i])
		a := ly.attn
		if a == nil {
			return ly
		}
		if slides[i] {
			a.Window, ly.rope = window, local
		}
		ly.gate, ly.gateCols = l.Linear(p+"attn_gate", E, a.Heads), spreadCols(a.Heads, hd)
		if f := l.DenseFFN(p, E, hp.FFN); f != nil {
			f.Act = ml.GeGLU
			ly.ffn = f
		}
		return ly
	})
	if net == nil {
		return nil
	}
	return gatherDecoder{d}
}
