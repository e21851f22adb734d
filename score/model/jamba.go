package model

import "ppl.dev/score/ml"

// jamba: AI21's Jamba (Jamba-v0.1, Jamba 1.5 Mini and Large, Jamba
// Reasoning 3B), as llama.cpp 0.7.0 runs it: a pre-norm decoder whose
// mixer is Mamba-1 (mamba.go's mamba1, with dt, B and C RMS-normed by
// ssm_dt_norm, ssm_b_norm, ssm_c_norm) in the layers whose
// attention.head_count_kv (a per-layer array) is 0 and attention without
// positions in the others; the FFN a SwiGLU MLP, or where the layer has
// ffn_gate_inp experts of feed_forward_length routed by softmax, their
// weights neither renormalized nor scaled (llama.cpp fixes both).
func init() { Register("jamba", newJamba) }

func newJamba(l *Loader) Network {
	hp := l.HP
	proto, kv := l.mamba1Params(), l.kvHeads()
	if proto == nil || kv == nil {
		return nil
	}
	var moe *moeParams
	if n, err := (meta{l.f, hp.Arch}).int("expert_count", 0); err != nil {
		l.fail(err)
		return nil
	} else if n > 0 {
		if moe = l.moeParams(moeOpts{gating: ml.GateSoftmax, ffn: hp.FFN}); moe == nil {
			return nil
		}
		moe.Norm, moe.Scale = false, 0 // whatever the file says
	}
	d := l.baseDecoder(false) // its RoPE unused: no layer turns q and k
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		var ly decoderLayer
		if kv[i] == 0 {
			ly = decoderLayer{attnNorm: l.Norm(p+"attn_norm", hp.Embd), ffnNorm: l.Norm(p+"ffn_norm", hp.Embd)}
			ly.mixer = l.mamba1(p, proto, true)
		} else {
			ly = l.preNormLayer(p, "ffn_norm")
			ly.noRoPE = true
		}
		ly.ffn = l.moeOrDense(p, moe)
		return ly
	})
	if net == nil {
		return nil
	}
	return ssmDecoder{d, l.Opts.SSMStateDtype}
}
