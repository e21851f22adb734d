package model

import (
	"cmp"
	"fmt"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
)

func init() { Register("mimo2", newMiMo2) }

// mimo2: Xiaomi's MiMo-V2-Flash, as llama.cpp 0.7.0 runs it: llama's
// block with NeoX RoPE over rope.dimension_count of each key head; value
// heads narrower than key heads (attention.value_length, MiMo's 128 of
// 192); the head counts per layer (attention.head_count and head_count_kv
// arrays); the layers attention.sliding_window_pattern flags attend to the
// last attention.sliding_window keys (both required) with RoPE of
// rope.freq_base_swa's base where given; an attention sink per head where
// the layer has attn_sinks; the attention's output (after attn_output)
// times attention.value_scale where given; each layer's FFN a SwiGLU MLP,
// or where it has ffn_gate_inp experts routed by sigmoid with the
// selection bias exp_probs_b, renormalized and not scaled (llama.cpp
// fixes all three, whatever expert_gating_func, expert_weights_norm and
// expert_weights_scale say); the output matrix required; the trailing
// nextn_predict_layers blocks (MTP) not run. The pattern must be an
// array, as llama.cpp requires it.
//
// The narrow values run as key-sized heads: attn_v's rows padded with
// zero rows to the key head's size (values of 0, so that the attention's
// extra columns are 0), and attn_output reading each head's first
// value_length columns of the attention's output (ml's GatherCols).
func newMiMo2(l *Loader) Network {
	if !l.dropNextN() { // llama.cpp reads the key for mimo2 (probed)
		return nil
	}
	hp := l.HP
	m := meta{l.f, hp.Arch}
	heads, kv, window, slides, err := m.slidingHeads(hp.Layers)
	baseSWA, vscale := 0.0, 0.0
	if err == nil {
		baseSWA, err = m.float("rope.freq_base_swa", 0)
	}
	if err == nil {
		vscale, err = m.float("attention.value_scale", 0)
	}
	if err == nil && (hp.ValueDim > hp.HeadDim || hp.ValueDim <= 0) {
		err = fmt.Errorf("metadata %s.attention.value_length = %d: want at most the key head's %d", hp.Arch, hp.ValueDim, hp.HeadDim)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	var moe *moeParams
	if l.Has(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", hp.Layers-1)) || m.has("expert_count") {
		if moe = l.moeParams(moeOpts{gating: ml.GateSigmoid, norm: true}); moe == nil {
			return nil
		}
		moe.gating, moe.Gating, moe.Norm, moe.Scale = ml.GateSigmoid, ml.GateSigmoid.String(), true, 0 // whatever the file says
	}
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	if vscale != 1 {
		d.attnOutScale = vscale
	}
	local := d.rope.Sliding(cmp.Or(baseSWA, d.rope.Base)) // llama.cpp 0.7.0's freq_scale_swa is 1 for mimo2 (probed)
	E, hd, vd := hp.Embd, hp.HeadDim, hp.ValueDim
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		a := l.layerAttn(d, i, heads[i], kv[i])
		if a == nil {
			return decoderLayer{}
		}
		a.ValueDim = vd
		ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", E), ffnNorm: l.Norm(p+"ffn_norm", E), o: l.Linear(p+"attn_output", a.Heads*vd, E), attn: a}
		var v *ml.Matrix
		ly.q, ly.k, v = l.qkv(p, a.Heads*hd, a.KVHeads*hd, a.KVHeads*vd)
		ly.v, ly.vCols = l.padHeads(v, a.KVHeads, vd, hd), headCols(a.Heads, vd, hd)
		if slides[i] {
			a.Window, ly.rope = window, local
		}
		a.Sinks = l.optVector(p+"attn_sinks.weight", a.Heads)
		ly.ffn = l.moeOrDense(p, moe)
		return ly
	})
	if net == nil {
		return nil
	}
	return gatherDecoder{d}
}

// moeOrDense binds prefix p's FFN: experts where the layer has
// ffn_gate_inp (refused when moe is nil: a file without expert_count),
// else a SwiGLU MLP of feed_forward_length (mimo2, step35); nil after an
// error.
func (l *Loader) moeOrDense(p string, moe *moeParams) FFN {
	if !l.Has(p + "ffn_gate_inp.weight") {
		return l.DenseFFN(p, l.HP.Embd, l.HP.FFN)
	}
	if moe == nil {
		l.Failf("tensor %sffn_gate_inp.weight: experts without %s.expert_count", p, l.HP.Arch)
		return nil
	}
	if e := l.MoE(p, moe); e != nil {
		return e
	}
	return nil
}

// padHeads is w (heads groups of vd rows) with each group padded by zero
// rows to hd: a value head of vd values as one of hd whose last hd - vd are
// 0 (a zero row decodes to 0 in every weight type: its scales are 0). w
// itself when vd = hd; nil for a nil w.
func (l *Loader) padHeads(w *ml.Matrix, heads, vd, hd int) *ml.Matrix {
	if w == nil || vd == hd {
		return w
	}
	rowBytes := len(w.Data) / w.Out
	p := *w
	p.Name, p.Out = fmt.Sprintf("%s (value heads of %d padded to %d)", w.Name, vd, hd), heads*hd
	p.Data = make([]byte, heads*hd*rowBytes)
	if w.Bias != nil {
		p.Bias = make([]float32, heads*hd)
	}
	for h := range heads {
		copy(p.Data[h*hd*rowBytes:], w.Data[h*vd*rowBytes:(h+1)*vd*rowBytes])
		if w.Bias != nil {
			copy(p.Bias[h*hd:], w.Bias[h*vd:(h+1)*vd])
		}
	}
	l.replaceMatrix(w, &p)
	return &p
}

// headCols are the columns of each of heads heads of hd that a head of vd
// values fills: h·hd to h·hd + vd - 1.
func headCols(heads, vd, hd int) []int {
	if vd == hd {
		return nil
	}
	cols := make([]int, 0, heads*vd)
	for h := range heads {
		for j := range vd {
			cols = append(cols, h*hd+j)
		}
	}
	return cols
}

// slidingHeads reads the per-layer attention of mimo2 and step35: the
// head counts (attention.head_count and head_count_kv, one or one per
// layer), attention.sliding_window (required) and which layers slide,
// attention.sliding_window_pattern: an array (required, as llama.cpp
// requires it) of n flags, or of the file's blocks, nextn_predict_layers
// included (the first n read: perLayerLen).
func (m meta) slidingHeads(n int) (heads, kv []int, window int, slides []bool, err error) {
	key := "attention.sliding_window_pattern"
	err = m.require("attention.sliding_window", key)
	if err == nil {
		heads, kv, err = m.layerHeads(n)
	}
	if err == nil {
		window, err = m.positive("attention.sliding_window", -1)
	}
	if err != nil {
		return nil, nil, 0, nil, err
	}
	v, _ := m.f.Lookup(m.arch + "." + key)
	if v.Type != gguf.ValueArray || !m.perLayerLen(v.Len(), n) {
		return nil, nil, 0, nil, fmt.Errorf("metadata %s.%s: want an array of %d flags (one per layer)", m.arch, key, n)
	}
	if slides, err = m.layerFlags(key, v.Len(), false); err != nil {
		return nil, nil, 0, nil, err
	}
	return heads, kv, window, slides[:n], nil
}

// layerHeads reads the query and KV head counts of n layers,
// attention.head_count and head_count_kv, each an array of one value per
// layer or one number for all.
func (m meta) layerHeads(n int) (heads, kv []int, err error) {
	heads, err = m.layerInts("attention.head_count", n, -1)
	if err == nil {
		kv, err = m.layerInts("attention.head_count_kv", n, -1)
	}
	return heads, kv, err
}

// headsLayer binds layer i's attention of heads and kv heads between its
// pre-norms (attn_norm; q, k and v fused in attn_qkv or apart;
// attn_output; ffn_norm), its own options d's with those head counts;
// the zero layer after an error.
func (l *Loader) headsLayer(d *decoder, i int, p string, heads, kv int) decoderLayer {
	a := l.layerAttn(d, i, heads, kv)
	if a == nil {
		return decoderLayer{}
	}
	E, hd := l.HP.Embd, l.HP.HeadDim
	ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", E), ffnNorm: l.Norm(p+"ffn_norm", E), o: l.Linear(p+"attn_output", heads*hd, E), attn: a}
	ly.q, ly.k, ly.v = l.qkv(p, heads*hd, kv*hd, kv*hd)
	return ly
}

// perLayerLen reports whether an array of length k holds one value per
// layer of n run: n values, or block_count's, with the trailing
// nextn_predict_layers blocks' (as llama.cpp reads such arrays before it
// drops them).
func (m meta) perLayerLen(k, n int) bool {
	blocks, err := m.int("block_count", -1)
	return k == n || err == nil && k == blocks
}

// colGatherer is what a decoder with narrow values needs beyond
// ml.Backend (ml.Recurrent's and ml.Gemma4's GatherCols).
type colGatherer interface {
	GatherCols(dst, x ml.Tensor, cols []int)
}

// gatherDecoder is a decoder whose layers gather columns: the attention's
// output (decoderLayer.vCols) or its gate's (gateCols).
type gatherDecoder struct{ *decoder }

func (m gatherDecoder) Check(b ml.Backend) error {
	if _, ok := b.(colGatherer); !ok {
		return fmt.Errorf("%s needs GatherCols (ml.Recurrent), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}
