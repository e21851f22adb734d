package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// K2-Horizon (arch k2-horizon) is llama's block with RMS norms over
// k2Groups slices of each row (attention.group_norm_groups), q and k
// RMS-normed per head with a weight per head and element, the attention's
// output times log2(1 + 2^(attn_gate·h)) per element, DenseLead dense
// layers, then sigmoid-routed experts with a selection bias, normed and
// scaled by 2.5, a shared expert of SharedFFN, and values from MoVA:
// k2ValueUsed of k2Values value experts (attn_v_exps, routed by
// attn_v_gate with its bias; all of them when every expert is used), each
// silu(W·x), weighted and summed.
func (s Shape) k2() bool { return s.Arch == "k2-horizon" }

// k2Groups is attention.group_norm_groups; k2Values and k2ValueUsed are
// attention.value_expert_count and value_expert_used_count.
const k2Groups, k2Values, k2ValueUsed = 2, 4, 2

// k2ValuesUsed is value_expert_used_count: k2ValueUsed, or every value
// expert when every expert is used.
func (s Shape) k2ValuesUsed() int {
	if s.ExpertsUsed == s.Experts {
		return k2Values
	}
	return k2ValueUsed
}

// checkK2 validates k2-horizon's fields.
func (s Shape) checkK2() error {
	if s.k2() && (s.Experts == 0 || s.SharedFFN <= 0 || s.DenseLead < 1 || s.Embd%k2Groups != 0) {
		return fmt.Errorf("shape: k2-horizon needs experts (%d), a shared expert (%d), a dense first layer (%d) and a width in %d groups (%d)", s.Experts, s.SharedFFN, s.DenseLead, k2Groups, s.Embd)
	}
	return nil
}

// k2Keys writes the norms' groups, MoVA's and the experts' keys.
func (c *Config) k2Keys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".attention.group_norm_groups", uint32(k2Groups))
	w.Add(a+".attention.value_expert_count", uint32(k2Values))
	w.Add(a+".attention.value_expert_used_count", uint32(c.k2ValuesUsed()))
	w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
	w.Add(a+".expert_shared_count", uint32(1))
	w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
	w.Add(a+".expert_weights_norm", true)
	w.Add(a+".expert_weights_scale", float32(2.5))
}

// k2Layer adds layer i's tensors.
func (c *Config) k2Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, q, kv, res := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim), c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
	add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
	add(p+"attn_q_norm.weight", []uint64{q}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
	add(p+"attn_k_norm.weight", []uint64{kv}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	if i < c.DenseLead {
		add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
	} else {
		nv := uint64(k2Values)
		add(p+"attn_v_gate.weight", []uint64{e, nv}, i, c.normal(p+"attn_v_gate.weight", invSqrt(e)))
		add(p+"attn_v_gate.bias", []uint64{nv}, i, c.normal(p+"attn_v_gate.bias", 0.1))
		add(p+"attn_v_exps.weight", []uint64{e, kv, nv}, i, c.normal(p+"attn_v_exps.weight", 2*invSqrt(e)))
	}
	add(p+"attn_gate.weight", []uint64{e, q}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", res*invSqrt(q)))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if i < c.DenseLead {
		ff := uint64(c.FFN)
		add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
		return
	}
	c.expertTensors(add, i)
	add(p+"exp_probs_b.bias", []uint64{uint64(c.Experts)}, i, c.normal(p+"exp_probs_b.bias", 0.1))
	sf := uint64(c.SharedFFN)
	add(p+"ffn_gate_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate_shexp.weight", invSqrt(e)))
	add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", invSqrt(e)))
	add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", res*invSqrt(sf)))
}

// k2Params is Params for k2-horizon.
func (s Shape) k2Params() int64 {
	e := int64(s.Embd)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		n += 2*e + 2*e*q + e*kv + q + kv + e*q // norms, q, gate, output, k, q/k norms
		if i < s.DenseLead {
			n += e*kv + 3*e*int64(s.FFN)
			continue
		}
		nv, nx := int64(k2Values), int64(s.Experts)
		n += e*nv + nv + e*kv*nv
		n += e*nx + nx + 3*e*int64(s.ExpertFFN)*nx + 3*e*int64(s.SharedFFN)
	}
	return n
}
