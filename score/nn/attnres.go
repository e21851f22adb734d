package nn

import "math"

// Kimi K3's cross-layer residual attention (llama.cpp's res_mix): before
// each block, the residual row the block reads is not the running sum
// alone but a softmax-weighted sum of the checkpoints the model banked
// (the inputs of every attn_res.block_size-th layer) and the running sum,
// each scored by w·rmsnorm(row).

// ResMix sets out to the residual attention of one token's rows: with
// s_c = Σ_e rmsnorm(ckpts[c])_e·w_e and s_cur likewise for cur, p =
// softmax(s_0, …, s_cur), out = Σ_c p_c·ckpts[c] + p_cur·cur. In float64,
// each output rounded to float32 once. out may alias cur.
func ResMix(out []float32, ckpts [][]float32, cur, w []float32, eps float64) {
	check("ResMix cur", len(cur), len(out))
	s := make([]float64, len(ckpts)+1)
	score := func(x []float32) float64 {
		check("ResMix checkpoint", len(x), len(w))
		var ss, d float64
		for _, v := range x {
			ss += float64(float64(v) * float64(v))
		}
		scale := 1 / math.Sqrt(ss/float64(len(x))+eps)
		for i, v := range x {
			d += float64(float64(v) * scale * float64(w[i]))
		}
		return d
	}
	for c, x := range ckpts {
		s[c] = score(x)
	}
	s[len(ckpts)] = score(cur)
	m := math.Inf(-1)
	for _, v := range s {
		m = math.Max(m, v)
	}
	var sum float64
	for i, v := range s {
		s[i] = math.Exp(v - m)
		sum += s[i]
	}
	for e := range out {
		acc := s[len(ckpts)] * float64(cur[e])
		for c, x := range ckpts {
			acc += float64(s[c] * float64(x[e]))
		}
		out[e] = float32(acc / sum)
	}
}

// GGMLResMix is ResMix as llama.cpp's graph computes it in float32 (tmp
// scratch of len(w)): each score RMS_NORM, MUL by w, SUM_ROWS (a float64
// sum rounded to float32); SOFT_MAX over the checkpoints' scores and
// cur's (GGMLSoftMax, avx2 its AVX2 build's); the checkpoints' sum
// DSV4_HC_PRE's, Σ_c ckpts[c]·p_c from 0 in order of c, each product and
// sum rounded (not fused: probed in both builds); then MUL of cur by p_cur
// and ADD, each rounded. out may alias cur.
func GGMLResMix(out []float32, ckpts [][]float32, cur, w, tmp []float32, eps float32, avx2 bool) {
	check("GGMLResMix cur", len(cur), len(out))
	p := make([]float32, len(ckpts)+1)
	score := func(x []float32) float32 {
		check("GGMLResMix checkpoint", len(x), len(w))
		ggmlRMSRow(tmp, x, w, eps)
		var d float64
		for _, v := range tmp {
			d += float64(v)
		}
		return float32(d)
	}
	for c, x := range ckpts {
		p[c] = score(x)
	}
	p[len(ckpts)] = score(cur)
	GGMLSoftMax(p, p, avx2)
	pc := p[len(ckpts)]
	for e := range out {
		var acc float32
		for c, x := range ckpts {
			acc += float32(x[e] * p[c]) // the conversion keeps Go from fusing
		}
		out[e] = acc + float32(cur[e]*pc) // the conversion keeps Go from fusing
	}
}
