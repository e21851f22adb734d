package model

import (
	"fmt"
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
	temp attnTemp
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
		mlm := 1 + float64(0.1*lm*math.Log(1/d.rope.FreqScale))
		if !(mlm > 0) {
			l.Failf("metadata %s.rope.scaling.yarn_log_multiplier = %v: YaRN factor 1 + 0.1·%v·ln(%v) is not positive", hp.Arch, lm, lm, 1/d.rope.FreqScale)
			return nil
		}
		d.rope.AttnFactor = float64(yarnAttnFactor(d.rope.FreqScale, lm, d.rope.AttnFactor))
		l.rinfo.AttnFactor = d.rope.AttnFactor
	}
	t := &mistral3{decoder: d, temp: l.attnTemp("rope.scaling.original_context_length", hp.CtxTrain)}
	if l.Err() != nil {
		return nil
	}
	if t.temp.beta != 0 {
		d.scaleQ = t.temp.apply
	}
	return t
}

// attnTemp is Llama 4's attention temperature as llama.cpp applies it
// (mistral3, and deepseek2 for Mistral Large 3; llama4's NoPE layers): the
// query of position p multiplied by s(p) = 1 + β·ln(1 + floor((p +
// offset)/floor)), β = attention.temperature_scale; β = 0: none.
type attnTemp struct {
	beta   float64
	floor  int // positions per step
	offset int // 1 in llama4, 0 elsewhere
}

// attnTemp reads the temperature, its step from floorKey (def when absent;
// def < 0: required when β ≠ 0).
func (l *Loader) attnTemp(floorKey string, def int) attnTemp {
	m := meta{l.f, l.HP.Arch}
	var t attnTemp
	var err error
	if t.beta, err = m.float("attention.temperature_scale", 0); err != nil || t.beta == 0 {
		l.fail(err)
		return attnTemp{}
	}
	if t.floor, err = m.int(floorKey, max(def, 0)); err == nil && (t.floor <= 0 || def < 0 && !m.has(floorKey)) {
		err = fmt.Errorf("attention temperature (%s.attention.temperature_scale) needs %s.%s > 0", l.HP.Arch, l.HP.Arch, floorKey)
	}
	l.fail(err)
	return t
}

// apply scales q's rows (positions) by s(p): s is constant over each run
// of floor positions, so it is one Scale of each run's rows.
func (t attnTemp) apply(b ml.Backend, q ml.Tensor) {
	if t.beta == 0 {
		return
	}
	n := q.Rows()
	for k := 1; k*t.floor-t.offset < n; k++ { // s = 1 for the first run
		b.Scale(b.Slice(q, k*t.floor-t.offset, min(n, (k+1)*t.floor-t.offset)), 1+float64(t.beta*math.Log(float64(1+k))))
	}
}
