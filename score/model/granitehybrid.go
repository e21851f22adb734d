package model

import (
	"cmp"
	"fmt"

	"ppl.dev/score/ml"
)

// granitehybrid: IBM's Granite 4.0 hybrids (Granite-4.0-H-Micro, -Tiny,
// -Small), as llama.cpp 0.7.0 runs them: granite's decoder (its four
// multipliers, adjacent-pair RoPE) whose mixer is Mamba-2 in the layers
// whose attention.head_count_kv is 0 (a per-layer array) and attention in
// the others; RoPE only when rope.scaling.finetuned is absent or true
// (Granite-4.0-H's files say false: attention without positions). The FFN
// is a SwiGLU MLP, or a mixture of experts (softmax routing, renormalized,
// experts of feed_forward_length) plus the shared expert of
// expert_shared_feed_forward_length.
//
// The Mamba-2 mixer (llama.cpp's build_mamba2_layer): [z | x | B | C | dt]
// = ssm_in·h (ssm.inner_size = d values of z and x, ssm.group_count = G
// groups of ssm.state_size = N values of B and C, ssm.time_step_rank = H
// heads of dt); [x | B | C] through the causal depthwise convolution
// ssm_conv1d (ssm.conv_kernel taps) plus its bias, then SiLU; the selective
// scan (ml.SSM: heads of d/H values, decays ssm_a, skip ssm_d, dt bias
// ssm_dt.bias); y ⊙ silu(z) RMS-normed in G groups by ssm_norm; out =
// ssm_out·y.
func init() { Register("granitehybrid", newGraniteHybrid) }

// mamba2 is one layer's Mamba-2 mixer.
type mamba2 struct {
	in       *ml.Matrix // ssm_in: [z | x | B | C | dt]
	conv     *ml.Vector // ssm_conv1d: channels × kernel
	convBias *ml.Vector // ssm_conv1d.bias
	ssm      ml.SSM     // with the layer's ssm_a, ssm_d, ssm_dt.bias
	norm     *ml.Vector // ssm_norm: d values, G groups
	out      *ml.Matrix // ssm_out
	cols     *mamba2Cols
	eps      float64
	rows     int // deltaRows; smaller in tests
}

// mamba2Cols are the column tables every Mamba-2 layer of a model shares
// (ml.Recurrent.GatherCols), and the convolution's kernel.
type mamba2Cols struct {
	z, xbc, dt, x, b, c []int
	kernel              int
}

// ssmDecoder is a decoder some of whose layers are Mamba-2 mixers: it
// needs ml.Recurrent and has a recurrent state dtype, Options.SSMStateDtype.
type ssmDecoder struct {
	*decoder
	state string
}

func (m ssmDecoder) Check(b ml.Backend) error {
	if _, ok := b.(ml.Recurrent); !ok {
		return fmt.Errorf("%s needs the recurrent operations (ml.Recurrent: GatherCols, ConvSiLU, Zero, SSMScan, GatedGroupNorm), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

func (m ssmDecoder) ssmStateDtype() string { return cmp.Or(m.state, "f32") }

// mamba2Params reads the ssm.* metadata every Mamba-2 model has (llama.cpp's
// build_mamba2_layer: d_inner, d_state, heads as time_step_rank, groups,
// the convolution's kernel) into the mixer every layer copies before it
// binds its weights (mamba2).
func (l *Loader) mamba2Params() *mamba2 {
	hp := l.HP
	sz := l.ssmSizes("conv_kernel", "inner_size", "state_size", "time_step_rank", "group_count")
	if sz == nil {
		return nil
	}
	K, d, N, H, G := sz[0], sz[1], sz[2], sz[3], sz[4]
	if d%H != 0 {
		l.Failf("metadata %s.ssm.inner_size = %d is not a multiple of ssm.time_step_rank = %d", hp.Arch, d, H)
		return nil
	}
	if d%G != 0 {
		l.Failf("metadata %s.ssm.inner_size = %d is not a multiple of ssm.group_count = %d", hp.Arch, d, G)
		return nil
	}
	gn, conv := G*N, d+2*G*N
	return &mamba2{
		ssm: ml.SSM{Heads: H, HeadDim: d / H, Groups: G, State: N, StateDtype: l.Opts.SSMStateDtype},
		cols: &mamba2Cols{z: colRange(0, d), xbc: colRange(d, conv), dt: colRange(d+conv, H),
			x: colRange(0, d), b: colRange(d, gn), c: colRange(d+gn, gn), kernel: K},
		eps:  hp.Eps,
		rows: deltaRows,
	}
}

// ssmSizes reads the ssm.* sizes named by keys (each required and above
// 0), in order; nil after an error.
func (l *Loader) ssmSizes(keys ...string) []int {
	m := meta{l.f, l.HP.Arch}
	out := make([]int, len(keys))
	for i, k := range keys {
		v, err := m.positive("ssm."+k, -1)
		if err != nil {
			l.fail(err)
			return nil
		}
		out[i] = v
	}
	return out
}

// kvHeads reads attention.head_count_kv per layer (0 where a layer has no
// attention), refusing attention layers that disagree on it.
func (l *Loader) kvHeads() []int {
	hp := l.HP
	kv, err := meta{l.f, hp.Arch}.layerInts("attention.head_count_kv", hp.Layers, -1)
	if err != nil {
		l.fail(err)
		return nil
	}
	for i, n := range kv {
		if n != 0 && n != hp.KVHeads {
			l.Failf("metadata %s.attention.head_count_kv: layer %d has %d KV heads, layer of the most %d (attention layers must agree)", hp.Arch, i, n, hp.KVHeads)
			return nil
		}
	}
	return kv
}

// mamba2 binds prefix's Mamba-2 mixer of proto's shape; the convolution's
// bias only when biased (granitehybrid requires it, nemotron_h and
// falcon-h1 bind it when present), the grouped norm only when normed
// (falcon-h1's files may have none: the gate alone).
func (l *Loader) mamba2(p string, proto *mamba2, biased, normed bool) *mamba2 {
	hp := l.HP
	m := *proto
	d, conv, H, G := len(m.cols.x), len(m.cols.xbc), m.ssm.Heads, m.ssm.Groups
	m.in = l.Linear(p+"ssm_in", hp.Embd, d+conv+H)
	m.conv = l.tensorVector(p+"ssm_conv1d.weight", m.cols.kernel, conv)
	if normed {
		m.norm = l.tensorVector(p+"ssm_norm.weight", d/G, G)
	}
	m.out = l.Linear(p+"ssm_out", d, hp.Embd)
	if biased {
		m.convBias = l.Vector(p+"ssm_conv1d.bias", conv)
	}
	m.ssm.A = l.tensorVector(p+"ssm_a", 1, H)
	m.ssm.D = l.tensorVector(p+"ssm_d", 1, H)
	m.ssm.DtBias = l.Vector(p+"ssm_dt.bias", H)
	if l.Err() == nil {
		if e := m.ssm.Validate(); e != nil {
			l.fail(fmt.Errorf("%s.ssm.*: %w", hp.Arch, e))
		}
	}
	return &m
}

func newGraniteHybrid(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	proto, kv := l.mamba2Params(), l.kvHeads()
	if proto == nil || kv == nil {
		return nil
	}
	rope, err := m.bool("rope.scaling.finetuned", true)
	if err != nil {
		l.fail(err)
		return nil
	}
	var moe *moeParams
	if n, e := m.int("expert_count", 0); e != nil {
		l.fail(e)
		return nil
	} else if n > 0 {
		if moe = l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN}); moe == nil {
			return nil
		}
	}
	dec := l.baseDecoder(false)
	if !l.graniteScales(dec, graniteDefaults{}) {
		return nil
	}
	net := l.bindLayers(dec, func(i int, p string) decoderLayer {
		var ly decoderLayer
		if kv[i] == 0 {
			ly = decoderLayer{attnNorm: l.Norm(p+"attn_norm", hp.Embd), ffnNorm: l.Norm(p+"ffn_norm", hp.Embd)}
			ly.mixer = l.mamba2(p, proto, true, true)
		} else {
			ly = l.preNormLayer(p, "ffn_norm")
			ly.noRoPE = !rope
		}
		if moe != nil {
			ly.ffn = l.MoE(p, moe)
			if mo, ok := ly.ffn.(*MoE); ok && mo != nil && mo.Shared == nil && l.Err() == nil {
				l.Failf("missing tensor %sffn_up_shexp.weight (granitehybrid's shared expert)", p)
			}
		} else {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		}
		return ly
	})
	if net == nil {
		return nil
	}
	return ssmDecoder{dec, l.Opts.SSMStateDtype}
}

// forward computes the mixer for a window's rows h into dst, m.rows rows
// at a time (deltaRows, as Gated DeltaNet's), from a zero convolution
// history and state.
func (m *mamba2) forward(b ml.Backend, dst, h ml.Tensor) {
	s := &m.ssm
	scanBlocks(b, dst, h, m.rows, s.Heads*s.HeadDim, s.State, m.cols.kernel, len(m.cols.xbc), m.block)
}

// scanBlocks runs a selective scan's mixer (block) over a window's rows h
// into dst, rows at a time, from a zero state (stateRows × stateCols) and
// a zero history of the convolution's kernel−1 inputs of channels, which
// block updates and the next rows read.
func scanBlocks(b ml.Backend, dst, h ml.Tensor, rows, stateRows, stateCols, kernel, channels int, block func(b ml.Backend, dst, h, state, hist ml.Tensor)) {
	n, rc := h.Rows(), b.(ml.Recurrent)
	mark := b.Mark()
	state, hist := b.Alloc(stateRows, stateCols), b.Alloc(kernel-1, channels)
	rc.Zero(state)
	rc.Zero(hist)
	for r0 := 0; r0 < n; r0 += rows {
		r1 := min(n, r0+rows)
		block(b, b.Slice(dst, r0, r1), b.Slice(h, r0, r1), state, hist)
	}
	b.Release(mark)
}

// block computes the mixer for consecutive rows of a window; the
// projection and the convolution's buffers are released before the scan.
func (m *mamba2) block(b ml.Backend, dst, h, state, hist ml.Tensor) {
	n, s, c := h.Rows(), &m.ssm, m.cols
	rc := b.(ml.Recurrent)
	d, gn := len(c.x), len(c.b)
	mark := b.Mark()
	z, dt := b.Alloc(n, d), b.Alloc(n, s.Heads)
	x, bm, cm := b.Alloc(n, d), b.Alloc(n, gn), b.Alloc(n, gn)
	proj := b.Mark()
	all := b.Alloc(n, m.in.Out)
	b.Linear(all, h, m.in)
	xbc, u := b.Alloc(n, len(c.xbc)), b.Alloc(n, len(c.xbc))
	rc.GatherCols(z, all, c.z)
	rc.GatherCols(xbc, all, c.xbc)
	rc.GatherCols(dt, all, c.dt)
	rc.ConvSiLU(u, xbc, hist, m.conv, m.convBias)
	rc.GatherCols(x, u, c.x)
	rc.GatherCols(bm, u, c.b)
	rc.GatherCols(cm, u, c.c)
	b.Release(proj)
	y := b.Alloc(n, d)
	rc.SSMScan(y, x, dt, bm, cm, state, s)
	rc.GatedGroupNorm(y, y, z, m.norm, d/s.Groups, m.eps)
	b.Linear(dst, y, m.out)
	b.Release(mark)
}
