package cuda

import (
	"fmt"
	"math"

	"ppl.dev/kernels"
	"ppl.dev/score/ml"
)

// The GPU's ml.Latent: multi-head latent attention (deepseek2). Columns is
// a copy kernel (kernels/latent.cu); HeadLinear one batched cuBLAS
// product of every head over strided views of the input and output (the
// input converted to the matrix's half type once; a stack kept quantized
// dequantized into the operand first, stackWeights); LatentAttention
// stores the keys once in the key cache's format, whose values are the
// first valueDim elements of the keys as read back, as the CPU backend
// (cpu_mla.go) does. DeepSeek's shape (keys of 576, kv_lora 512 + rope
// 64; values 512) runs on the tensor cores (attn_fl576 of
// kernels/attention.cu, checked against attn_latent at its first use as
// the other flash kernels are; in the int8 mode attn_flx576, float32
// output); other shapes, up to 640 (the oracle model's 40), run
// attn_latent, on the CUDA cores, one block per (query, head): plainly
// right, slow at long windows. With a.Keys (DSA past its top_k) each
// reads only the chosen keys (sparse.go).

var _ ml.Latent = (*gpuBackend)(nil)

func init() {
	kernelModules["latent"] = []string{"copy_cols", "attn_latent"}
}

func (b *gpuBackend) Columns(dst ml.Tensor, dc int, x ml.Tensor, xc, width int) {
	d, s := g(dst), g(x)
	if d.rows != s.rows || dc < 0 || xc < 0 || width < 0 || dc+width > d.cols || xc+width > s.cols {
		panic(fmt.Sprintf("cuda backend: columns [%d, %d) of %d×%d into [%d, %d) of %d×%d",
			xc, xc+width, s.rows, s.cols, dc, dc+width, d.rows, d.cols))
	}
	if width == 0 || d.rows == 0 {
		return
	}
	b.do("column copy", func() error {
		return b.e.copyCols(d.p, d.cols, dc, s.p, s.cols, xc, width, d.rows)
	})
}

// copyCols: dst[r, dc+i] = x[r, xc+i], rows of dcols and xcols values.
func (e *Engine) copyCols(dst ptr, dcols, dc int, x ptr, xcols, xc, width, rows int) error {
	return e.launch("copy_cols", gridFor(int64(rows)*int64(width)), block256, dst, dcols, dc, x, xcols, xc, width, rows)
}

func (b *gpuBackend) HeadLinear(dst, x ml.Tensor, w *ml.Matrix) {
	d, s := g(dst), g(x)
	heads, in, out := max(w.Experts, 1), w.In, w.Out
	n := s.rows
	gshape(w.Name+" input", s, n, heads*in)
	gshape(w.Name+" output", d, n, heads*out)
	if n == 0 {
		return
	}
	b.do("head product "+w.Name, func() error {
		m := gm(w)
		if m.bias != 0 {
			return fmt.Errorf("%s: a per-head product with a bias is not supported", w.Name)
		}
		mark := b.Mark()
		defer b.Release(mark)
		if f, ok := b.int8Format(w); ok {
			// The int8 mode: each head's columns quantized on their own
			// (the blocks a row's quantization would give, whole blocks
			// as in is) and multiplied by the head's rows.
			for h := range heads {
				a, err := b.quantActs(s.p+ptr(4*int64(h)*int64(in)), heads*in, n, in, f.ActBlock)
				if err == nil {
					err = b.i8product(d.p+ptr(4*int64(h)*int64(out)), heads*out, a, 0, n, w, h)
				}
				if err != nil {
					return fmt.Errorf("%s head %d: %w", w.Name, h, err)
				}
			}
			return nil
		}
		xh, err := b.halfInput(s, m.t)
		if err != nil {
			return err
		}
		// The heads' products as one batched GEMM, as many heads at a time
		// as slabBytes holds dequantized (a quantized stack).
		eb, per := elemBytes(m.t), int64(out)*int64(in)
		most := int(max(1, slabBytes/halfBytes(per)))
		for h0 := 0; h0 < heads; h0 += most {
			h1 := min(heads, h0+most)
			wt, err := b.stackWeights(w, h0, h1)
			if err != nil {
				return err
			}
			bt := batch{rows: n}
			for h := h0; h < h1; h++ {
				bt.w = append(bt.w, wt+ptr(eb*int64(h-h0)*per))
				bt.x = append(bt.x, xh+ptr(eb*int64(h)*int64(in)))
				bt.y = append(bt.y, d.p+ptr(4*int64(h)*int64(out)))
			}
			if err := b.gemmBatches(w, heads*in, heads*out, []batch{bt}); err != nil {
				return fmt.Errorf("%s heads %d to %d: %w", w.Name, h0, h1-1, err)
			}
		}
		return nil
	})
}

// latentMaxDim is the widest key attn_latent takes (LAT_MAXD).
const latentMaxDim = 640

// latentFlash are the latent attention shapes, {key size, value size},
// with a tensor-core kernel (attn_flHD): DeepSeek's MLA, a latent of 512
// and a RoPE part of 64.
var latentFlash = map[[2]int]bool{{576, 512}: true}

func (b *gpuBackend) LatentAttention(dst, q, k ml.Tensor, layer int, a *ml.Attn, valueDim int) {
	o, qq, kk := g(dst), g(q), g(k)
	n, hd, vd := qq.rows, a.HeadDim, valueDim
	if vd <= 0 || vd > hd {
		panic(fmt.Sprintf("cuda backend: latent attention values of %d of %d key elements", vd, hd))
	}
	gshape("latent attention q", qq, n, a.Heads*hd)
	gshape("latent attention k", kk, n, a.KVHeads*hd)
	gshape("latent attention output", o, n, a.Heads*vd)
	if a.Heads%a.KVHeads != 0 {
		panic(fmt.Sprintf("cuda backend: latent attention with %d heads, %d KV heads", a.Heads, a.KVHeads))
	}
	if b.err != nil || n == 0 {
		return
	}
	if hd > latentMaxDim {
		b.Fail(fmt.Errorf("cuda: latent attention with keys of %d: at most %d", hd, latentMaxDim))
		return
	}
	if kernels.KVRotated(b.kvK) {
		// Its values would be the rotated keys: attn_latent does not rotate back.
		b.Fail(fmt.Errorf("cuda: latent attention cannot read a rotated key cache (%s); use another --kv-dtype", kernels.KVFormats[b.kvK]))
		return
	}
	// The fp32 mode takes the tensor-core kernel where its check passed
	// (fp16 operands, half output); the int8 mode float32 output (the next
	// product quantizes it, as the CPU's int8 mode does ggml's float32
	// attention), on attn_flx576 where fp16 halves hold the cache's keys
	// exactly, else attn_latent.
	flash := halvesExact(b.kvK)
	if !b.prec.Int8 {
		flash = b.flashChecked(attnShape{a.Heads, a.KVHeads, hd, vd})
	}
	mask := attnMask{window: a.Window, sinks: perHead("attention sinks", a.Sinks, a.Heads)}
	t := b.prec.Weights // the value product's input type
	b.do(fmt.Sprintf("layer %d latent attention", layer), func() error {
		e := b.e
		groups := (int64(n) + capacityRound - 1) / capacityRound * capacityRound * int64(a.KVHeads)
		c, err := b.kvFor(hd, groups, false)
		if err != nil {
			return err
		}
		if err := e.kvStore(c.k, kk.p, n, a.KVHeads, hd); err != nil {
			return err
		}
		mark := b.Mark()
		defer b.Release(mark)
		if a.Keys != nil {
			if mask.keys, mask.kgroups, err = b.keySet(a, n); err != nil {
				return err
			}
		}
		if b.prec.Int8 {
			return e.latentAttention(o.p, qq.p, n, a.Heads, a.KVHeads, hd, vd, a.Scale, mask, c.k, flash, otypeF32)
		}
		h, err := b.scratchBytes(halfBytes(o.count()))
		if err != nil {
			return err
		}
		if err := e.latentAttention(h, qq.p, n, a.Heads, a.KVHeads, hd, vd, a.Scale, mask, c.k, flash, isF16(t)); err != nil {
			return err
		}
		return e.widenHalf(o.p, h, o.count(), t)
	})
}

// latentAttention: out (n, heads·vd) of otype <- attention of q (n,
// heads, hd) f32 over the keys of the cache tensor k (n, kvheads, hd), each
// key's first vd elements its value, with m: with flash, for a shape of
// latentFlash, attn_flHD (a half type) or attn_flxHD (float32), else
// attn_latent.
func (e *Engine) latentAttention(out, q ptr, n, heads, kvheads, hd, vd int, scale float64, m attnMask, k *kvTensor, flash bool, otype int) error {
	if m.slopes != 0 {
		return fmt.Errorf("cuda: latent attention with ALiBi slopes not supported")
	}
	if flash && latentFlash[[2]int{hd, vd}] {
		name, args := fmt.Sprintf("attn_fl%d", hd), []any{out, q, n, heads, kvheads, float32(scale * math.Log2E), m.window, m.sinks,
			k.format, k.data.p, k.scales.p, k.tscale()}
		if otype == otypeF32 {
			name = fmt.Sprintf("attn_flx%d", hd)
		} else {
			args = append(args, otype)
		}
		return e.launch(name, flashGrid(n, heads, vd), dim3{128, 1, 1}, append(args, m.keys, m.kgroups)...)
	}
	return e.launch("attn_latent", dim3{uint32(n), uint32(heads), 1}, dim3{128, 1, 1},
		out, q, n, heads, kvheads, hd, vd, float32(scale), m.window, m.sinks,
		k.format, k.data.p, k.scales.p, k.tscale(), otype, m.keys, m.kgroups)
}
