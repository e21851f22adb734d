package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/quant"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/nn"
)

// flashBC is attn_fa_bc (kernels/attention.cu): the key tile of the flash
// kernel for head size hd, 64 keys, 32 for heads above 128, 16 above 256.
func flashBC(hd int) int {
	switch {
	case hd > 256:
		return 16
	case hd > 128:
		return 32
	}
	return 64
}

// flashLanes runs attn_fa_body (kernels/attention.cu) as the GPU would,
// lane by lane: the same tiles, shared-memory layouts and strides, the
// per-lane fragments of mma.m16n8k16 as the PTX ISA defines them, the quad
// shuffles and the online softmax, in float32 with fp16 operands. It tests
// the kernel's indexing and arithmetic on machines without a GPU; only the
// tensor cores' order of summation is not reproduced (float64 here). The
// key tile is the kernel's for the head size (flashBC), and so is the skip
// of a tile wholly above a warp's rows when tiles are shorter than 64.
//
// q is (n, heads, hd) f32; K and V are the decoded cache (n, kvheads, hd);
// out receives (n, heads, hd) f32 (before the output's half rounding).
// keys, when not nil, masks the keys a row's set does not hold (the
// kernel's skip of the tiles no row of a block reads changes nothing: their
// scores would all be masked, which leaves each row's state as it is).
func flashLanes(out, q []float32, K, V func(t, h, i int) float32, n, heads, kvheads, hd int, scaleLog2 float32, window int, sinks, slopes []float32, keys *nn.KeySet, split bool) {
	const BR = 64
	BC := flashBC(hd)
	KSTR, VSTR := hd+8, BC+8
	ks := make([]uint16, BC*KSTR)
	vt := make([]uint16, hd*VSTR)
	qstride := heads * hd
	f16 := func(v float32) uint32 { return uint32(quant.F32ToF16(v)) }
	pack := func(lo, hi float32) uint32 { return f16(lo) | f16(hi)<<16 }
	// the low half of attn_fx's split: v less its fp16 rounding
	low := func(v float32) float32 { return v - quant.F16ToF32(quant.F32ToF16(v)) }
	packLow := func(a, b float32) uint32 { return pack(low(a), low(b)) }
	lo16 := func(w uint32) float64 { return float64(quant.F16ToF32(uint16(w))) }
	hi16 := func(w uint32) float64 { return float64(quant.F16ToF32(uint16(w >> 16))) }
	// mma: c[lane] (16×8 f32) += a[lane] (16×16 fp16) · b[lane] (16×8 fp16).
	mma := func(c *[32][4]float32, a *[32][4]uint32, b *[32][2]uint32) {
		var A [16][16]float64
		var B [16][8]float64
		var C [16][8]float64
		for lane := range 32 {
			g, t := lane>>2, lane&3
			A[g][2*t], A[g][2*t+1] = lo16(a[lane][0]), hi16(a[lane][0])
			A[g+8][2*t], A[g+8][2*t+1] = lo16(a[lane][1]), hi16(a[lane][1])
			A[g][2*t+8], A[g][2*t+9] = lo16(a[lane][2]), hi16(a[lane][2])
			A[g+8][2*t+8], A[g+8][2*t+9] = lo16(a[lane][3]), hi16(a[lane][3])
			B[2*t][g], B[2*t+1][g] = lo16(b[lane][0]), hi16(b[lane][0])
			B[2*t+8][g], B[2*t+9][g] = lo16(b[lane][1]), hi16(b[lane][1])
			C[g][2*t], C[g][2*t+1] = float64(c[lane][0]), float64(c[lane][1])
			C[g+8][2*t], C[g+8][2*t+1] = float64(c[lane][2]), float64(c[lane][3])
		}
		for r := range 16 {
			for col := range 8 {
				s := C[r][col]
				for k := range 16 {
					s += A[r][k] * B[k][col]
				}
				C[r][col] = s
			}
		}
		for lane := range 32 {
			g, t := lane>>2, lane&3
			c[lane] = [4]float32{float32(C[g][2*t]), float32(C[g][2*t+1]), float32(C[g+8][2*t]), float32(C[g+8][2*t+1])}
		}
	}
	word := func(s []uint16, i int) uint32 { return uint32(s[i]) | uint32(s[i+1])<<16 }
	// quad reductions: lanes 4g..4g+3 (shfl_xor 1 then 2)
	quadMax := func(v *[32]float32) {
		for g := range 8 {
			m := float32(math.Inf(-1))
			for t := range 4 {
				m = max(m, v[4*g+t])
			}
			for t := range 4 {
				v[4*g+t] = m
			}
		}
	}
	quadSum := func(v *[32]float32) {
		for g := range 8 {
			var s float32
			for t := range 4 {
				s += v[4*g+t]
			}
			for t := range 4 {
				v[4*g+t] = s
			}
		}
	}
	tiles := (n + BR - 1) / BR
	for qtile := range tiles {
		for h := range heads {
			g := h / (heads / kvheads)
			type warpState struct {
				qf, ql [][32][4]uint32 // [kc]; ql: the low halves (split)
				o      [][32][4]float32
				m0, m1 [32]float32
				l0, l1 [32]float32
			}
			ws := make([]warpState, 4)
			for w := range 4 {
				st := &ws[w]
				st.qf = make([][32][4]uint32, hd/16)
				st.ql = make([][32][4]uint32, hd/16)
				st.o = make([][32][4]float32, hd/8)
				for lane := range 32 {
					gid, tig := lane>>2, lane&3
					r0 := qtile*BR + w*16 + gid
					r1 := r0 + 8
					qv := func(r, c int) float32 {
						if r < n {
							return q[r*qstride+h*hd+c]
						}
						return 0
					}
					for kc := range hd / 16 {
						c := kc*16 + tig*2
						st.qf[kc][lane] = [4]uint32{pack(qv(r0, c), qv(r0, c+1)), pack(qv(r1, c), qv(r1, c+1)),
							pack(qv(r0, c+8), qv(r0, c+9)), pack(qv(r1, c+8), qv(r1, c+9))}
						st.ql[kc][lane] = [4]uint32{packLow(qv(r0, c), qv(r0, c+1)), packLow(qv(r1, c), qv(r1, c+1)),
							packLow(qv(r0, c+8), qv(r0, c+9)), packLow(qv(r1, c+8), qv(r1, c+9))}
					}
					st.m0[lane], st.m1[lane] = float32(math.Inf(-1)), float32(math.Inf(-1))
				}
			}
			kvEnd := min(n, (qtile+1)*BR)
			kvStart := 0
			if window > 0 {
				kvStart = max(0, qtile*BR-window+1) / BC * BC
			}
			for k0 := kvStart; k0 < kvEnd; k0 += BC {
				for it := 0; it < BC*(hd/8); it++ {
					t, d0 := it/(hd/8), (it%(hd/8))*8
					tok := k0 + t
					for e := range 8 {
						var kvv, vv float32
						if tok < n {
							kvv, vv = K(tok, g, d0+e), V(tok, g, d0+e)
						}
						ks[t*KSTR+d0+e] = uint16(f16(kvv))
						vt[(d0+e)*VSTR+t] = uint16(f16(vv))
					}
				}
				for w := range 4 {
					if BC < BR && k0 > qtile*BR+w*16+15 {
						continue // the tile lies above the warp's rows
					}
					if window > 0 && k0+BC <= qtile*BR+w*16-window+1 {
						continue // the tile lies below the warp's windows
					}
					st := &ws[w]
					s := make([][32][4]float32, BC/8)
					for nt := range BC / 8 {
						for kc := range hd / 16 {
							var b [32][2]uint32
							for lane := range 32 {
								gid, tig := lane>>2, lane&3
								base := (nt*8+gid)*KSTR + kc*16 + tig*2
								b[lane] = [2]uint32{word(ks, base), word(ks, base+8)}
							}
							a := st.qf[kc]
							mma(&s[nt], &a, &b)
							if split {
								a = st.ql[kc]
								mma(&s[nt], &a, &b)
							}
						}
					}
					var mx0, mx1 [32]float32
					for lane := range 32 {
						gid, tig := lane>>2, lane&3
						r0 := qtile*BR + w*16 + gid
						r1 := r0 + 8
						mx0[lane], mx1[lane] = float32(math.Inf(-1)), float32(math.Inf(-1))
						for nt := range BC / 8 {
							c := k0 + nt*8 + tig*2
							for e := range 4 {
								col, row := c+(e&1), r1
								if e < 2 {
									row = r0
								}
								v := s[nt][lane][e] * scaleLog2
								if slopes != nil { // ALiBi's bias in log2 units, each product and sum rounded
									v += float32(float32(slopes[h]*float32(math.Log2E)) * float32(col-row))
								}
								if col > row || col >= n || (window > 0 && col <= row-window) || keys != nil && row < n && !keys.HasIn(g, row, col) {
									v = float32(math.Inf(-1))
								}
								s[nt][lane][e] = v
							}
							mx0[lane] = max(mx0[lane], max(s[nt][lane][0], s[nt][lane][1]))
							mx1[lane] = max(mx1[lane], max(s[nt][lane][2], s[nt][lane][3]))
						}
					}
					quadMax(&mx0)
					quadMax(&mx1)
					pa, pl := make([][32][4]uint32, BC/16), make([][32][4]uint32, BC/16)
					for lane := range 32 {
						mn0, mn1 := max(st.m0[lane], mx0[lane]), max(st.m1[lane], mx1[lane])
						b0, b1 := mn0, mn1
						if math.IsInf(float64(mn0), -1) {
							b0 = 0
						}
						if math.IsInf(float64(mn1), -1) {
							b1 = 0
						}
						c0 := float32(math.Exp2(float64(st.m0[lane] - b0)))
						c1 := float32(math.Exp2(float64(st.m1[lane] - b1)))
						st.m0[lane], st.m1[lane] = mn0, mn1
						st.l0[lane] *= c0
						st.l1[lane] *= c1
						for nd := range hd / 8 {
							st.o[nd][lane][0] *= c0
							st.o[nd][lane][1] *= c0
							st.o[nd][lane][2] *= c1
							st.o[nd][lane][3] *= c1
						}
						for nt := range BC / 8 {
							p0 := float32(math.Exp2(float64(s[nt][lane][0] - b0)))
							p1 := float32(math.Exp2(float64(s[nt][lane][1] - b0)))
							p2 := float32(math.Exp2(float64(s[nt][lane][2] - b1)))
							p3 := float32(math.Exp2(float64(s[nt][lane][3] - b1)))
							st.l0[lane] += p0 + p1
							st.l1[lane] += p2 + p3
							pa[nt/2][lane][(nt&1)*2+0] = pack(p0, p1)
							pa[nt/2][lane][(nt&1)*2+1] = pack(p2, p3)
							pl[nt/2][lane][(nt&1)*2+0] = packLow(p0, p1)
							pl[nt/2][lane][(nt&1)*2+1] = packLow(p2, p3)
						}
					}
					for kc := range BC / 16 {
						for nd := range hd / 8 {
							var b [32][2]uint32
							for lane := range 32 {
								gid, tig := lane>>2, lane&3
								base := (nd*8+gid)*VSTR + kc*16 + tig*2
								b[lane] = [2]uint32{word(vt, base), word(vt, base+8)}
							}
							a := pa[kc]
							mma(&st.o[nd], &a, &b)
							if split {
								a = pl[kc]
								mma(&st.o[nd], &a, &b)
							}
						}
					}
				}
			}
			for w := range 4 {
				st := &ws[w]
				if sinks != nil { // the sink's term, in lane 0 of each row's four
					sk := sinks[h] * float32(1.44269504088896341)
					for lane := 0; lane < 32; lane += 4 {
						st.l0[lane] += float32(math.Exp2(float64(sk - st.m0[lane])))
						st.l1[lane] += float32(math.Exp2(float64(sk - st.m1[lane])))
					}
				}
				quadSum(&st.l0)
				quadSum(&st.l1)
				for lane := range 32 {
					gid, tig := lane>>2, lane&3
					r0 := qtile*BR + w*16 + gid
					r1 := r0 + 8
					inv0, inv1 := 1/st.l0[lane], 1/st.l1[lane]
					for nd := range hd / 8 {
						c := nd*8 + tig*2
						if r0 < n {
							out[r0*qstride+h*hd+c] = st.o[nd][lane][0] * inv0
							out[r0*qstride+h*hd+c+1] = st.o[nd][lane][1] * inv0
						}
						if r1 < n {
							out[r1*qstride+h*hd+c] = st.o[nd][lane][2] * inv1
							out[r1*qstride+h*hd+c+1] = st.o[nd][lane][3] * inv1
						}
					}
				}
			}
		}
	}
}

// flashCase is an input of TestFlashVsPlain: q (n, heads, hd), k and v
// (n, kvheads, hd), and the bound on the largest |flash - plain| over the
// fp16 outputs.
type flashCase struct {
	name                  string
	n, heads, kvheads, hd int
	gen                   func(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32)
	bound                 float64
	window                int       // a sliding window, 0 for none
	sinks                 []float32 // one logit per head, or nil
	alibi                 float32   // ALiBi's maximum bias, 0 for none
	groups                int       // > 0: a key set of so many groups (sparseKeys)
}

// uniform values in [-a, a]
func flashUniform(rng *rand.Rand, count int, a float64) []float32 {
	v := make([]float32, count)
	for i := range v {
		v[i] = float32(a * (2*rng.Float64() - 1))
	}
	return v
}

// flashRandom: checkFlash's input, values in [-1, 1].
func flashRandom(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32) {
	return flashUniform(rng, n*heads*hd, 1), flashUniform(rng, n*kvheads*hd, 1), flashUniform(rng, n*kvheads*hd, 1)
}

// flashFlat: small scores, so that every row averages all its keys (long
// sums of nearly equal probabilities).
func flashFlat(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32) {
	return flashUniform(rng, n*heads*hd, 0.05), flashUniform(rng, n*kvheads*hd, 1), flashUniform(rng, n*kvheads*hd, 1)
}

// flashPeaked: large scores, nearly one-hot rows: query i is 3× key
// (i·7) mod (i+1) of its group plus noise, scores up to about 3·hd/3/√hd.
func flashPeaked(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32) {
	q, k, v = flashUniform(rng, n*heads*hd, 0.1), flashUniform(rng, n*kvheads*hd, 1), flashUniform(rng, n*kvheads*hd, 1)
	for i := range n {
		j := i * 7 % (i + 1)
		for h := range heads {
			g := h / (heads / kvheads)
			for d := range hd {
				q[(i*heads+h)*hd+d] += 3 * k[(j*kvheads+g)*hd+d]
			}
		}
	}
	return q, k, v
}

// flashRamp: keys whose size grows (up) or shrinks along the sequence by
// up to 8×, so that each tile brings a new row maximum (the running sums
// are rescaled by small corrections) or the first tile holds it (later
// probabilities underflow).
func flashRamp(up bool) func(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32) {
	return func(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32) {
		q, k, v = flashRandom(rng, n, heads, kvheads, hd)
		for j := range n {
			f := float32(j) / float32(max(1, n-1))
			if !up {
				f = 1 - f
			}
			for i := range kvheads * hd {
				k[j*kvheads*hd+i] *= 1 + 7*f
			}
		}
		for i := range q {
			q[i] = 2 * float32(math.Abs(float64(q[i]))) // positive: scores follow the keys' sums
		}
		for i := range k {
			if k[i] < 0 {
				k[i] *= 0.25
			}
		}
		return q, k, v
	}
}

// flashCases: every head size on checkFlash's input; for heads of 256
// (32-key tiles, warps skipping tiles above their rows) adversarial
// inputs too: long rows (640 tokens: 10 query tiles, 20 key tiles), a
// partial last tile of queries and keys, tiles with whole warps past the
// last row (n 1, 20, 33), nearly one-hot rows and rising or falling
// maxima. Outputs lie in [-1, 1], where a step of fp16 is at most 2^-11
// (4.9e-4). Measured on the emulator: one step (4.9e-4) for every case
// but rising (7.3e-4) and falling (1.1e-3: scores near 50 whose fp16 q
// is off by about 1e-3, times values of 1); bounds are two steps, and
// about 1.5× the measured difference for the ramps.
var flashCases = []flashCase{
	{"random", 150, 4, 2, 16, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 150, 4, 2, 32, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 150, 4, 2, 64, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 150, 4, 2, 128, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 150, 4, 2, 256, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 1, 2, 1, 256, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 20, 2, 1, 256, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 33, 3, 3, 256, flashRandom, 1e-3, 0, nil, 0, 0},
	{"flat-long", 640, 2, 1, 256, flashFlat, 1e-3, 0, nil, 0, 0},
	{"peaked", 200, 4, 1, 256, flashPeaked, 1e-3, 0, nil, 0, 0},
	{"peaked-long", 640, 2, 1, 256, flashPeaked, 1e-3, 0, nil, 0, 0},
	{"rising", 300, 2, 2, 256, flashRamp(true), 1.2e-3, 0, nil, 0, 0},
	{"falling", 300, 2, 2, 256, flashRamp(false), 1.7e-3, 0, nil, 0, 0},
	// Heads of 512 (Gemma 4's global layers): 16-key tiles, two blocks of
	// 256 output dims per head.
	{"random", 150, 2, 1, 512, flashRandom, 1e-3, 0, nil, 0, 0},
	{"random", 33, 4, 2, 512, flashRandom, 1e-3, 0, nil, 0, 0},
	{"peaked", 200, 2, 1, 512, flashPeaked, 1e-3, 0, nil, 0, 0},
	{"rising", 150, 2, 2, 512, flashRamp(true), 1.7e-3, 0, nil, 0, 0},
	// Sliding windows (gemma3, gpt-oss) narrower than a key tile, across
	// several, and wider than the window itself; sinks (gpt-oss) far below
	// and above the scores; both at once.
	{"window", 300, 2, 1, 64, flashRandom, 1e-3, 20, nil, 0, 0},
	{"window", 300, 4, 2, 128, flashRandom, 1e-3, 130, nil, 0, 0},
	{"window", 140, 2, 1, 256, flashPeaked, 1e-3, 45, nil, 0, 0},
	{"window", 150, 2, 2, 32, flashRandom, 1e-3, 1000, nil, 0, 0},
	{"sinks", 200, 4, 2, 64, flashRandom, 1e-3, 0, []float32{-20, 0, 3, 30}, 0, 0},
	{"sinks", 140, 2, 1, 256, flashRamp(false), 1.7e-3, 0, []float32{1, -1}, 0, 0},
	{"window-sinks", 300, 4, 2, 64, flashRandom, 1e-3, 128, []float32{1, -1, 8, 0.5}, 0, 0},
	{"window-sinks", 100, 2, 1, 16, flashFlat, 1e-3, 7, []float32{0.5, 2}, 0, 0},
	// ALiBi (BLOOM, MPT): 6 heads (2 of m1's slopes), alone, with a
	// window and sinks, and on heads of 256.
	{"alibi", 300, 6, 2, 64, flashRandom, 1e-3, 0, nil, 8, 0},
	{"alibi-window-sinks", 200, 4, 2, 128, flashRandom, 1e-3, 50, []float32{1, -1, 8, 0.5}, 16, 0},
	{"alibi", 140, 2, 1, 256, flashPeaked, 1e-3, 0, nil, 8, 0},
	// Sparse attention's key sets (MSA, QSA): one for every KV head and one
	// per KV head, rows past 200 reading none of the first 128 keys (whole
	// tiles skipped) and rows past 260 not the diagonal; with a window and
	// sinks; heads of 256 and 512 (shorter tiles).
	{"keys", 300, 4, 2, 64, flashRandom, 1e-3, 0, nil, 0, 1},
	{"keys", 300, 4, 2, 128, flashRandom, 1e-3, 0, nil, 0, 2},
	{"keys-window-sinks", 300, 4, 2, 64, flashRandom, 1e-3, 128, []float32{1, -1, 8, 0.5}, 0, 2},
	{"keys", 280, 2, 1, 256, flashPeaked, 1e-3, 0, nil, 0, 1},
	{"keys", 220, 2, 2, 512, flashRandom, 1e-3, 0, nil, 0, 2},
}

// splitBound is the largest |attn_fx - exact| over float32 outputs in
// [-1, 1] that TestFlashVsPlain allows, exact being attention in float64
// over the same cache, where the plain float32 kernel is closer than
// that: about 3 times the emulation's largest, 3.9e-7, on the cases of
// scores of a few units (the fp16 kernel's is 4.9e-4). Where scores are
// near 50 (the ramps) float32's own sums are off by 1e-5 (the plain
// kernel: 1.0e-5), and attn_fx, whose products are float32 sums as well,
// may be as far as 1.5 times the plain kernel (measured: 3.6e-6).
const splitBound = 1e-6

// exactError is the largest |got - want| and where.
func exactError(got []float32, want []float64) (worst float64, at int) {
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); d > worst || d != d {
			worst, at = d, i
		}
	}
	return worst, at
}

// TestFlashVsPlain runs the tensor-core kernel (on the emulator
// flashLanes, lane by lane) and the plain one on the same bf16 cache and
// bounds their largest difference, fp16 outputs both; and attn_fx, float32
// output, against attention in float64 (splitBound).
func TestFlashVsPlain(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		kid, vid, err := kvFormat("bf16")
		if err != nil {
			t.Fatal(err)
		}
		for ci, c := range flashCases {
			t.Run(fmt.Sprintf("%s/n%d-h%d-kv%d-d%d-w%d", c.name, c.n, c.heads, c.kvheads, c.hd, c.window), func(t *testing.T) {
				if _, host := e.dev.(*hostDevice); host && c.n > 300 || testing.Short() && e.Ordinal < 0 && c.n*c.hd > 150*256 {
					t.Skip("emulator in -short mode, or the CUDA C on the host: long rows")
				}
				rng := rand.New(rand.NewPCG(uint64(ci), 17))
				q, k, v := c.gen(rng, c.n, c.heads, c.kvheads, c.hd)
				kt, vt := storeKV(t, e, kid, vid, k, v, c.n, c.kvheads, c.hd)
				qp := devPut(t, e, q)
				plain, flash := devAlloc(t, e, int64(2*len(q))), devAlloc(t, e, int64(2*len(q)))
				scale := 1 / math.Sqrt(float64(c.hd))
				mask := attnMask{window: c.window}
				if c.sinks != nil {
					mask.sinks = devPut(t, e, c.sinks)
				}
				var slopes []float32
				if c.alibi > 0 {
					slopes = nn.ALiBiSlopes(c.heads, c.alibi)
					mask.slopes = devPut(t, e, slopes)
				}
				var keys *nn.KeySet
				if c.groups > 0 {
					keys = sparseKeys(rng, c.n, c.groups)
					mask.keys, mask.kgroups = devPut(t, e, keys.Words()), c.groups
				}
				do(t, e, func() error {
					if err := e.attentionMasked(plain, qp, c.n, c.heads, c.kvheads, c.hd, scale, mask, kt, vt, false, f16); err != nil {
						return err
					}
					return e.attentionMasked(flash, qp, c.n, c.heads, c.kvheads, c.hd, scale, mask, kt, vt, true, f16)
				})
				a := fromHalf(devGet[uint16](t, e, plain, len(q)), f16)
				b := fromHalf(devGet[uint16](t, e, flash, len(q)), f16)
				worst, at := worstError(b, a, 1, 0) // |flash - plain|
				t.Logf("max |flash - plain| %.3g (element %d: %v vs %v), bound %.3g", worst, at, b[at], a[at], c.bound)
				if worst > c.bound {
					t.Errorf("flash attention: element %d (row %d) is %v, the plain kernel's %v: |Δ| %.3g > %.3g", at, at/(c.heads*c.hd), b[at], a[at], worst, c.bound)
				}
				// attn_fx and the plain kernel, float32 outputs both,
				// against float64 over the cache's keys and values.
				plain32, split := devAlloc(t, e, int64(4*len(q))), devAlloc(t, e, int64(4*len(q)))
				do(t, e, func() error {
					if err := e.attentionPlain(plain32, qp, c.n, c.heads, c.kvheads, c.hd, scale, mask, plainOpts{}, kt, vt, otypeF32); err != nil {
						return err
					}
					return e.attentionSplit(split, qp, c.n, c.heads, c.kvheads, c.hd, scale, mask, kt, vt)
				})
				a32, b32 := devGet[float32](t, e, plain32, len(q)), devGet[float32](t, e, split, len(q))
				kr, vr := append([]float32(nil), k...), append([]float32(nil), v...)
				var blk kvcache.Block
				kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, c.n, c.kvheads, c.hd)
				kvcache.RoundTrip(kvcache.BF16{}, &blk, vr, c.n, c.kvheads, c.hd)
				def := nn.Attention{Heads: c.heads, KVHeads: c.kvheads, HeadDim: c.hd, Scale: scale, Window: c.window, Sinks: c.sinks, Slopes: slopes, Keys: keys}
				exact := def.Exact(q, kr, vr, c.n)
				plainErr, _ := exactError(a32, exact)
				bound := max(splitBound, 1.5*plainErr)
				worst, at = exactError(b32, exact)
				t.Logf("max |split - exact| %.3g (element %d: %v vs %.9g), plain kernel's %.3g, bound %.3g", worst, at, b32[at], exact[at], plainErr, bound)
				if worst > bound {
					t.Errorf("split attention: element %d (row %d) is %v, float64 gives %.9g: |Δ| %.3g > %.3g", at, at/(c.heads*c.hd), b32[at], exact[at], worst, bound)
				}
			})
		}
	})
}
