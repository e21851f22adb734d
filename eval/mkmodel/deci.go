package mkmodel

import (
	"fmt"
	"strings"

	"ppl.dev/gguf"
)

// Deci (arch deci: Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B,
// Llama-3.1-Nemotron-Ultra-253B) is llama's block whose layers the
// architecture search made differ; Layout names them, a letter a layer:
//
//	A  attention and the MLP (llama's layer)
//	L  "linear attention": attn_output alone on the normed rows
//	   (head_count_kv 0), and the MLP
//	F  no attention (head_count 0), the MLP
//	N  attention without an MLP (feed_forward_length 0)
//
// head_count, head_count_kv and feed_forward_length are written per layer.
func (s Shape) deci() bool { return s.Arch == "deci" }

// checkDeci validates deci's layout.
func (s Shape) checkDeci() error {
	if !s.deci() {
		return nil
	}
	if len(s.Layout) != s.Layers || strings.Trim(s.Layout, "ALFN") != "" {
		return fmt.Errorf("shape: deci's layout %q: want one of A, L, F, N per layer (%d)", s.Layout, s.Layers)
	}
	return nil
}

// deciKeys writes deci's per-layer head counts and MLP widths.
func (c *Config) deciKeys(w *gguf.Writer) {
	a := c.Arch
	heads, kv, ffn := make([]int32, c.Layers), make([]int32, c.Layers), make([]int32, c.Layers)
	for i := range c.Layers {
		k := c.Layout[i]
		if k != 'F' {
			heads[i] = int32(c.Heads)
		}
		if k == 'A' || k == 'N' {
			kv[i] = int32(c.KVHeads)
		}
		if k != 'N' {
			ffn[i] = int32(c.FFN)
		}
	}
	w.Add(a+".attention.head_count", heads)
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".feed_forward_length", ffn)
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
}

// deciLayer adds layer i's tensors.
func (c *Config) deciLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, ff := uint64(c.Embd), uint64(c.FFN)
	k := c.Layout[i]
	if k != 'F' {
		add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	}
	switch k {
	case 'A', 'N':
		c.attnTensors(add, i)
	case 'L':
		add(p+"attn_output.weight", []uint64{e, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(e)))
	}
	if k == 'N' {
		return
	}
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
}

// deciParams is Params for deci.
func (s Shape) deciParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		k := s.Layout[i]
		if k != 'F' {
			n += e
		}
		switch k {
		case 'A', 'N':
			n += 2*e*q + 2*e*kv
		case 'L':
			n += e * e
		}
		if k != 'N' {
			n += e + 3*e*int64(s.FFN)
		}
	}
	return n
}
