package model

import (
	"cmp"
	"fmt"

	"ppl.dev/score/ml"
)

// rwkvGroupNormEps is the epsilon of RWKV's LayerNorm per head of the
// time mix's output, fixed in llama.cpp.
const rwkvGroupNormEps = 64e-5

// rwkvModel is what RWKV-6's and RWKV-7's decoders share (rwkv6.go,
// rwkv7.go): the token embedding, LayerNormed by token_embd_norm in the
// RWKV files, the output norm and head, heads of wkv.head_size, and the
// norms' kind: LayerNorms with biases, or RMS norms in the files distilled
// from Qwen (arwkv7, rwkv6qwen2).
type rwkvModel struct {
	hp                HParams
	tokenEmbd         *ml.Matrix
	embNorm, embNormB *ml.Vector // nil with rms
	outNorm, outNormB *ml.Vector
	head              Head
	heads, headSize   int
	eps               float64 // the LayerNorms' (attention.layer_norm_epsilon), or with rms hp.Eps
	rms               bool
}

// rwkvModel binds what the RWKV architectures share, after checking what
// llama.cpp asserts: wkv.head_size (hs) dividing the width, and
// token_shift_count 2 (1 with rms: only the time mix shifts). Their state
// is float32, as llama.cpp's: another Options.SSMStateDtype is refused.
// With rms and outBias, output_norm.bias is bound when the file has it
// (rwkv6qwen2's optional bias; arwkv7's llama.cpp does not read).
func (l *Loader) rwkvModel(hs int, rms, outBias bool) *rwkvModel {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	if hp.Embd%hs != 0 {
		l.Failf("metadata %s.wkv.head_size = %d does not divide embedding_length %d", hp.Arch, hs, hp.Embd)
		return nil
	}
	shifts := 2 // the time mix's and the channel mix's previous rows
	if rms {
		shifts = 1
	}
	if n, err := m.int("token_shift_count", 2); err != nil || n != shifts {
		l.fail(cmp.Or(err, fmt.Errorf("metadata %s.token_shift_count = %d, want %d (llama.cpp's %s)", hp.Arch, n, shifts, hp.Arch)))
		return nil
	}
	if d := l.Opts.SSMStateDtype; d != "" && d != "f32" {
		l.Failf("%s keeps its recurrent state in float32, as llama.cpp does: a state dtype of %s is not supported", hp.Arch, d)
		return nil
	}
	e := hp.Embd
	r := &rwkvModel{
		hp:        hp,
		tokenEmbd: l.Linear("token_embd", e, hp.Vocab),
		outNorm:   l.Norm("output_norm", e),
		head:      Head{Output: l.Linear("output", e, hp.Vocab)},
		heads:     e / hs,
		headSize:  hs,
		rms:       rms,
		eps:       hp.Eps,
	}
	switch {
	case !rms:
		r.eps = l.layerNormEps()
		r.embNorm, r.embNormB = l.Norm("token_embd_norm", e), l.Vector("token_embd_norm.bias", e)
		r.outNormB = l.Vector("output_norm.bias", e)
	case outBias && l.Has("output_norm.bias"):
		r.outNormB = l.Vector("output_norm.bias", e)
	}
	return r
}

func (m *rwkvModel) Head() *Head { return &m.head }

func (m *rwkvModel) positions() string { return "no attention" }

// Check requires the operations beyond Backend that an RWKV layer uses.
func (m *rwkvModel) Check(b ml.Backend) error {
	_, rw := b.(ml.RWKV)
	_, rc := b.(ml.Recurrent)
	_, au := b.(ml.AltUp)
	_, ln := b.(ml.LayerNormer)
	if !rw || !rc || !au || !ln {
		return fmt.Errorf("%s needs the RWKV operations (ml.RWKV, ml.Recurrent's Mul, GatherCols, L2Norm and Zero, ml.AltUp's Tanh and MulCols, ml.LayerNormer), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

// ssmStateDtype is the recurrent state's dtype, for Info: float32 (llama.cpp
// keeps RWKV's state in float32 whatever its cache type).
func (m *rwkvModel) ssmStateDtype() string { return "f32" }

// embed returns the window's token embeddings, normed when the model norms
// them: the residual stream.
func (m *rwkvModel) embed(b ml.Backend, tokens []int32) ml.Tensor {
	x := b.Alloc(len(tokens), m.hp.Embd)
	b.Embed(x, m.tokenEmbd, tokens)
	if m.embNorm != nil {
		m.norm(b, x, x, m.embNorm, m.embNormB)
	}
	return x
}

// norm norms the rows of x into dst: a LayerNorm by w and bias, or with
// rms an RMS norm by w (plus bias when set: rwkv6qwen2's output norm).
func (m *rwkvModel) norm(b ml.Backend, dst, x ml.Tensor, w, bias *ml.Vector) {
	if m.rms {
		b.RMSNorm(dst, x, w, m.eps)
		if bias != nil {
			b.AddRows(dst, bias)
		}
		return
	}
	b.(ml.LayerNormer).LayerNorm(dst, x, w, bias, m.eps)
}

// rwkvLayer is what the RWKV layers share: the norms before the time mix
// and the channel mix (attn_norm and attn_norm_2, LayerNorms with biases;
// with RMS norms attn_norm and ffn_norm) and the channel mix's MLP: RWKV's
// ReLU² (channel_mix_key, then channel_mix_value) of the blend by
// channel_mix_lerp_k, or with RMS norms Qwen's SwiGLU (ffn_gate, ffn_up,
// ffn_down) of the normed rows (cmixK nil).
type rwkvLayer struct {
	attnNorm, attnNormB, ffnNorm, ffnNormB *ml.Vector
	cmixK                                  *ml.Vector
	ffn                                    ml.MLP
}

// rwkvLayer binds prefix p's rwkvLayer.
func (l *Loader) rwkvLayer(p string, rms bool) rwkvLayer {
	e, ff := l.HP.Embd, l.HP.FFN
	ly := rwkvLayer{attnNorm: l.Norm(p+"attn_norm", e)}
	if rms {
		ly.ffnNorm = l.Norm(p+"ffn_norm", e)
		ly.ffn = ml.MLP{Gate: l.Linear(p+"ffn_gate", e, ff), Up: l.Linear(p+"ffn_up", e, ff), Down: l.Linear(p+"ffn_down", ff, e), Act: ml.SwiGLU}
		return ly
	}
	ly.attnNormB = l.Vector(p+"attn_norm.bias", e)
	ly.ffnNorm, ly.ffnNormB = l.Norm(p+"attn_norm_2", e), l.Vector(p+"attn_norm_2.bias", e)
	ly.cmixK = l.tensorVector(p+"channel_mix_lerp_k.weight", e, 1, 1)
	ly.ffn = ml.MLP{Up: l.Linear(p+"channel_mix_key", e, ff), Down: l.Linear(p+"channel_mix_value", ff, e), Act: ml.ReLUSqr}
	return ly
}

// blends binds name, n rows of e blend weights (time_mix_lerp_fused: GGUF
// shape [e, 1, 1, n]), as n vectors.
func (l *Loader) blends(name string, e, n int) []*ml.Vector {
	v := l.tensorVector(name, e, 1, 1, n)
	if v == nil {
		return nil
	}
	out := make([]*ml.Vector, n)
	for j := range out {
		out[j] = l.constVector(fmt.Sprintf("%s[%d]", v.Name, j), v.V[j*e:(j+1)*e])
	}
	return out
}

// blend sets dst = sx ⊙ mu + h (llama.cpp's MUL, then ADD); dst may be sx.
func blend(b ml.Backend, dst, sx, h ml.Tensor, mu *ml.Vector) {
	b.(ml.AltUp).MulCols(dst, sx, mu)
	b.Add(dst, h)
}
