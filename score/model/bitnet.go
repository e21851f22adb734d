package model

import (
	"fmt"

	"ppl.dev/score/ml"
)

func init() { Register("bitnet", newBitNet) }

// bitnet: Microsoft's BitNet b1.58 (2B4T and the earlier 0.7B to 3B), as
// llama.cpp 0.7.0 runs it: llama's block with NeoX RoPE; the attention's
// output RMS-normed by attn_sub_norm before attn_output; the MLP's SwiGLU
// of gate and up, each product apart, RMS-normed by ffn_sub_norm before
// ffn_down; each projection's product times its <name>.scale where the
// file has one (the ternary weights' scale, ml.Matrix.Scale); the output
// the token embedding (llama.cpp reads no output matrix, and refuses a
// file with one, and so does ppl). TQ1_0 and TQ2_0 hold the ternary
// weights as llama.cpp's converter writes them.
func newBitNet(l *Loader) Network {
	hp := l.HP
	if l.Has("output.weight") {
		l.Failf("tensor output.weight: llama.cpp's bitnet reads the token embedding as its output, and no output matrix")
		return nil
	}
	d := l.baseDecoder(true)
	qd := hp.Heads * hp.HeadDim
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.attnSubNorm = l.Norm(p+"attn_sub_norm", qd)
		ly.ffn = &subNormMLP{
			gate: l.Linear(p+"ffn_gate", hp.Embd, hp.FFN), up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN),
			norm: l.Norm(p+"ffn_sub_norm", hp.FFN), down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), eps: hp.Eps,
		}
		return ly
	})
	if net == nil {
		return nil
	}
	return gluDecoder{d}
}

// subNormMLP is a SwiGLU MLP whose gate and up products are taken apart
// and whose activation is RMS-normed before the down projection: bitnet's
// ffn_down·norm(silu(ffn_gate·x)·ffn_up·x).
type subNormMLP struct {
	gate, up, down *ml.Matrix
	norm           *ml.Vector
	eps            float64
}

func (m *subNormMLP) Forward(b ml.Backend, dst, x ml.Tensor) {
	n := x.Rows()
	mark := b.Mark()
	g, u := b.Alloc(n, m.gate.Out), b.Alloc(n, m.up.Out)
	b.Linears([]ml.Tensor{g, u}, x, []*ml.Matrix{m.gate, m.up})
	b.(ml.Gemma4).GLU(g, g, u, ml.SwiGLU)
	b.RMSNorm(g, g, m.norm, m.eps)
	b.Linear(dst, g, m.down)
	b.Release(mark)
}

// gluDecoder is a decoder whose MLPs take GLU apart from their products
// (subNormMLP): it needs ml.Gemma4.
type gluDecoder struct{ *decoder }

func (m gluDecoder) Check(b ml.Backend) error {
	if _, ok := b.(ml.Gemma4); !ok {
		return fmt.Errorf("%s needs GLU (ml.Gemma4), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}
