package model

// falcon-h1: TII's Falcon-H1 (0.5B to 34B), as llama.cpp 0.7.0 runs it:
// every layer runs attention and a Mamba-2 mixer (granitehybrid.go's)
// side by side on the same RMS-normed rows (attn_norm) and adds their sum
// to the residual stream, then a SwiGLU MLP (ffn_norm); biases wherever
// the file has them (q, k, v, the MLP's, the convolution's; the
// attention's output's llama.cpp loads and leaves unapplied, as ppl
// does), the mixer's grouped norm only when the file has
// ssm_norm (without, the gate alone); RoPE with NeoX pairs; the scores
// scaled by 1/sqrt(head size), whatever attention.scale says (llama.cpp
// 0.7.0 reads it for the granite family alone, probed). The FFN's norm is
// the tensor
// blk.N.ffn_norm, without ".weight", as llama.cpp 0.7.0 binds it (or with
// it: bareNorm). The HF
// model's µP multipliers are
// folded into the weights by llama.cpp's converter: the file has none.
func init() { Register("falcon-h1", newFalconH1) }

func newFalconH1(l *Loader) Network {
	hp := l.HP
	proto, kv := l.mamba2Params(), l.kvHeads()
	if proto == nil || kv == nil {
		return nil
	}
	for i, n := range kv {
		if n == 0 {
			l.Failf("metadata %s.attention.head_count_kv: layer %d has none (every falcon-h1 layer has attention)", hp.Arch, i)
			return nil
		}
	}
	d := l.baseDecoder(true)
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.attnLayer(p)
		l.unbiased(ly.o) // llama.cpp loads attn_output's bias and leaves it unapplied (probed)
		ly.ffnNorm = l.bareNorm(p+"ffn_norm", hp.Embd)
		ly.mixer = l.mamba2(p, proto, l.Has(p+"ssm_conv1d.bias"), l.Has(p+"ssm_norm.weight"))
		ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		return ly
	})
	if net == nil {
		return nil
	}
	return ssmDecoder{d, l.Opts.SSMStateDtype}
}
