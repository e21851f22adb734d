package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// qwen4exp (Qwen3.8-Flash-Next) is a Qwen3.5 hybrid (qwen35moe's Gated
// DeltaNet, with a sigmoid output gate, and gated full attention every
// AttnInterval-th layer, experts with a gated shared expert) whose
// residual is q4Streams streams mixed by low-rank hyper-connections
// (hc_attn_*, hc_ffn_*, output_hc_*: no attention or FFN norms, no output
// norm). Layer q4PLELayer adds n-gram hash embeddings (per_layer_token_embd,
// blk.N.ple_*): q4Gram-grams hashed into q4GramHeads heads per order, each
// head a range of a table of rows PerLayer wide. The attention layers
// attend sparsely (QSA): an indexer of q4IdxHeads heads of q4IdxDim scores
// blocks of q4Ratio keys by their pooled key, and each query reads the
// q4TopK/q4Ratio best blocks and the keys after its last whole block.
func (s Shape) qwen4exp() bool { return s.Arch == "qwen4exp" }

// The generated qwen4exp's fixed sizes. Its PLE hash reads token 13 (the
// tiny-llama vocabulary's newline) as the end of a segment, so that the
// generated files' texts cut their n-grams often.
const (
	q4Streams, q4LowRank                       = 4, 16
	q4Gram, q4GramHeads, q4PLEConv, q4PLELayer = 3, 2, 4, 1
	q4EOS                                      = 13
	q4IdxHeads, q4IdxDim, q4TopK, q4Ratio      = 2, 32, 16, 4
)

// Q4PLEHeads is the generated qwen4exp's PLE heads, whose rows side by
// side are the width: Embd = PerLayer · Q4PLEHeads.
const Q4PLEHeads = (q4Gram - 1) * q4GramHeads

// q4Primes are the PLE heads' vocabulary sizes; q4Mult the hash's
// multipliers, one large enough that the products wrap at 2⁶⁴ as
// llama.cpp's uint64 arithmetic does.
var (
	q4Primes = []uint64{101, 103, 107, 109}
	q4Mult   = []uint64{20000000000003, 0x9E3779B97F4A7C15, 27182818284591}
)

// checkQwen4Exp validates qwen4exp's fields: the PLE heads must tile the
// width, and layer q4PLELayer must be Gated DeltaNet.
func (s Shape) checkQwen4Exp() error {
	if !s.qwen4exp() {
		return nil
	}
	if s.PerLayer <= 0 || s.Embd != s.PerLayer*(q4Gram-1)*q4GramHeads || s.Layers <= q4PLELayer || !s.recurrent(q4PLELayer) || s.Experts == 0 || s.SharedFFN <= 0 || s.RopeDims > q4IdxDim {
		return fmt.Errorf("shape: qwen4exp needs a width of %d PLE heads of PerLayer (%d, %d), a Gated DeltaNet layer %d, experts with a shared expert, and rope dims within the indexer's %d", (q4Gram-1)*q4GramHeads, s.PerLayer, s.Embd, q4PLELayer, q4IdxDim)
	}
	return nil
}

// q4Keys writes qwen4exp's own metadata (hybridKeys the rest).
func (c *Config) q4Keys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".hyper_connection.count", uint32(q4Streams))
	w.Add(a+".hyper_connection.low_rank", uint32(q4LowRank))
	w.Add(a+".attention.indexer.head_count", uint32(q4IdxHeads))
	w.Add(a+".attention.indexer.key_length", uint32(q4IdxDim))
	w.Add(a+".attention.indexer.top_k", uint32(q4TopK))
	ratios := make([]uint32, c.Layers)
	for i := range ratios {
		if !c.recurrent(i) {
			ratios[i] = q4Ratio
		}
	}
	w.Add(a+".attention.compress_ratios", ratios)
	w.Add(a+".ple.layers", []uint32{q4PLELayer})
	w.Add(a+".ple.ngram_size", uint32(q4Gram))
	w.Add(a+".ple.heads_per_ngram", uint32(q4GramHeads))
	w.Add(a+".ple.conv_kernel", uint32(q4PLEConv))
	w.Add(a+".ple.eos_token_id", uint32(q4EOS))
	w.Add(a+".embedding_length_per_layer_input", uint32(c.PerLayer))
	w.Add(a+".ple.layer_multipliers", q4Mult)
	offsets := make([]uint64, len(q4Primes))
	for h := 1; h < len(offsets); h++ {
		offsets[h] = offsets[h-1] + q4Primes[h-1]
	}
	w.Add(a+".ple.head_offsets", offsets)
	w.Add(a+".ple.head_vocab_sizes", q4Primes)
}

// q4Rows is the PLE table's rows.
func q4Rows() uint64 {
	var n uint64
	for _, p := range q4Primes {
		n += p
	}
	return n
}

// q4Table adds the PLE table.
func (c *Config) q4Table(add func(name string, shape []uint64, layer int, fill RowFunc)) {
	add("per_layer_token_embd.weight", []uint64{uint64(c.PerLayer), q4Rows()}, -1, c.normal("per_layer_token_embd.weight", 1))
}

// q4Mix adds a hyper-connection's tensors: its grouped norm (of weights
// about gain), its low-rank gate and (but for the head's) its injection.
func (c *Config) q4Mix(add func(name string, shape []uint64, layer int, fill RowFunc), p string, i int, gain float64, inject bool) {
	e, s, lr := uint64(c.Embd), uint64(q4Streams), uint64(q4LowRank)
	add(p+"norm.weight", []uint64{e, s}, i, c.gain(p+"norm.weight", gain, 0.1*gain))
	add(p+"down.weight", []uint64{s * e, lr}, i, c.normal(p+"down.weight", invSqrt(s*e)))
	add(p+"up.weight", []uint64{lr, s * e}, i, c.normal(p+"up.weight", invSqrt(lr)))
	if inject {
		add(p+"inject.weight", []uint64{s * e, s}, i, c.normal(p+"inject.weight", invSqrt(s*e)))
	}
}

// q4Layer adds layer i's tensors.
func (c *Config) q4Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, s := uint64(c.Embd), uint64(q4Streams)
	c.q4Mix(add, p+"hc_attn_", i, 1, true)
	c.q4Mix(add, p+"hc_ffn_", i, 1, true)
	c.hybridMixer(add, i)
	if !c.recurrent(i) {
		x, d := p+"indexer.", uint64(q4IdxDim)
		add(x+"q_proj.weight", []uint64{e, q4IdxHeads * d}, i, c.normal(x+"q_proj.weight", 1.2*invSqrt(e)))
		add(x+"k_proj.weight", []uint64{e, d}, i, c.normal(x+"k_proj.weight", 1.2*invSqrt(e)))
		add(x+"q_norm.weight", []uint64{d}, i, c.gain(x+"q_norm.weight", 1, 0.2))
		add(x+"k_norm.weight", []uint64{d}, i, c.gain(x+"k_norm.weight", 1, 0.2))
	}
	if i == q4PLELayer {
		add(p+"ple_key.weight", []uint64{e, s * e}, i, c.normal(p+"ple_key.weight", invSqrt(e)))
		add(p+"ple_value.weight", []uint64{e, e}, i, c.normal(p+"ple_value.weight", c.Residual*invSqrt(e)))
		for _, n := range []string{"ple_norm_key", "ple_norm_query", "ple_norm_conv"} {
			add(p+n+".weight", []uint64{e, s}, i, c.gain(p+n+".weight", 1, 0.1))
		}
		add(p+"ple_conv1d.weight", []uint64{q4PLEConv, s * e}, i, c.normal(p+"ple_conv1d.weight", 1.2*invSqrt(q4PLEConv)))
	}
	c.hybridFFN(add, i)
}

// q4Params is Params for qwen4exp.
func (s Shape) q4Params() int64 {
	e, st, lr := int64(s.Embd), int64(q4Streams), int64(q4LowRank)
	mix := e*st + 2*st*e*lr
	n := s.hybridParams() - int64(s.Layers)*2*e - e // no attention, FFN or output norms
	n += int64(s.Layers)*2*(mix+st*e*st) + mix + int64(q4Rows())*int64(s.PerLayer)
	for i := range s.Layers {
		if !s.recurrent(i) {
			n += e*q4IdxHeads*q4IdxDim + e*q4IdxDim + 2*q4IdxDim
		}
	}
	return n + e*st*e + e*e + 3*e*st + q4PLEConv*st*e
}
