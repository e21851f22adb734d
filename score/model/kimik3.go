package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// kimi-k3: Moonshot's Kimi K3, as llama.cpp 0.7.0 runs it: kimi-linear's
// hybrid (kimilinear.go: KDA layers where attention.head_count_kv is 0,
// latent attention without RoPE in the others, the score scale
// 1/sqrt(key_length_mla) whatever the file's RoPE says), with
//
//   - in the KDA layers, the output gate sigmoid(ssm_g·h) of full rank (no
//     ssm_g_a, ssm_g_b), ssm_a one value per head (a 1-D tensor), and with
//     kda.gate_lower_bound (below 0) the safe decay gate g = bound ·
//     sigmoid(-ssm_a[h]·(ssm_f_b·ssm_f_a·h + ssm_dt.bias)) (ssm_a holding
//     -exp(A_log)), without it kimi-linear's;
//   - in the latent attention layers, q compressed when
//     attention.q_lora_rank is set, and where the file has attn_gate, an
//     elementwise gate sigmoid(attn_gate·h) on the heads' outputs before
//     attn_output;
//   - SiTU instead of SwiGLU in every MLP (nn.SiTU, activation.situ_beta
//     and activation.situ_linear_beta);
//   - the routed experts at expert_latent_length (when set):
//     ffn_routed_down takes the layer's normed input there, the weighted
//     sum of the experts is RMS-normed by ffn_routed_norm (when present)
//     and taken back by ffn_routed_up; the router (with its selection bias
//     exp_probs_b, required) and the shared expert (n_ff_exp ·
//     expert_shared_count wide, present when the file has
//     ffn_gate_shexp) read the normed input itself;
//   - with attn_res.block_size B > 0, cross-layer residual attention
//     (ml.AttnRes): the input of every B-th layer is banked as a
//     checkpoint (before its attention, which then restarts the residual
//     from its own output), and the attention and the FFN of every layer
//     and the final norm read ResMix of the checkpoints and the running
//     residual, scored by attn_res_score, ffn_res_score and
//     output_res_score.
//
// The output matrix is required, and attn_kv_b refused (llama.cpp 0.7.0
// crashes building its graph on attn_kv_b alone and refuses the file with
// it beside attn_k_b and attn_v_b: probed).
type kimiK3 struct {
	kimiLinear
	block           int          // attn_res.block_size; 0: no residual attention
	attnRes, ffnRes []*ml.Vector // per layer: attn_res_score, ffn_res_score
	outRes          *ml.Vector   // output_res_score
}

// k3Hparams reads kimi-k3's keys of its own: the SiTU parameters, the
// residual attention's block and the KDA gate's lower bound (0: none).
func (l *Loader) k3Hparams() (situ nn.SiTU, block int, lowerBound float32, ok bool) {
	m := meta{l.f, l.HP.Arch}
	err := m.require("activation.situ_beta", "activation.situ_linear_beta", "attn_res.block_size",
		"attention.key_length_mla", "attention.value_length_mla", "expert_shared_count")
	var beta, lbeta float64
	if err == nil {
		beta, err = m.float("activation.situ_beta", 0)
	}
	if err == nil {
		lbeta, err = m.float("activation.situ_linear_beta", 0)
	}
	if err == nil {
		block, err = m.int("attn_res.block_size", 0)
	}
	if err == nil {
		lowerBound, err = l.kdaBound()
	}
	switch {
	case err != nil:
		l.fail(err)
	case !(beta > 0):
		l.Failf("metadata %s.activation.situ_beta = %g, want above 0", l.HP.Arch, beta)
	case block < 0:
		l.Failf("metadata %s.attn_res.block_size = %d", l.HP.Arch, block)
	default:
		return nn.SiTU{Beta: float32(beta), LinearBeta: float32(lbeta)}, block, lowerBound, true
	}
	return nn.SiTU{}, 0, 0, false
}

// situFFN makes f's MLPs (experts, shared expert, dense MLP) SiTU's.
func situFFN(f FFN, s nn.SiTU) {
	set := func(m *ml.MLP) { m.Act, m.SiTU = ml.SiTU, s }
	switch f := f.(type) {
	case *MoE:
		set(&f.Experts)
		if f.Shared != nil {
			set(f.Shared)
		}
	case *Dense:
		set(&f.MLP)
	}
}

// bindAttnRes binds the residual attention's scores; nil after an error.
func (l *Loader) bindAttnRes(k kimiLinear, block int) Network {
	m := kimiK3{kimiLinear: k, block: block}
	if block > 0 {
		E := l.HP.Embd
		m.outRes = l.Norm("output_res_score", E)
		for i := range k.layers {
			p := fmt.Sprintf("blk.%d.", i)
			m.attnRes = append(m.attnRes, l.Norm(p+"attn_res_score", E))
			m.ffnRes = append(m.ffnRes, l.Norm(p+"ffn_res_score", E))
		}
	}
	if l.Err() != nil {
		return nil
	}
	return m
}

// Check requires kimi-linear's operations and, with residual attention,
// ml.AttnRes.
func (m kimiK3) Check(b ml.Backend) error {
	if err := m.kimiLinear.Check(b); err != nil {
		return err
	}
	if _, ok := b.(ml.AttnRes); m.block > 0 && !ok {
		return fmt.Errorf("kimi-k3 needs the cross-layer residual attention (ml.AttnRes: ResMix), which backend %T lacks", b)
	}
	return nil
}

func (m kimiK3) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	d := m.deepseek2
	E, n, eps := d.hp.Embd, len(tokens), d.hp.Eps
	lb := b.(ml.Latent)
	var stack ml.Tensor // the checkpoints, stacked
	if m.block > 0 {
		stack = b.Alloc((len(d.layers)+m.block-1)/m.block*n, E)
	}
	banked := 0
	// read returns what a block reads of the residual x: x itself until a
	// checkpoint is banked, then the mix of the checkpoints and x, scored
	// by scores[i], in h.
	read := func(h, x ml.Tensor, scores []*ml.Vector, i int) ml.Tensor {
		if banked == 0 {
			return x
		}
		b.(ml.AttnRes).ResMix(h, b.Slice(stack, 0, banked*n), x, scores[i], eps)
		return h
	}
	x := b.Alloc(n, E) // the residual stream
	b.Embed(x, d.tokenEmbd, tokens)
	var keys ml.KeySet
	for i := range d.layers {
		ly := &d.layers[i]
		bank := m.block > 0 && i%m.block == 0
		mark := b.Mark()
		h := b.Alloc(n, E)
		b.RMSNorm(h, read(h, x, m.attnRes, i), ly.attnNorm, eps)
		if bank {
			lb.Columns(b.Slice(stack, banked*n, (banked+1)*n), 0, x, 0, E)
			banked++
		}
		var out ml.Tensor
		if ly.kda != nil {
			out = b.Alloc(n, E)
			ly.kda.forward(b, out, h)
		} else {
			out = d.attend(b, nil, &keys, i, h)
		}
		if bank { // the residual restarts from the attention's output
			lb.Columns(x, 0, out, 0, E)
		} else {
			b.Add(x, out)
		}
		b.RMSNorm(h, read(h, x, m.ffnRes, i), ly.ffnNorm, eps)
		ff := b.Alloc(n, E)
		ly.ffn.Forward(b, ff, h)
		b.Add(x, ff)
		b.Release(mark)
	}
	h := b.Alloc(n, E)
	b.RMSNorm(x, read(h, x, []*ml.Vector{m.outRes}, 0), d.outputNorm, eps)
	return x
}
