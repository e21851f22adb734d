package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// mhcStreams is the residual streams' count of the models mixed by
// manifold-constrained hyper-connections (glm5-next, deepseek4:
// hyper_connection.count, of which llama.cpp runs only 4); mhcSinkhorn
// their Sinkhorn iterations.
const (
	mhcStreams  = 4
	mhcSinkhorn = 20
)

// mhcKeys writes the streams' metadata.
func (c *Config) mhcKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".hyper_connection.count", uint32(mhcStreams))
	w.Add(a+".hyper_connection.sinkhorn_iterations", uint32(mhcSinkhorn))
	w.Add(a+".hyper_connection.epsilon", float32(1e-6))
}

// mhcMixes adds layer i's mixes around the mixer and the FFN: hc_*_fn
// (per row the read gates, the write gates and the streams' matrix),
// hc_*_base and hc_*_scale.
func (c *Config) mhcMixes(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	e, hc := uint64(c.Embd), uint64(mhcStreams)
	for _, part := range []string{"attn", "ffn"} {
		n := fmt.Sprintf("blk.%d.hc_%s", i, part)
		add(n+"_fn.weight", []uint64{hc * e, (2 + hc) * hc}, i, c.normal(n+"_fn.weight", invSqrt(hc*e)))
		add(n+"_base.weight", []uint64{(2 + hc) * hc}, i, c.normal(n+"_base.weight", 0.5))
		add(n+"_scale.weight", []uint64{3}, i, c.gain(n+"_scale.weight", 1, 0.2))
	}
}

// hcHead adds the reduction of streams streams before the final norm
// (output_hc_*: hy_v4's and deepseek4's).
func (c *Config) hcHead(add func(name string, shape []uint64, layer int, fill RowFunc), streams int) {
	e, hc := uint64(c.Embd), uint64(streams)
	add("output_hc_fn.weight", []uint64{hc * e, hc}, -1, c.normal("output_hc_fn.weight", invSqrt(hc*e)))
	add("output_hc_base.weight", []uint64{hc}, -1, c.normal("output_hc_base.weight", 0.5))
	add("output_hc_scale.weight", []uint64{1}, -1, c.gain("output_hc_scale.weight", 1, 0.2))
}
