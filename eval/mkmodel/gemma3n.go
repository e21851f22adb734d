package mkmodel

import (
	"fmt"
	"math"

	"ppl.dev/gguf"
)

// Gemma 3n (arch gemma3n: E2B, E4B) as llama.cpp 0.7.0 reads it: Gemma's
// frame (embedding × sqrt(width), q/k/v norms, pre- and post-norms, GeGLU,
// NeoX RoPE, sliding layers 4 of each 5, tied soft-capped head) around
// four streams of the residual (AltUp: the layer runs on one, the others
// are predicted from it and corrected after), a low-rank branch beside the
// attention (LAuReL, rank 64 as llama.cpp requires), per-layer inputs of
// PerLayer values, and the KV of the layers from 20 on taken from layers
// 18 and 19. Keys as the converter writes them: feed_forward_length per
// layer, shared_kv_layers as a float, activation_sparsity_scale and
// sliding_window_pattern as arrays (llama.cpp reads none of the three).

// gemma3nAltUp is the number of AltUp streams (altup.num_inputs).
const gemma3nAltUp = 4

// gemma3nLaurel is LAuReL's rank, which llama.cpp fixes.
const gemma3nLaurel = 64

// gemma3nKVLayers is the layers with their own KV cache (llama.cpp's
// n_layer_kv_from_start); gemma3nSparse the layers whose FFN gate is
// sparsified (n_layer_sparsity).
const gemma3nKVLayers, gemma3nSparse = 20, 10

func (s Shape) gemma3n() bool { return s.Arch == "gemma3n" }

// checkGemma3n validates Gemma 3n's fields.
func (s Shape) checkGemma3n() error {
	switch {
	case !s.gemma3n() && !s.qwen4exp() && s.PerLayer != 0:
		return fmt.Errorf("shape: per-layer inputs are gemma3n's and qwen4exp's")
	case !s.gemma3n():
		return nil
	case s.PerLayer <= 0 || s.Window <= 0 || !s.Tied:
		return fmt.Errorf("shape: gemma3n needs per-layer inputs, a sliding window and a tied head (%d, %d, %v)", s.PerLayer, s.Window, s.Tied)
	}
	return nil
}

// gemma3nKeys writes Gemma 3n's own metadata.
func (c *Config) gemma3nKeys(w *gguf.Writer) {
	a, L := c.Arch, c.Layers
	ffn, sparsity, pattern := make([]int32, L), make([]float32, L), make([]bool, L)
	for i := range L {
		ffn[i] = int32(c.FFN)
		sparsity[i] = float32(math.Inf(-1))
		if i < gemma3nSparse {
			sparsity[i] = 1.6448533535003662 // the normal distribution's 95th percentile
		}
		pattern[i] = i%5 < 4
	}
	w.Add(a+".feed_forward_length", ffn)
	w.Add(a+".attention.sliding_window", uint32(c.Window))
	w.Add(a+".attention.sliding_window_pattern", pattern)
	w.Add(a+".attention.shared_kv_layers", float32(max(L-gemma3nKVLayers, 0)))
	w.Add(a+".activation_sparsity_scale", sparsity)
	w.Add(a+".altup.active_idx", uint32(0))
	w.Add(a+".altup.num_inputs", uint32(gemma3nAltUp))
	w.Add(a+".embedding_length_per_layer_input", uint32(c.PerLayer))
	w.Add(a+".final_logit_softcapping", float32(30))
}

// gemma3nTensors adds a Gemma 3n model's tensors.
func (c *Config) gemma3nTensors(add func(name string, shape []uint64, layer int, fill RowFunc)) {
	e, v, P, L := uint64(c.Embd), uint64(c.Vocab), uint64(c.PerLayer), uint64(c.Layers)
	q, kv, ff, hd := uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim), uint64(c.FFN), uint64(c.HeadDim)
	A, R := uint64(gemma3nAltUp), uint64(gemma3nLaurel)
	res := c.Residual
	add("token_embd.weight", []uint64{e, v}, -1, c.normal("token_embd.weight", tiedEmbedStd))
	add("per_layer_token_embd.weight", []uint64{P * L, v}, -1, c.normal("per_layer_token_embd.weight", 1/math.Sqrt(float64(P))))
	add("per_layer_model_proj.weight", []uint64{e, P * L}, -1, c.normal("per_layer_model_proj.weight", 1))
	add("per_layer_proj_norm.weight", []uint64{P}, -1, c.gain("per_layer_proj_norm.weight", 1, 0.1))
	add("altup_proj.weight", []uint64{e, e, A - 1}, -1, c.normal("altup_proj.weight", invSqrt(e)))
	add("altup_unembd_proj.weight", []uint64{e, e, A - 1}, -1, c.normal("altup_unembd_proj.weight", invSqrt(e)))
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		norm := func(name string, n uint64, base float64) {
			add(p+name+".weight", []uint64{n}, i, c.gain(p+name+".weight", base, 0.1*base))
		}
		mat := func(name string, in, out uint64, std float64) {
			add(p+name+".weight", []uint64{in, out}, i, c.normal(p+name+".weight", std))
		}
		norm("attn_norm", e, 1)
		mat("attn_q", e, q, 1.2*invSqrt(e))
		mat("attn_k", e, kv, 1.2*invSqrt(e))
		mat("attn_v", e, kv, invSqrt(e))
		mat("attn_output", q, e, res*invSqrt(q))
		norm("attn_q_norm", hd, 0.25)
		norm("attn_k_norm", hd, 0.25)
		norm("post_attention_norm", e, res)
		norm("ffn_norm", e, 1)
		mat("ffn_gate", e, ff, invSqrt(e))
		mat("ffn_up", e, ff, invSqrt(e))
		mat("ffn_down", ff, e, res*invSqrt(ff))
		norm("post_ffw_norm", e, res)
		mat("inp_gate", e, P, invSqrt(e))
		mat("proj", P, e, invSqrt(P))
		norm("post_norm", e, 0.5*res)
		mat("altup_correct_coef", A, A, 0.02)
		norm("altup_correct_scale", e, 1)
		mat("altup_predict_coef", A, A*A, 0.02)
		mat("altup_router", e, A, 4)
		norm("altup_router_norm", e, 1)
		mat("laurel_l", e, R, invSqrt(e))
		mat("laurel_r", R, e, invSqrt(R))
		norm("laurel_post_norm", e, 0.5*res)
	}
	gain := 2 / (tiedEmbedStd * math.Sqrt(float64(e)))
	add("output_norm.weight", []uint64{e}, -1, c.gain("output_norm.weight", gain, 0.15*gain))
}

// gemma3nParams is Params for Gemma 3n.
func (s Shape) gemma3nParams() int64 {
	e, P, L := int64(s.Embd), int64(s.PerLayer), int64(s.Layers)
	q, kv, A := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(gemma3nAltUp)
	block := 2*e*q + 2*e*kv + 2*int64(s.HeadDim) + 3*e*int64(s.FFN) + 2*e*P + A*A + A*A*A + e*A + 2*e*gemma3nLaurel + 8*e
	return s.headParams() + P*L*int64(s.Vocab) + e*P*L + P + 2*(A-1)*e*e + L*block
}
