package model

import (
	"fmt"
	"slices"

	"ppl.dev/score/ml"
)

func init() { Register("talkie", newTalkie) }

// talkie: talkie-lm's Talkie (13B), as llama.cpp 0.7.0 runs it: RMS norms
// without weights everywhere (the embeddings' too, before the first
// layer: e); llama's block (q, k and v fused in attn_qkv or apart) with
// NeoX RoPE over the whole head
// (rope.dimension_count must be the head size, as llama.cpp asserts);
// after RoPE, q RMS-normed per head times its head's gain (attn_q_norm,
// one value per head) and k RMS-normed per head without one; the
// attention's and the MLP's outputs times attn_output.scale and
// ffn_down.scale where the file has them; each layer's output plus e times
// layer_output_scale (one value per layer); the logits times logit_scale
// (required); the output matrix required.
func newTalkie(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("logit_scale")
	scale := 0.0
	if err == nil {
		scale, err = m.float("logit_scale", -1)
	}
	if err == nil && scale == 0 {
		err = fmt.Errorf("metadata %s.logit_scale is 0: every logit would be 0", hp.Arch)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.normlessDecoder(true)
	if l.Err() != nil {
		return nil
	}
	if !l.wholeHeads(d.rope) {
		return nil
	}
	E, hd := hp.Embd, hp.HeadDim
	ones := l.ones("(no weight)", E)
	d.embNorm, d.outputNorm = ones, ones
	d.head.Scale = scale
	d.qkNormAfterRoPE, d.qkNormHeads = true, true
	kOnes := l.ones("(no k norm weight)", hp.KVHeads*hd)
	d.embSkip = make([]*ml.Vector, hp.Layers)
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{attnNorm: ones, ffnNorm: ones, o: l.Linear(p+"attn_output", hp.Heads*hd, E)}
		ly.q, ly.k, ly.v = l.qkv(p, hp.Heads*hd, hp.KVHeads*hd, hp.KVHeads*hd)
		gains := l.floats(p+"attn_q_norm.weight", 1, hp.Heads)
		skip := l.floats(p+"layer_output_scale.weight", 1)
		if l.Err() != nil {
			return ly
		}
		q := make([]float32, 0, hp.Heads*hd)
		for _, g := range gains {
			q = append(q, slices.Repeat([]float32{g}, hd)...)
		}
		ly.qNorm, ly.kNorm = l.constVector(p+"attn_q_norm.weight (a gain per head)", q), kOnes
		d.embSkip[i] = l.constVector(p+"layer_output_scale.weight", slices.Repeat(skip, E))
		ly.ffn = l.DenseFFN(p, E, hp.FFN)
		return ly
	})
	if net == nil {
		return nil
	}
	return skipDecoder{d}
}

// skipDecoder is a decoder with embSkip: it needs ml.AltUp's MulCols.
type skipDecoder struct{ *decoder }

func (m skipDecoder) Check(b ml.Backend) error {
	if _, ok := b.(ml.AltUp); !ok {
		return fmt.Errorf("%s needs MulCols (ml.AltUp), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}
