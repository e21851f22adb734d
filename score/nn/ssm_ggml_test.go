package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// mamba2Inputs are TestGGMLMamba2's inputs: a convolution's input (40
// tokens of 300 channels, past the last lane of 16), its 4 taps and bias;
// and per state size a scan's 50 tokens of 4 heads of 8 in 2 groups, with
// dt spanning softplus's threshold of 20 and far below 0.
type mamba2Inputs struct {
	convX, convW, convB []float32
	scanX, scanDt       []float32
	scanB, scanC        [3][]float32 // per state size of scanStates
	scanW               []float32    // A, D and dt's bias, 4 each
}

const convN, convC, convK = 40, 300, 4
const scanN, scanH, scanP, scanG = 50, 4, 8, 2

// scanStates are the state sizes: ggml's element loop alone (16), one
// vector step and the element loop (80), two vector steps (128).
var scanStates = [3]int{16, 80, 128}

func newMamba2Inputs() *mamba2Inputs {
	r := rand.New(rand.NewSource(11))
	v := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
		}
		return x
	}
	in := &mamba2Inputs{convX: v(convN*convC, 1), convW: v(convC*convK, 0.6), convB: v(convC, 0.1)}
	in.scanX, in.scanDt = v(scanN*scanH*scanP, 1), v(scanN*scanH, 3)
	for i := range in.scanDt {
		switch i % 23 {
		case 0:
			in.scanDt[i] = 21 + float32(i%5) // past the threshold
		case 1:
			in.scanDt[i] = -40
		}
	}
	for j, N := range scanStates {
		in.scanB[j], in.scanC[j] = v(scanN*scanG*N, 1), v(scanN*scanG*N, 1)
	}
	in.scanW = []float32{-0.5, -2, -7, -16, 1, 0.5, -0.25, 2, 0.3, -3, 0, -5}
	return in
}

// ggmlScanAll runs SSMScanGGML over every head of the inputs for state
// size j: the outputs (tokens, heads·P), then the final state.
func (in *mamba2Inputs) ggmlScanAll(j int, avx2 bool) []float32 {
	N := scanStates[j]
	out := make([]float32, scanN*scanH*scanP)
	state := make([]float32, scanH*scanP*N)
	for h := range scanH {
		g := h / (scanH / scanG)
		SSMScanGGML(&SSMHead{Out: out[h*scanP:], X: in.scanX[h*scanP:], Dt: in.scanDt[h:], B: in.scanB[j][g*N:], C: in.scanC[j][g*N:],
			XS: scanH * scanP, DS: scanH, BS: scanG * N, N: N, P: scanP, T: scanN,
			A: in.scanW[h], D: in.scanW[scanH+h], DtBias: in.scanW[2*scanH+h], S: state[h*scanP*N : (h+1)*scanP*N]}, avx2, nil)
	}
	return append(out, state...)
}

// TestGGMLMamba2 checks the int8 modes' copies of Mamba-2's operations
// against llama.cpp's bits on the same inputs (hashes of testdata/
// ggml_ops.py's logf, conv and scan under libggml 0.27.0's zen4 and
// haswell builds and glibc 2.43): glibc's logf over [1, 2^29) and the
// powers of 2 and subnormals of its other branches; SSM_CONV, ADD and
// SILU; SSM_SCAN then the skip for states of 16, 80 and 128, on both
// builds (they differ only in their vector lanes), and Mamba-1's SSM_SCAN
// with decays per column (ggml's scalar loop, the same in both builds), on
// every kernel level.
func TestGGMLMamba2(t *testing.T) {
	in := newMamba2Inputs()
	check := func(what string, got []float32, want uint64) {
		t.Helper()
		if h := fnvBits(got); h != want {
			t.Errorf("%s: hash %#x, llama.cpp's %#x", what, h, want)
		}
	}
	lx := logfInputs()
	lg := make([]float32, len(lx))
	for i, x := range lx {
		lg[i] = LibcLogf(x)
	}
	check("glibc logf", lg, 0xf1eb3ab4aeff7367)

	c := NewContext(2)
	c.Int8, c.LlamaCPP = true, true
	forEachLevel(t, func(_ testing.TB, lv Level) {
		for _, avx2 := range []bool{false, true} {
			c.GGMLAVX2 = avx2
			out := make([]float32, convN*convC)
			ConvSiLU(c, out, in.convX, make([]float32, (convK-1)*convC), in.convW, in.convB, convN, convC, convK)
			check(fmt.Sprintf("%v: SSM_CONV, ADD, SILU", lv), out, [2]uint64{0x684ee409c7c3d059, 0xd4d0b7cef234ae17}[b2i(avx2)])
			for j, N := range scanStates {
				check(fmt.Sprintf("%v: SSM_SCAN, state %d, avx2 %v", lv, N, avx2), in.ggmlScanAll(j, avx2), [2][3]uint64{
					{0xfa74fbd5a0529d4, 0xd645072998124f87, 0x839412bb025d721a},
					{0xfa74fbd5a0529d4, 0x6e9230f22398ffd3, 0x2b54d2f0ea3c3aee}}[b2i(avx2)][j])
			}
			check(fmt.Sprintf("%v: SSM_SCAN with decays per column, avx2 %v", lv, avx2), mamba1ScanGGML(avx2), 0xc6a088bb4099c146)
		}
	})
}

// mamba1ScanGGML runs SSMScanGGML over Mamba-1's shape (ggml_ops.py scan
// 50 24 1 1 16 1): 50 tokens of 24 channels, each a head of one with a
// state of 16 and a decay per column, dt spanning softplus's threshold of
// 20 and far below 0; the outputs, then the final state.
func mamba1ScanGGML(avx2 bool) []float32 {
	const n, H, N = 50, 24, 16
	r := rand.New(rand.NewSource(7))
	v := func(n int, s float64) []float32 {
		o := make([]float32, n)
		for i := range o {
			o[i] = float32(r.NormFloat64() * s)
		}
		return o
	}
	x, dt, bm, cm := v(n*H, 1), v(n*H, 3), v(n*N, 1), v(n*N, 1)
	for i := range dt {
		switch i % 23 {
		case 0:
			dt[i] = 21 + float32(i%5)
		case 1:
			dt[i] = -40
		}
	}
	a := make([]float32, H*N)
	for i := range a {
		a[i] = -float32(1+i%N) * float32(0.5+r.Float64())
	}
	d, db := v(H, 1), v(H, 0.5)
	out, state := make([]float32, n*H), make([]float32, H*N)
	for h := range H {
		SSMScanGGML(&SSMHead{Out: out[h:], X: x[h:], Dt: dt[h:], B: bm, C: cm, XS: H, DS: H, BS: N, N: N, P: 1, T: n,
			D: d[h], DtBias: db[h], AS: a[h*N : (h+1)*N], S: state[h*N : (h+1)*N]}, avx2, nil)
	}
	return append(out, state...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logfInputs are glibc logf's inputs of TestGGMLMamba2: 1 + e^a for a
// over [-20, 20] (ggml's softplus), random values of [1, 2^29), and its
// special branches (1, subnormals, 0, +Inf).
func logfInputs() []float32 {
	r := rand.New(rand.NewSource(13))
	var x []float32
	for i := range 4000 {
		x = append(x, 1+LibcExpf(-20+40*float32(i)/4000))
	}
	for range 4000 {
		x = append(x, float32(math.Exp2(29*r.Float64())))
	}
	return append(x, 1, 0x1p-140, 0x1.8p-127, 0, float32(math.Inf(1)), 0.75, 3)
}
