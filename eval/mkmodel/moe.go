package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// The mixtures of experts on llama's block (the generic layer of
// Config.tensors), each as llama.cpp's converter writes it:
//
//   - qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2's attention (q, k and v
//     biases; heads × head size = width) and a shared expert of SharedFFN
//     gated per token by ffn_gate_inp_shexp (a vector of the width);
//   - olmoe (OLMoE): q and k RMS-normed over whole rows of the width (as
//     many KV heads as heads), experts of the FFN width;
//   - granitemoe (Granite 3.x MoE): granite's multipliers, experts of the
//     FFN width, a shared expert when SharedFFN is set;
//   - hunyuan-moe (Hunyuan-A13B): q and k normed per head, experts of the
//     FFN width (also written as expert_feed_forward_length, which
//     llama.cpp requires), a shared expert of SharedFFN;
//   - afmoe (Arcee's Trinity): embeddings times sqrt(width), norms before
//     and after the attention and the FFN, q and k normed per head, the
//     attention's output gated by sigmoid(attn_gate·x), every fourth
//     layer global and without RoPE (the others sliding over Window keys
//     when set), DenseLead dense layers, then sigmoid routing with a
//     selection bias, normed and scaled by 2.826, and a shared expert as
//     wide as an expert;
//   - exaone-moe (K-EXAONE): q and k normed per head, 3 layers of 4
//     sliding over Window keys (required) with RoPE and the fourth global
//     without, DenseLead dense layers, then sigmoid routing with a
//     selection bias, normed and scaled by 2.5, and a shared expert;
//   - bailingmoe2 (Ling 2.0, Ring 2.0): q, k and v in one attn_qkv, q and k
//     normed per head, RoPE over RopeDims of the head, DenseLead dense
//     layers, then sigmoid routing with a selection bias over
//     ExpertGroups groups (ExpertGroupsUsed chosen), weights normed and
//     scaled by 2.5, and a shared expert of SharedFFN.

// sharedExpert reports an architecture of the generic layer whose mixture
// of experts may have a shared expert (SharedFFN).
func (s Shape) sharedExpert() bool {
	switch s.Arch {
	case "ernie4_5-moe", "dots1", "hy_v3", "k2-horizon", "llama4", "qwen2moe", "granitemoe", "hunyuan-moe", "bailingmoe2", "afmoe", "exaone-moe", "cohere2moe", "deepseek", "deepseek2-ocr", "bailingmoe", "step35", "laguna", "kimi-linear", "bailingmoe3", "kimi-k3", "dots3note", "hy_v4", "grok", "minimax-m3", "glm5-next", "deepseek4":
		return true
	}
	return false
}

// checkMoE validates the fields of the mixtures above.
func (s Shape) checkMoE() error {
	switch {
	case (s.Arch == "qwen2moe" || s.Arch == "hunyuan-moe" || s.Arch == "bailingmoe2" || s.Arch == "exaone-moe" || s.Arch == "bailingmoe") && s.SharedFFN <= 0:
		return fmt.Errorf("shape: %s has a shared expert: its width must be positive", s.Arch)
	case (s.Arch == "deepseek" || s.Arch == "deepseek2-ocr") && (s.SharedFFN <= 0 || s.SharedFFN%s.ExpertFFN != 0):
		return fmt.Errorf("shape: %s's shared experts are whole experts (%d wide, experts %d)", s.Arch, s.SharedFFN, s.ExpertFFN)
	case s.Arch == "deepseek2-ocr" && (s.KVHeads != s.Heads || s.Heads*s.HeadDim != s.Embd):
		return fmt.Errorf("shape: llama.cpp's deepseek2-ocr shapes q, k and v as heads filling the width: %d KV heads for %d heads of %d, width %d", s.KVHeads, s.Heads, s.HeadDim, s.Embd)
	case s.Arch == "exaone-moe" && s.Window <= 0:
		return fmt.Errorf("shape: exaone-moe needs a sliding window")
	case (s.Arch == "afmoe" || s.Arch == "bailingmoe") && s.SharedFFN != s.ExpertFFN:
		return fmt.Errorf("shape: afmoe's shared expert is as wide as an expert (%d != %d)", s.SharedFFN, s.ExpertFFN)
	case (s.Arch == "qwen2moe" || s.Arch == "olmoe") && s.Heads*s.HeadDim != s.Embd:
		// llama.cpp's loaders expect attn_q and attn_output to be Embd×Embd.
		return fmt.Errorf("shape: %s needs heads × head dimension = width (%d × %d != %d)", s.Arch, s.Heads, s.HeadDim, s.Embd)
	case s.Arch == "olmoe" && s.KVHeads != s.Heads:
		// llama.cpp shapes attn_k_norm by the width.
		return fmt.Errorf("shape: olmoe's k norm spans the width: %d KV heads must be the %d heads", s.KVHeads, s.Heads)
	case s.ExpertGroups < 0 || s.ExpertGroupsUsed < 0 || s.ExpertGroups > 0 && (s.Arch != "bailingmoe2" || s.Experts%s.ExpertGroups != 0 || s.ExpertGroupsUsed < 1 || s.ExpertGroupsUsed > s.ExpertGroups):
		return fmt.Errorf("shape: %d expert groups, %d used (bailingmoe2 only, dividing the experts)", s.ExpertGroups, s.ExpertGroupsUsed)
	}
	return nil
}

// qkNorms reports the q and k norms of the generic layer: per head
// (HeadDim values) or over whole rows; none for other architectures.
func (s Shape) qkNorms() (perHead, rows bool) {
	switch s.Arch {
	case "qwen3", "qwen3moe", "grovemoe", "exaone4", "dots1", "hy_v3", "hunyuan-moe", "bailingmoe2", "hunyuan-dense", "hunyuan_vl", "afmoe", "apertus", "exaone-moe", "mellum", "maple", "maincoder", "muse-glimmer":
		return true, false
	case "olmo2", "minimax-m2", "olmoe":
		return false, true
	}
	return false, false
}

// selBias reports a mixture of the generic layer whose routing has a
// selection bias (exp_probs_b).
func (s Shape) selBias() bool {
	switch s.Arch {
	case "minimax-m2", "ernie4_5-moe", "dots1", "hy_v3", "bailingmoe2", "afmoe", "exaone-moe":
		return true
	}
	return false
}

// qkvBias reports q, k and v biases in the generic layer.
func (s Shape) qkvBias() bool {
	return s.Arch == "qwen2" || s.Arch == "seed_oss" || s.Arch == "qwen2moe" || s.Arch == "phimoe" || s.Arch == "stablelm" || s.geluMLP() || s.Arch == "jais2" || s.Arch == "pangu-embedded"
}

// moeKeys writes the metadata of the mixtures above.
func (c *Config) moeKeys(w *gguf.Writer) {
	a := c.Arch
	if c.SharedFFN > 0 && (a == "qwen2moe" || a == "granitemoe" || a == "hunyuan-moe" || a == "bailingmoe2") {
		w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
	}
	if a == "cohere2moe" { // sigmoid routing (the default) renormalized; a shared expert when SharedFFN is set
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_weights_norm", true)
		if c.SharedFFN > 0 {
			w.Add(a+".expert_shared_count", uint32(1))
			w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
		}
	}
	if a == "deepseek2-ocr" { // DeepSeek-OCR's: softmax routing, not renormalized, scaled by 1; its shared experts are SharedFFN/ExpertFFN experts
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_shared_count", uint32(c.SharedFFN/c.ExpertFFN))
		w.Add(a+".expert_gating_func", uint32(1)) // softmax
		w.Add(a+".expert_weights_norm", false)
		w.Add(a+".expert_weights_scale", float32(1))
	}
	if a == "deepseek" { // DeepSeek-MoE's: softmax routing, not renormalized; its shared experts are SharedFFN/ExpertFFN experts
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_shared_count", uint32(c.SharedFFN/c.ExpertFFN))
		w.Add(a+".expert_weights_scale", float32(1))
	}
	if a == "exaone-moe" { // K-EXAONE's routing; its sliding window is Window's
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_shared_count", uint32(1))
		w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
		w.Add(a+".expert_weights_norm", true)
		w.Add(a+".expert_weights_scale", float32(2.5))
	}
	if a == "afmoe" { // Trinity's routing: sigmoid by default, a shared expert as wide as an expert
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_shared_count", uint32(1))
		w.Add(a+".expert_weights_norm", true)
		w.Add(a+".expert_weights_scale", float32(2.826))
	}
	if a == "bailingmoe" { // Ling 1's: softmax routing renormalized, a shared expert as wide as an expert
		w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
		w.Add(a+".expert_shared_count", uint32(1))
		w.Add(a+".expert_weights_norm", true)
	}
	if a == "bailingmoe2" { // Ling 2.0's routing
		w.Add(a+".rope.dimension_count", uint32(c.ropeDims()))
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_shared_count", uint32(1))
		w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
		w.Add(a+".expert_weights_norm", true)
		w.Add(a+".expert_weights_scale", float32(2.5))
		if c.ExpertGroups > 0 {
			w.Add(a+".expert_group_count", uint32(c.ExpertGroups))
			w.Add(a+".expert_group_used_count", uint32(c.ExpertGroupsUsed))
		}
	}
}

// fusedQKV adds layer i's attn_qkv ([q | k | v] rows, no bias), the
// scales of attn_q, attn_k and attn_v.
func (c *Config) fusedQKV(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	e, q, kv := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim)
	p := fmt.Sprintf("blk.%d.", i)
	qk := c.normal(p+"attn_qkv.weight", 1.2*invSqrt(e))
	v := c.normal(p+"attn_qkv.weight", invSqrt(e))
	add(p+"attn_qkv.weight", []uint64{e, q + 2*kv}, i, func(r int, dst []float32) {
		if uint64(r) < q+kv {
			qk(r, dst)
		} else {
			v(r, dst)
		}
	})
	if c.Arch == "gptneox" || c.Arch == "gpt2" || c.Arch == "bloom" || c.Arch == "jais" || c.Arch == "qwen" {
		add(p+"attn_qkv.bias", []uint64{q + 2*kv}, i, c.normal(p+"attn_qkv.bias", 0.1))
	}
}
