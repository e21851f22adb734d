package model

import (
	"math"

	"ppl.dev/score/ml"
)

// mistral3: Mistral Small 3.x, Ministral 3 and Devstral (the text model),
// as llama.cpp runs it (the oracle README's mistral3 section). The block
// is llama's (bound by newDecoder: adjacent-pair RoPE over the whole head,
// GQA, SwiGLU; n_head·head_dim may differ from n_embd), with two changes:
//   - YaRN's cos/sin factor: with lm = rope.scaling.yarn_log_multiplier
//     ≠ 0 it is attn_factor · m(1)/m(lm), m(a) = 1 + 0.1·a·ln(factor),
//     instead of attn_factor · m(1) (so lm = 1 gives 1);
//   - attention temperature (Llama 4 style): with β =
//     attention.temperature_scale ≠ 0, the query at position p is
//     multiplied after RoPE by s(p) = 1 + β·ln(1 + floor(p/n_orig)),
//     n_orig = rope.scaling.original_context_length (context_length when
//     absent); keys are not scaled. s is constant over each run of n_orig
//     positions, so it is one Scale of each run's rows.
func init() { Register("mistral3", newMistral3) }

type mistral3 struct {
	*decoder
	beta  float64 // attention.temperature_scale; 0: none
	nOrig int     // positions per temperature step
}

func newMistral3(l *Loader) Network {
	hp := l.HP
	d := newDecoder(l, decoderOpts{})
	if l.Err() != nil {
		return nil
	}
	m := meta{l.f, hp.Arch}
	if d.rope.Dims != hp.HeadDim {
		l.Failf("metadata %s.rope.dimension_count = %d, want the head size %d", hp.Arch, d.rope.Dims, hp.HeadDim)
		return nil
	}
	lm, err := m.float("rope.scaling.yarn_log_multiplier", 0)
	if err != nil {
		l.fail(err)
		return nil
	}
	if d.rope.ExtFactor != 0 && lm != 0 {
		// nn.RoPE multiplies AttnFactor by m(1) under YaRN.
		mlm := 1 + 0.1*lm*math.Log(1/d.rope.FreqScale)
		if !(mlm > 0) {
			l.Failf("metadata %s.rope.scaling.yarn_log_multiplier = %v: YaRN factor 1 + 0.1·%v·ln(%v) is not positive", hp.Arch, lm, lm, 1/d.rope.FreqScale)
			return nil
		}
		d.rope.AttnFactor /= mlm
		l.rinfo.AttnFactor = d.rope.AttnFactor
	}
	t := &mistral3{decoder: d}
	if t.beta, err = m.float("attention.temperature_scale", 0); err != nil {
		l.fail(err)
		return nil
	}
	if math.IsNaN(t.beta) || math.IsInf(t.beta, 0) {
		l.Failf("metadata %s.attention.temperature_scale = %v", hp.Arch, t.beta)
		return nil
	}
	if t.beta != 0 {
		if t.nOrig, err = m.int("rope.scaling.original_context_length", hp.CtxTrain); err != nil {
			l.fail(err)
			return nil
		}
		if t.nOrig <= 0 {
			l.Failf("attention temperature (%s.attention.temperature_scale) needs %s.rope.scaling.original_context_length or context_length", hp.Arch, hp.Arch)
			return nil
		}
		d.scaleQ = t.temperature
	}
	return t
}

// temperature scales q's rows (positions) by s(p).
func (t *mistral3) temperature(b ml.Backend, q ml.Tensor) {
	if t.beta == 0 {
		return
	}
	n := q.Rows()
	for k := 1; k*t.nOrig < n; k++ { // s = 1 for the first run
		b.Scale(b.Slice(q, k*t.nOrig, min(n, (k+1)*t.nOrig)), 1+t.beta*math.Log(float64(1+k)))
	}
}
