package nn

import "math"

// QSABlocks is the key selection of Qwen3.8's sparse attention (QSA:
// qwen4exp) and of GLM5-Next's k-pool indexer, as llama.cpp 0.7.0 runs
// them. The keys are grouped in blocks of block in window order, and block
// b is scored by one pooled key, p[b·block] (p (n, dim): qwen4exp's mean
// key of rows [r, r+block) at row r, normed and turned by RoPE to r;
// GLM5-Next's gated pool, GatedPool; as the caller made it; other rows are
// not read). Row i scores each whole block b ((b+1)·block <= i+1) by
//
//	s_b = Σ_h max(q[i,h]·p[b·block], 0) · w[i,h]
//
// (q (n, heads·dim); w (n, heads) the heads' weights, or nil for
// 1/sqrt(dim) each) and reads the keys of the topK/block blocks that score
// highest, among equal scores those ggml's TOP_K keeps (TopKeys), and the
// keys of its own unfinished block, [block·((i+1)/block), i]. A row of at
// most topK/block whole blocks reads every key j <= i.
//
// With ggml the sums are llama.cpp's LIGHTNING_INDEXER's: the products
// ggml_vec_dot_f32's (the AVX2 build's lane order with c.GGMLAVX2), each
// head's term max(q·p, 0)·w fused into the float32 sum in head order (its
// compiler contracts the statement to an FMA); otherwise float64 sums
// rounded once.
func QSABlocks(c *Context, q, p, w []float32, n, heads, dim, block, topK int, ggml bool) *KeySet {
	check("QSA indexer q", len(q), n*heads*dim)
	check("QSA pooled keys", len(p), n*dim)
	if w != nil {
		check("QSA head weights", len(w), n*heads)
	}
	if block <= 1 || topK < block || topK%block != 0 {
		panic("nn: QSA blocks of a size that does not divide its budget")
	}
	set := NewKeySet(n)
	top := topK / block
	inv := 1 / float32(math.Sqrt(float64(dim)))
	weight := func(i, h int) float32 {
		if w == nil {
			return inv
		}
		return w[i*heads+h]
	}
	c.ParallelDynamic(n, 16, func(_, lo, hi int) { // a row's work grows with it
		score := make([]float32, n/block+1)
		order := make([]int32, n/block+1)
		for i := lo; i < hi; i++ {
			whole := (i + 1) / block
			if whole <= top {
				set.AddKeys(0, i, 0, i+1)
				continue
			}
			for b := range whole {
				k := p[b*block*dim : (b*block+1)*dim]
				if ggml {
					var s float32
					for h := range heads {
						qk := dotF32(q[(i*heads+h)*dim:(i*heads+h+1)*dim], k, c.GGMLAVX2)
						s = fma32(max(qk, 0), weight(i, h), s)
					}
					score[b] = s
					continue
				}
				var s float64
				for h := range heads {
					var qk float64
					for d, x := range q[(i*heads+h)*dim : (i*heads+h+1)*dim] {
						qk += float64(float64(x) * float64(k[d]))
					}
					if w == nil {
						s += max(qk, 0)
					} else {
						s += float64(max(qk, 0) * float64(w[i*heads+h]))
					}
				}
				if w == nil {
					s /= math.Sqrt(float64(dim))
				}
				score[b] = float32(s)
			}
			for _, b := range TopKeys(score[:whole], order[:whole], top) {
				set.AddKeys(0, i, int(b)*block, (int(b)+1)*block)
			}
			set.AddKeys(0, i, whole*block, i+1)
		}
	})
	return set
}

// QSAPool sets row r of dst (n, dim) to the mean of k's rows [r, r+block)
// as llama.cpp pools them: summed in float32 in row order, then times
// 1/block in float32; rows past n-block are zero.
func QSAPool(dst, k []float32, n, dim, block int) {
	check("QSA pool", len(dst), n*dim)
	check("QSA pool keys", len(k), n*dim)
	inv := 1 / float32(block)
	clear(dst[max(0, n-block+1)*dim:])
	for r := 0; r+block <= n; r++ {
		out := dst[r*dim : (r+1)*dim]
		copy(out, k[r*dim:(r+1)*dim])
		for m := r + 1; m < r+block; m++ {
			for d, x := range k[m*dim : (m+1)*dim] {
				out[d] += x
			}
		}
		for d := range out {
			out[d] *= inv
		}
	}
}

// GatedPool sets row b·block of dst (n, dim) to GLM5-Next's pooled key of
// block b, the keys k (n, dim) of rows [b·block, (b+1)·block) weighted per
// channel d by softmax_j(g[b·block+j, d] + ape[j·dim + d]) (g the gates,
// ape (block, dim) the position's bias), for every whole block; the other
// rows are zero. With ggml as llama.cpp computes it (gatedSum); otherwise
// in float64, rounded once. DeepSeek-V4's compressor of 128 tokens is the
// same pool.
func GatedPool(dst, k, g, ape []float32, n, dim, block int, ggml, avx2 bool) {
	check("gated pool", len(dst), n*dim)
	check("gated pool keys", len(k), n*dim)
	check("gated pool gates", len(g), n*dim)
	check("gated pool positions", len(ape), block*dim)
	clear(dst)
	p := newPoolScratch(block)
	for r := 0; r+block <= n; r += block {
		for d := range dim {
			for j := range block {
				p.g[j], p.a[j], p.k[j] = g[(r+j)*dim+d], ape[j*dim+d], k[(r+j)*dim+d]
			}
			dst[r*dim+d] = p.sum(ggml, avx2)
		}
	}
}

// OverlapPool sets row b·block of dst (n, dim) to DeepSeek-V4's
// overlapping compressed key of block b: per channel d, the softmax-
// weighted sum of 2·block entries, first the previous block's rows with
// the first dim channels of k and g (n, 2·dim), then block b's own rows
// with their last dim channels, each gate plus its position's bias (ape
// (block, 2·dim), the same halves); block 0's previous entries are absent
// (llama.cpp's sentinel row: value 0, gate -Inf). Every whole block; the
// other rows are zero. Arithmetic as GatedPool's.
func OverlapPool(dst, k, g, ape []float32, n, dim, block int, ggml, avx2 bool) {
	check("overlap pool", len(dst), n*dim)
	check("overlap pool keys", len(k), n*2*dim)
	check("overlap pool gates", len(g), n*2*dim)
	check("overlap pool positions", len(ape), block*2*dim)
	clear(dst)
	p := newPoolScratch(2 * block)
	w := 2 * dim
	for r := 0; r+block <= n; r += block {
		for d := range dim {
			for j := range block {
				if r == 0 {
					p.g[j], p.a[j], p.k[j] = float32(math.Inf(-1)), 0, 0
				} else {
					p.g[j], p.a[j], p.k[j] = g[(r-block+j)*w+d], ape[j*w+d], k[(r-block+j)*w+d]
				}
				p.g[block+j], p.a[block+j], p.k[block+j] = g[(r+j)*w+dim+d], ape[j*w+dim+d], k[(r+j)*w+dim+d]
			}
			dst[r*dim+d] = p.sum(ggml, avx2)
		}
	}
}

// poolScratch holds one channel's entries of a gated pool: gates g, their
// biases a, values k.
type poolScratch struct {
	g, a, k, logit []float32
	e              []float64
}

func newPoolScratch(n int) *poolScratch {
	return &poolScratch{g: make([]float32, n), a: make([]float32, n), k: make([]float32, n), logit: make([]float32, n), e: make([]float64, n)}
}

// sum is Σ_j softmax_j(g + a)·k over the entries. With ggml as llama.cpp
// computes it: the logits' sums in float32, ggml's SOFT_MAX
// (GGMLSoftMax, the AVX2 build's lanes with avx2), the products rounded
// to float32 and summed in float64 (ggml_vec_sum_f32), the sum rounded
// once; otherwise in float64, rounded once.
func (p *poolScratch) sum(ggml, avx2 bool) float32 {
	if ggml {
		for j := range p.logit {
			p.logit[j] = p.g[j] + p.a[j]
		}
		GGMLSoftMax(p.logit, p.logit, avx2)
		var s float64
		for j, pj := range p.logit {
			s += float64(pj * p.k[j])
		}
		return float32(s)
	}
	m := math.Inf(-1)
	for j := range p.e {
		p.e[j] = float64(p.g[j]) + float64(p.a[j])
		m = max(m, p.e[j])
	}
	var z, s float64
	for j := range p.e {
		p.e[j] = math.Exp(p.e[j] - m)
		z += p.e[j]
		s += float64(p.e[j] * float64(p.k[j]))
	}
	return float32(s / z)
}
