package nn

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// SSMHead is one head's operands of a Mamba selective scan (ml.SSM's
// definition) over n tokens: x and out rows of the head's P values at
// stride XS, dt at stride DS, B and C rows of the head's group's N values
// at stride BS; A, D and DtBias the head's scalars; S the head's P × N
// state (row i holds S[i][·]). AS, when not nil, holds Mamba-1's N decays
// of the head's state columns, and A is not read.
type SSMHead struct {
	Out, X, Dt, B, C []float32
	XS, DS, BS       int
	N, P, T          int // state size, head size, tokens
	A, D, DtBias     float32
	AS               []float32
	S                []float32
}

func (h *SSMHead) check() {
	if h.T == 0 {
		return
	}
	check("scan x", len(h.X), (h.T-1)*h.XS+h.P)
	check("scan output", len(h.Out), (h.T-1)*h.XS+h.P)
	check("scan dt", len(h.Dt), (h.T-1)*h.DS+1)
	check("scan B", len(h.B), (h.T-1)*h.BS+h.N)
	check("scan C", len(h.C), (h.T-1)*h.BS+h.N)
	check("scan state", len(h.S), h.P*h.N)
	if h.AS != nil {
		check("scan decays", len(h.AS), h.N)
	}
	if h.XS < h.P || h.BS < h.N || h.DS < 1 {
		panic(fmt.Sprintf("nn: scan strides %d, %d, %d for head %d, state %d", h.XS, h.DS, h.BS, h.P, h.N))
	}
}

// Softplus is log(1 + e^x) in float64, x itself above 20 (as ggml).
func Softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// Softplus2 is log2(1 + 2^x) = Softplus(x·ln 2)/ln 2 in float64 (x itself
// past 20/ln 2, as ggml's threshold on x·ln 2 makes it).
func Softplus2(x float64) float64 { return Softplus(x*math.Ln2) / math.Ln2 }

// Softplus32 is ggml's float32 softplus: a for a > 20, else log(1 + e^a)
// rounded once.
func Softplus32(a float32) float32 {
	if a > 20 {
		return a
	}
	return float32(math.Log1p(math.Exp(float64(a))))
}

// SSMScan runs the scan in float32 (the fp32 mode's; SSMScanGGML is
// ggml's): per token d = softplus(dt + DtBias), dA = e^(d·A) and x·d
// rounded once each, each state element s·dA + B·(x·d) and the output's
// sum over the state in float32 in state order, then out = y + D·x, every
// product and sum rounded on its own. round, when not nil, rounds the state after each
// token (a narrower state dtype); it must round each element on its own,
// as it may be handed the state in another layout.
//
// With Mamba-1's decays per column (AS) each column's e^(d·AS[k]) is
// glibc's expf of the float32 product (LibcExpfs, within 0.502 ulp), and
// the rest is as above.
func SSMScan(h *SSMHead, round func([]float32)) {
	h.check()
	if k := kern.ssmF32; k != nil && h.AS == nil && h.P%16 == 0 && h.N > 0 && h.T > 0 {
		ssmScanLanes(h, round, k)
		return
	}
	N, P := h.N, h.P
	var ds, dAll []float32 // Mamba-1's d and decays of every token
	if h.AS != nil {
		buf := scanBufs.Get().(*[]float32)
		defer scanBufs.Put(buf)
		ds, dAll = columnDecays(h, Softplus32, buf)
	}
	for t := range h.T {
		var d, dA float32
		var dAs []float32 // the token's decays, a column each
		if h.AS != nil {
			d, dAs = ds[t], dAll[t*N:(t+1)*N]
		} else {
			d, dA = ssmDecay(h, t)
		}
		b, c := h.B[t*h.BS:t*h.BS+N], h.C[t*h.BS:t*h.BS+N]
		x, out := h.X[t*h.XS:t*h.XS+P], h.Out[t*h.XS:t*h.XS+P]
		for i, xv := range x {
			xd := xv * d
			s := h.S[i*N : (i+1)*N]
			var y float32
			for k, bv := range b {
				if dAs != nil {
					dA = dAs[k]
				}
				v := float32(s[k]*dA) + float32(bv*xd)
				s[k] = v
				y += float32(v * c[k])
			}
			out[i] = y + float32(h.D*xv)
		}
		if round != nil {
			round(h.S)
		}
	}
}

// columnDecays returns Mamba-1's d_t = softplus(dt_t + DtBias) of every
// token and its columns' decays e^(d_t·AS[k]) (at t·N + k) by glibc's expf
// (LibcExpfs: its vector kernels, one call for the window), in buf.
func columnDecays(h *SSMHead, softplus func(float32) float32, buf *[]float32) (ds, dAs []float32) {
	N := h.N
	if len(*buf) < h.T*(N+1) {
		*buf = make([]float32, h.T*(N+1))
	}
	ds, dAs = (*buf)[:h.T], (*buf)[h.T:h.T*(N+1)]
	for t := range h.T {
		d := softplus(h.Dt[t*h.DS] + h.DtBias)
		ds[t] = d
		for k, a := range h.AS {
			dAs[t*N+k] = d * a
		}
	}
	LibcExpfs(dAs, dAs)
	return ds, dAs
}

// ssmDecay is SSMScan's d = softplus(dt + DtBias) and dA = e^(d·A) for
// token t (dA 0 with Mamba-1's decays per column).
func ssmDecay(h *SSMHead, t int) (d, dA float32) {
	d = Softplus32(h.Dt[t*h.DS] + h.DtBias)
	if h.AS != nil {
		return d, 0
	}
	return d, float32(math.Exp(float64(d * h.A)))
}

// scanBufs holds ssmScanLanes's buffers.
var scanBufs = sync.Pool{New: func() any { return new([]float32) }}

// ssmScanLanes is SSMScan with the state transposed (N × P, state row k
// holding element k of every head row), so that k, the kernel of
// ssmRowsF32Generic, runs the head's rows in vector lanes: the same
// operations in the same order per row.
func ssmScanLanes(h *SSMHead, round func([]float32), k func(s *float32, p int, b, c *float32, n int, xd *float32, dA float32, y *float32)) {
	N, P := h.N, h.P
	buf := scanBufs.Get().(*[]float32)
	defer scanBufs.Put(buf)
	if len(*buf) < N*P+2*P {
		*buf = make([]float32, N*P+2*P)
	}
	st, xd, y := (*buf)[:N*P], (*buf)[N*P:N*P+P], (*buf)[N*P+P:N*P+2*P]
	transposeF32(st, h.S[:P*N], P, N)
	for t := range h.T {
		d, dA := ssmDecay(h, t)
		b, c := h.B[t*h.BS:t*h.BS+N], h.C[t*h.BS:t*h.BS+N]
		x, out := h.X[t*h.XS:t*h.XS+P], h.Out[t*h.XS:t*h.XS+P]
		for i, xv := range x {
			xd[i] = xv * d
		}
		k(&st[0], P, &b[0], &c[0], N, &xd[0], dA, &y[0])
		for i, xv := range x {
			out[i] = y[i] + float32(h.D*xv)
		}
		if round != nil {
			round(st)
		}
	}
	transposeF32(h.S[:P*N], st, N, P)
}

// ssmRowsF32Generic runs one token of SSMScan on a transposed state s (n
// × p: s[k·p + i] is row i's element k): for each row i, each element v =
// s·dA + b[k]·xd[i] stored back, and y[i] the sum of v·c[k] in k order,
// each product and sum rounded.
func ssmRowsF32Generic(s []float32, p int, b, c, xd []float32, dA float32, y []float32) {
	clear(y[:p])
	for k, bv := range b {
		row := s[k*p : (k+1)*p]
		for i, sv := range row {
			v := float32(sv*dA) + float32(bv*xd[i])
			row[i] = v
			y[i] += float32(v * c[k])
		}
	}
}

// transposeF32 writes src (rows × cols) to dst transposed (cols × rows),
// with kern.transpose16's tiles where it has them.
func transposeF32(dst, src []float32, rows, cols int) {
	check("transpose dst", len(dst), rows*cols)
	check("transpose src", len(src), rows*cols)
	r0, c0 := 0, 0
	if t := kern.transpose16; t != nil && rows >= 16 && cols >= 16 {
		d := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst))
		s := unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), len(src))
		r0, c0 = rows&^15, cols&^15
		for r := 0; r < r0; r += 16 {
			t(&d[r], rows, &s[r*cols], cols, c0/16)
		}
	}
	for r := range rows {
		cs := c0
		if r >= r0 {
			cs = 0
		}
		for c := cs; c < cols; c++ {
			dst[c*rows+r] = src[r*cols+c]
		}
	}
}

// ggmlLanes are ggml-cpu's float32 vector shape: lanes of a vector (EPR)
// and vectors of a step (ARR), AVX-512's or AVX2's.
func ggmlLanes(avx2 bool) (epr, arr int) {
	if avx2 {
		return 8, 4
	}
	return 16, 4
}

// SSMScanGGML is SSM_SCAN (Mamba-2's scalar decay per head) as ggml-cpu
// rounds it, with dt's bias added first (ADD): d = logf(1 + expf(dt)) for
// dt ≤ 20 (glibc's logf and expf: LibcLogf, LibcExpf), dA = expf(d·A), xd
// = x·d, each state element fma(s, dA, B·xd); the output's sum over the
// state FMA-accumulated per lane in steps of ARR vectors of EPR lanes
// (ggmlLanes) as long as they fill the state, then folded as
// GGML_F32_VEC_REDUCE, and the rest of the state added one element at a
// time, sum = fma(state, C, sum); out = y + D·x (MUL, ADD). Checked bit
// for bit against llama.cpp 0.7.0's tensors on states of 16, 80 and 128.
// Mamba-1's decays per column (AS) take ggml's scalar loop in both builds
// (ssmScanGGMLColumns). round as SSMScan's.
func SSMScanGGML(h *SSMHead, avx2 bool, round func([]float32)) {
	h.check()
	if h.AS != nil {
		ssmScanGGMLColumns(h, round)
		return
	}
	N, P := h.N, h.P
	epr, arr := ggmlLanes(avx2)
	np := N &^ (epr*arr - 1)
	y := make([]float32, P)
	for t := range h.T {
		d := ggmlSoftplus(h.Dt[t*h.DS] + h.DtBias)
		dA := LibcExpf(d * h.A)
		b, c := h.B[t*h.BS:t*h.BS+N], h.C[t*h.BS:t*h.BS+N]
		x, out := h.X[t*h.XS:t*h.XS+P], h.Out[t*h.XS:t*h.XS+P]
		ssmRowsGGML(h.S, N, b, c, x, np, dA, d, y, avx2)
		for i, xv := range x {
			xd := xv * d
			s := h.S[i*N : (i+1)*N]
			yi := y[i]
			for k := np; k < N; k++ {
				v := fma32(s[k], dA, float32(b[k]*xd))
				s[k] = v
				yi = fma32(v, c[k], yi)
			}
			out[i] = yi + float32(h.D*xv)
		}
		if round != nil {
			round(h.S)
		}
	}
}

// ssmScanGGMLColumns is SSM_SCAN's Mamba-1 branch as ggml-cpu rounds it
// (no vector lanes): d as SSMScanGGML's, then for each row xd = x·d and
// each column in order v = fma(s, expf(d·AS[k]), B·xd), sum = fma(v, C,
// sum); out = sum + D·x. Checked bit for bit against libggml 0.27.0's
// zen4 and haswell builds (TestGGMLMamba2).
func ssmScanGGMLColumns(h *SSMHead, round func([]float32)) {
	N, P := h.N, h.P
	buf := scanBufs.Get().(*[]float32)
	defer scanBufs.Put(buf)
	ds, dAll := columnDecays(h, ggmlSoftplus, buf)
	for t := range h.T {
		d, dAs := ds[t], dAll[t*N:(t+1)*N]
		b, c := h.B[t*h.BS:t*h.BS+N], h.C[t*h.BS:t*h.BS+N]
		x, out := h.X[t*h.XS:t*h.XS+P], h.Out[t*h.XS:t*h.XS+P]
		for i, xv := range x {
			xd := xv * d
			s := h.S[i*N : (i+1)*N]
			var y float32
			for k, bv := range b {
				v := fma32(s[k], dAs[k], float32(bv*xd))
				s[k] = v
				y = fma32(v, c[k], y)
			}
			out[i] = y + float32(h.D*xv)
		}
		if round != nil {
			round(h.S)
		}
	}
}

// ssmRowsGGML is SSMScanGGML's vector part of one token (see
// ssmRowsGGMLGeneric), with the kernels of the level in use.
func ssmRowsGGML(s []float32, n int, b, c, x []float32, np int, dA, d float32, y []float32, avx2 bool) {
	k, step := kern.ssmGGML, 64
	if avx2 {
		k, step = kern.ssmGGML8, 32
	}
	rows := len(x)
	if k == nil || np == 0 || rows == 0 {
		ssmRowsGGMLGeneric(s, n, b, c, x, np, dA, d, y, avx2)
		return
	}
	if np%step != 0 || np > n || len(b) < np || len(c) < np || len(y) < rows || len(s) < (rows-1)*n+np {
		panic(fmt.Sprintf("nn: scan rows of %d of %d over %d rows, b %d, c %d, y %d, state %d", np, n, rows, len(b), len(c), len(y), len(s)))
	}
	k(&s[0], n, &b[0], &c[0], &x[0], rows, np, dA, d, &y[0])
}

// ssmRowsGGMLGeneric runs the first np elements (a whole number of ggml's
// vector steps, ggmlLanes) of state rows i < len(x) (s[i·n:]) through one
// token: xd = x[i]·d, each element v = fma(s, dA, float32(b·xd)) stored
// back, and FMA-accumulated as v·c per lane (lane k mod step); y[i] is the
// lanes folded (ggmlReduce), 0 when np is 0.
func ssmRowsGGMLGeneric(s []float32, n int, b, c, x []float32, np int, dA, d float32, y []float32, avx2 bool) {
	epr, arr := ggmlLanes(avx2)
	step := epr * arr
	var lanes [64]float32
	acc := lanes[:step]
	for i, xv := range x {
		y[i] = 0
		if np == 0 {
			continue
		}
		xd := xv * d
		s := s[i*n : i*n+np]
		clear(acc)
		for k0 := 0; k0 < np; k0 += step {
			for l := range step {
				k := k0 + l
				v := fma32(s[k], dA, float32(b[k]*xd))
				s[k] = v
				acc[l] = fma32(v, c[k], acc[l])
			}
		}
		y[i] = ggmlReduce(acc, epr, arr, avx2)
	}
}

// ggmlReduce is GGML_F32_VEC_REDUCE of arr vectors of epr lanes (vector j
// holding acc[j·epr:]): the vectors added pairwise by halves, then the
// lanes of the first as _mm512_reduce_add_ps (reduce16) or, on AVX2, as
// the 128-bit halves added and two horizontal adds.
func ggmlReduce(acc []float32, epr, arr int, avx2 bool) float32 {
	for off := arr / 2; off > 0; off /= 2 {
		for j := range off {
			for l := range epr {
				acc[j*epr+l] += acc[(j+off)*epr+l]
			}
		}
	}
	if !avx2 {
		return reduce16((*[16]float32)(acc[:16]))
	}
	var t [4]float32
	for l := range 4 {
		t[l] = acc[l] + acc[l+4]
	}
	return (t[0] + t[1]) + (t[2] + t[3])
}

// SSMScanRef is SSMScan in float64, each output rounded once and the state
// rounded to float32 (then by round, when not nil) after the last token
// only, or after each token when round is not nil: the reference.
func SSMScanRef(h *SSMHead, round func([]float32)) {
	h.check()
	N, P := h.N, h.P
	s := make([]float64, P*N)
	for i, v := range h.S[:P*N] {
		s[i] = float64(v)
	}
	sync := func() {
		for i, v := range s {
			h.S[i] = float32(v)
		}
	}
	for t := range h.T {
		d := Softplus(float64(h.Dt[t*h.DS]) + float64(h.DtBias))
		dA := math.Exp(d * float64(h.A))
		b, c := h.B[t*h.BS:t*h.BS+N], h.C[t*h.BS:t*h.BS+N]
		x, out := h.X[t*h.XS:t*h.XS+P], h.Out[t*h.XS:t*h.XS+P]
		for i, xv := range x {
			xd := float64(xv) * d
			row := s[i*N : (i+1)*N]
			var y float64
			for k, bv := range b {
				if h.AS != nil {
					dA = math.Exp(d * float64(h.AS[k]))
				}
				row[k] = float64(row[k]*dA) + float64(float64(bv)*xd)
				y += float64(row[k] * float64(c[k]))
			}
			out[i] = float32(y + float64(float64(h.D)*float64(xv)))
		}
		if round != nil {
			sync()
			round(h.S[:P*N])
			for i, v := range h.S[:P*N] {
				s[i] = float64(v)
			}
		}
	}
	sync()
}

// GatedGroupNorm is Mamba-2's output norm, the gate first: u = x ⊙ silu(z)
// in float32 (swiglu32), then each run of group values of u RMS-normed and
// multiplied by w (rows × len(w) values; w's length a multiple of group)
// as RMSNorm's rmsRow (float64 rounded once): within 6 ulp of
// GatedGroupNormRef. With Context.LlamaCPP it is llama.cpp's float32
// sequence (ggmlSwiGLURow, ggmlRMSRow). w nil: the gate alone, no norm
// (Falcon-H1's files without ssm_norm). out may be x.
func GatedGroupNorm(c *Context, out, x, z, w []float32, rows, group int, eps float64) {
	d := checkGroupNorm(out, x, z, w, rows, group)
	c.Parallel(rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			o := out[r*d : (r+1)*d]
			if c.LlamaCPP { // SWIGLU, then RMS_NORM and MUL per group
				ggmlSwiGLURow(o, z[r*d:(r+1)*d], x[r*d:(r+1)*d], c.GGMLAVX2)
				for g := 0; g < d && w != nil; g += group {
					ggmlRMSRow(o[g:g+group], o[g:g+group], w[g:g+group], float32(eps))
				}
				continue
			}
			swiglu32(o, z[r*d:(r+1)*d], x[r*d:(r+1)*d])
			for g := 0; g < d && w != nil; g += group {
				rmsRow(o[g:g+group], o[g:g+group], w[g:g+group], eps)
			}
		}
	})
}

// GatedGroupNormRef is GatedGroupNorm in float64 from u rounded to float32,
// each output rounded once: the reference.
func GatedGroupNormRef(out, x, z, w []float32, rows, group int, eps float64) {
	d := checkGroupNorm(out, x, z, w, rows, group)
	if w == nil {
		group = d
	}
	u := make([]float64, group)
	for r := range rows {
		for g := 0; g < d; g += group {
			var ss float64
			for i := range group {
				c := r*d + g + i
				zz := float64(z[c])
				u[i] = float64(float32(zz / (1 + math.Exp(-zz)) * float64(x[c])))
				ss += float64(u[i] * u[i])
			}
			if w == nil {
				for i := range group {
					out[r*d+g+i] = float32(u[i])
				}
				continue
			}
			scale := 1 / math.Sqrt(ss/float64(group)+eps)
			for i := range group {
				out[r*d+g+i] = float32(u[i] * scale * float64(w[g+i]))
			}
		}
	}
}

// checkGroupNorm checks the shapes and returns the row length: w's, or
// len(x)/rows without a norm.
func checkGroupNorm(out, x, z, w []float32, rows, group int) int {
	d := len(w)
	if w == nil && rows > 0 {
		d = len(x) / rows
	} else if group <= 0 || d%group != 0 {
		panic(fmt.Sprintf("nn: group norm of groups of %d over rows of %d", group, d))
	}
	check("group norm input", len(x), rows*d)
	check("group norm gate", len(z), rows*d)
	check("group norm output", len(out), rows*d)
	return d
}
