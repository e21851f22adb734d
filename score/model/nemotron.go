package model

import "ppl.dev/score/ml"

// nemotron_h, nemotron_h_moe: NVIDIA's Nemotron-H (8B, 47B, 56B),
// Nemotron Nano 2 (9B, 12B) and Nemotron 3 Nano (30B-A3B), as llama.cpp
// 0.7.0 runs them: a stack of blocks of one kind each, x += f(RMSNorm(x))
// with the block's attn_norm, f chosen per layer from the per-layer
// metadata:
//   - head_count_kv 0 and feed_forward_length 0: a Mamba-2 mixer
//     (granitehybrid's, its convolution's bias optional);
//   - feed_forward_length 0: attention without positions (no RoPE in any
//     layer), scores scaled by 1/sqrt(head size), whatever attention.scale
//     says (llama.cpp 0.7.0 reads it for the granite family alone, probed);
//   - else an ungated MLP, ffn_down·relu(ffn_up·x)² (optional biases), or
//     in nemotron_h_moe experts of that form (ffn_up_exps,
//     ffn_down_exps) routed by sigmoid with the selection bias
//     exp_probs_b, normed as expert_weights_norm says and always scaled by
//     expert_weights_scale (as llama.cpp does), plus the shared expert
//     ffn_up_shexp, ffn_down_shexp; with moe_latent_size (Nemotron 3
//     Super) the experts read and write that width, through
//     ffn_latent_down and ffn_latent_up; nemotron_h_moe's trailing
//     nextn_predict_layers blocks (MTP) are not run.
func init() {
	Register("nemotron_h", func(l *Loader) Network { return newNemotronH(l, false) })
	Register("nemotron_h_moe", func(l *Loader) Network { return newNemotronH(l, true) })
}

func newNemotronH(l *Loader, experts bool) Network {
	if experts && !l.dropNextN() { // llama.cpp reads the key for nemotron_h_moe alone (probed)
		return nil
	}
	hp := l.HP
	m := meta{l.f, hp.Arch}
	proto, kv := l.mamba2Params(), l.kvHeads()
	if proto == nil || kv == nil {
		return nil
	}
	ff, err := m.layerInts("feed_forward_length", hp.Layers, -1)
	if err != nil {
		l.fail(err)
		return nil
	}
	var moe *moeParams
	if experts {
		if moe = l.moeParams(moeOpts{gating: ml.GateSigmoid, act: ml.ReLUSqr, latent: "moe_latent_size"}); moe == nil {
			return nil
		}
		moe.gating, moe.Gating = ml.GateSigmoid, ml.GateSigmoid.String() // llama.cpp's, whatever the file says
		if !m.has("expert_weights_scale") {
			l.Failf("missing metadata %s.expert_weights_scale (llama.cpp 0.7.0 scales the experts by it, by 0 when absent)", hp.Arch)
			return nil
		}
	}
	dec := l.baseDecoder(false)
	net := l.bindLayers(dec, func(i int, p string) decoderLayer {
		norm := l.Norm(p+"attn_norm", hp.Embd)
		switch {
		case kv[i] == 0 && ff[i] == 0:
			return decoderLayer{attnNorm: norm, mixer: l.mamba2(p, proto, l.Has(p+"ssm_conv1d.bias"), true)}
		case ff[i] == 0:
			qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
			return decoderLayer{attnNorm: norm, noRoPE: true,
				q: l.Linear(p+"attn_q", hp.Embd, qd), k: l.Linear(p+"attn_k", hp.Embd, kvd),
				v: l.Linear(p+"attn_v", hp.Embd, kvd), o: l.Linear(p+"attn_output", qd, hp.Embd)}
		case moe != nil:
			mo := l.MoE(p, moe)
			if l.Err() == nil && (mo.Shared == nil || mo.Router.SelBias == nil) {
				l.Failf("missing tensor %sffn_up_shexp.weight or %sexp_probs_b.bias (nemotron_h_moe's shared expert and selection bias)", p, p)
			}
			return decoderLayer{ffnNorm: norm, ffn: mo}
		}
		return decoderLayer{ffnNorm: norm, ffn: &Dense{ml.MLP{
			Up: l.Linear(p+"ffn_up", hp.Embd, ff[i]), Down: l.Linear(p+"ffn_down", ff[i], hp.Embd), Act: ml.ReLUSqr}}}
	})
	if net == nil {
		return nil
	}
	return ssmDecoder{dec, l.Opts.SSMStateDtype}
}
