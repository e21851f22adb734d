package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// scanValue draws one operand of the scan kernels' tests by kind: normal
// values, huge ones (products overflow), tiny ones (subnormal states and
// products), a mix of zeros of both signs, ±1, huge, tiny and any finite
// bits, and any finite bits alone.
func scanValue(r *rand.Rand, kind int) float32 {
	switch kind {
	case 1:
		return float32(r.NormFloat64() * math.Ldexp(1, 90+r.IntN(37)))
	case 2:
		return float32(r.NormFloat64() * math.Ldexp(1, -100-r.IntN(50)))
	case 3:
		switch r.IntN(8) {
		case 0:
			return 0
		case 1:
			return float32(math.Copysign(0, -1))
		case 2:
			return float32(1 - 2*r.IntN(2))
		case 3:
			return scanValue(r, 1)
		case 4:
			return scanValue(r, 2)
		case 5:
			return randBits(r)
		}
	case 4:
		return randBits(r)
	}
	return float32(r.NormFloat64())
}

// firstDiff reports where got and want first differ in their bits, or -1.
func firstDiff(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

// TestSSMRowsGGML holds the scan kernels to ssmRowsGGMLGeneric bit for bit
// on every level, both builds' lanes: states of whole vector steps and with
// a tail (which the kernels leave alone), one row to a head of 64, on
// normal, huge, tiny, signed-zero and arbitrary finite operands.
func TestSSMRowsGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	forEachLevel(t, func(t testing.TB, lv Level) {
		for _, avx2 := range []bool{false, true} {
			epr, arr := ggmlLanes(avx2)
			for _, n := range []int{16, 32, 64, 80, 128, 192, 200, 256} {
				np := n &^ (epr*arr - 1)
				for _, rows := range []int{1, 3, 64} {
					for kind := range 5 {
						v := func(n int) []float32 { return scanValues(r, kind, n) }
						s, b, c, x := v(rows*n), v(n), v(n), v(rows)
						dA, d := float32(r.Float64()), float32(r.ExpFloat64())
						if kind > 0 {
							dA, d = scanValue(r, kind), scanValue(r, kind)
						}
						got, want := slices.Clone(s), slices.Clone(s)
						yg, yw := make([]float32, rows), make([]float32, rows)
						ssmRowsGGML(got, n, b, c, x, np, dA, d, yg, avx2)
						ssmRowsGGMLGeneric(want, n, b, c, x, np, dA, d, yw, avx2)
						what := fmt.Sprintf("%v, avx2 %v, state %d, %d rows, kind %d", lv, avx2, n, rows, kind)
						if i := firstDiff(yg, yw); i >= 0 {
							t.Fatalf("%s: row %d's sum %v (%#x), want %v (%#x)", what, i, yg[i], math.Float32bits(yg[i]), yw[i], math.Float32bits(yw[i]))
						}
						if i := firstDiff(got, want); i >= 0 {
							t.Fatalf("%s: state [%d][%d] %v, want %v", what, i/n, i%n, got[i], want[i])
						}
						if i := firstDiff(got, s); np < n && i >= 0 && i%n >= np {
							t.Fatalf("%s: state [%d][%d] past the vector part changed", what, i/n, i%n)
						}
					}
				}
			}
		}
	})
}

// TestSSMScanGGMLLevels runs whole scans (tails, dt past softplus's
// threshold, a state rounded to f16) on every level against the generic
// one, bit for bit.
func TestSSMScanGGMLLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const T, P = 40, 16
	for _, N := range []int{16, 64, 80, 128, 200, 256} {
		x, dt := randVec(r, T*P), randVec(r, T)
		for i := range dt {
			dt[i] *= 3
			if i%9 == 0 {
				dt[i] = 22
			}
		}
		b, c, s0 := randVec(r, T*N), randVec(r, T*N), randVec(r, P*N)
		for _, round := range []func([]float32){nil, roundStateF16} {
			for _, avx2 := range []bool{false, true} {
				run := func() []float32 {
					out, s := make([]float32, T*P), slices.Clone(s0)
					SSMScanGGML(&SSMHead{Out: out, X: x, Dt: dt, B: b, C: c, XS: P, DS: 1, BS: N, N: N, P: P, T: T,
						A: -1.5, D: 0.75, DtBias: 0.25, S: s}, avx2, round)
					return append(out, s...)
				}
				sameOnEveryLevel(t, fmt.Sprintf("state %d, avx2 %v, rounded %v", N, avx2, round != nil), run)
			}
		}
	}
}

// TestSSMRowsF32 holds the float32 scan's kernels to ssmRowsF32Generic bit
// for bit on every level: blocks of 64, 32 and 16 rows, states of one
// element to 200, on TestSSMRowsGGML's operands.
func TestSSMRowsF32(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	forEachLevel(t, func(t testing.TB, lv Level) {
		k := kern.ssmF32
		if k == nil {
			return
		}
		for _, p := range []int{16, 32, 48, 64, 80, 128} {
			for _, n := range []int{1, 16, 80, 128, 200} {
				for kind := range 5 {
					v := func(n int) []float32 { return scanValues(r, kind, n) }
					s, b, c, xd := v(n*p), v(n), v(n), v(p)
					dA := float32(r.Float64())
					if kind > 0 {
						dA = scanValue(r, kind)
					}
					got, want := slices.Clone(s), slices.Clone(s)
					yg, yw := v(p), make([]float32, p)
					k(&got[0], p, &b[0], &c[0], n, &xd[0], dA, &yg[0])
					ssmRowsF32Generic(want, p, b, c, xd, dA, yw)
					what := fmt.Sprintf("%v, %d rows, state %d, kind %d", lv, p, n, kind)
					if i := firstDiff(yg, yw); i >= 0 {
						t.Fatalf("%s: row %d's sum %v (%#x), want %v (%#x)", what, i, yg[i], math.Float32bits(yg[i]), yw[i], math.Float32bits(yw[i]))
					}
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s: state [%d][%d] %v, want %v", what, i%p, i/p, got[i], want[i])
					}
				}
			}
		}
	})
}

// TestTransposeF32 checks transposeF32 on every level on shapes with and
// without whole tiles of 16.
func TestTransposeF32(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	forEachLevel(t, func(t testing.TB, lv Level) {
		for _, sh := range [][2]int{{1, 1}, {16, 16}, {64, 128}, {48, 80}, {17, 33}, {64, 200}, {5, 64}} {
			rows, cols := sh[0], sh[1]
			src, dst := randVec(r, rows*cols), make([]float32, rows*cols)
			transposeF32(dst, src, rows, cols)
			for i := range rows {
				for j := range cols {
					if dst[j*rows+i] != src[i*cols+j] {
						t.Fatalf("%v, %d × %d: [%d][%d] not transposed", lv, rows, cols, i, j)
					}
				}
			}
		}
	})
}

// TestSSMScanLevels runs whole float32 scans on every level against the
// generic one (the state in its own layout), bit for bit: heads the
// kernels take (multiples of 16) and one they leave to Go, with and
// without an f16 state, over calls that carry the state.
func TestSSMScanLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	const T = 40
	for _, P := range []int{8, 16, 48, 64} {
		for _, N := range []int{16, 80, 128, 200} {
			x, dt := randVec(r, T*P), randVec(r, T)
			for i := range dt {
				dt[i] *= 3
				if i%9 == 0 {
					dt[i] = 22
				}
			}
			b, c, s0 := randVec(r, T*N), randVec(r, T*N), randVec(r, P*N)
			for _, round := range []func([]float32){nil, roundStateF16} {
				run := func() []float32 {
					out, s := make([]float32, T*P), slices.Clone(s0)
					for _, sp := range [][2]int{{0, 1}, {1, 25}, {25, T}} {
						SSMScan(&SSMHead{Out: out[sp[0]*P:], X: x[sp[0]*P:], Dt: dt[sp[0]:], B: b[sp[0]*N:], C: c[sp[0]*N:],
							XS: P, DS: 1, BS: N, N: N, P: P, T: sp[1] - sp[0], A: -1.5, D: 0.75, DtBias: 0.25, S: s}, round)
					}
					return append(out, s...)
				}
				sameOnEveryLevel(t, fmt.Sprintf("head %d, state %d, rounded %v", P, N, round != nil), run)
			}
		}
	}
}

// BenchmarkSSMScanGGML is one head of 64 with a state of 128 (Granite
// 4.0-H's) over 256 tokens through the int8 modes' scan, per level and
// build's lanes (ggml=avx512, ggml=avx2); it reports ns per token and head.
func BenchmarkSSMScanGGML(b *testing.B) {
	for _, avx2 := range []bool{false, true} {
		lanes := map[bool]string{false: "ggml=avx512", true: "ggml=avx2"}[avx2]
		benchScan(b, lanes, func(h *SSMHead) { SSMScanGGML(h, avx2, nil) })
	}
}

// BenchmarkSSMScan is BenchmarkSSMScanGGML's head through the float32 scan.
func BenchmarkSSMScan(b *testing.B) {
	benchScan(b, "f32", func(h *SSMHead) { SSMScan(h, nil) })
}

// BenchmarkSSMScanColumns is Mamba-1's scan (a decay per state column) of
// 64 channels with Falcon-Mamba's state of 16 over 256 tokens, through the
// float32 scan and the int8 modes' ggml loop; it reports ns per token and
// channel.
func BenchmarkSSMScanColumns(b *testing.B) {
	const T, H, N = 256, 64, 16
	r := rand.New(rand.NewPCG(1, 2))
	x, dt, bm, cm := randVec(r, T*H), randVec(r, T*H), randVec(r, T*N), randVec(r, T*N)
	a, s, out := randVec(r, H*N), make([]float32, H*N), make([]float32, T*H)
	for i := range a {
		a[i] = -1 - float32(i%N)
	}
	for _, c := range []struct {
		name string
		scan func(h *SSMHead)
	}{{"f32", func(h *SSMHead) { SSMScan(h, nil) }}, {"ggml", func(h *SSMHead) { SSMScanGGML(h, false, nil) }}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for h := range H {
					c.scan(&SSMHead{Out: out[h:], X: x[h:], Dt: dt[h:], B: bm, C: cm, XS: H, DS: H, BS: N, N: N, P: 1, T: T,
						D: 1, AS: a[h*N : (h+1)*N], S: s[h*N : (h+1)*N]})
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*T*H), "ns/token-channel")
		})
	}
}

func benchScan(b *testing.B, name string, scan func(h *SSMHead)) {
	const T, P, N = 256, 64, 128
	r := rand.New(rand.NewPCG(1, 1))
	x, dt, bm, cm, s := randVec(r, T*P), randVec(r, T), randVec(r, T*N), randVec(r, T*N), randVec(r, P*N)
	out := make([]float32, T*P)
	prev := CurrentLevel()
	defer SetLevel(prev)
	for _, lv := range Levels() {
		b.Run(fmt.Sprintf("%s/%v", name, lv), func(b *testing.B) {
			SetLevel(lv)
			defer SetLevel(prev)
			h := &SSMHead{Out: out, X: x, Dt: dt, B: bm, C: cm, XS: P, DS: 1, BS: N, N: N, P: P, T: T, A: -0.5, D: 1, S: s}
			for b.Loop() {
				scan(h)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*T), "ns/token-head")
		})
	}
}

// sameOnEveryLevel checks that run gives on every CPU level the bits it
// gives on the generic level.
func sameOnEveryLevel(t *testing.T, what string, run func() []float32) {
	t.Helper()
	prev := SetLevel(Generic)
	want := run()
	SetLevel(prev)
	forEachLevel(t, func(t testing.TB, lv Level) {
		if i := firstDiff(run(), want); i >= 0 {
			t.Errorf("%v, %s: value %d differs from the generic level's", lv, what, i)
		}
	})
}

// scanValues returns n operands of scanValue's kind.
func scanValues(r *rand.Rand, kind, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = scanValue(r, kind)
	}
	return x
}
