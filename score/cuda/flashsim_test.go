package cuda

import (
	"math"

	"ppl.dev/quant"
)

// flashLanes runs attn_fa_body (kernels/attention.cu) as the GPU would,
// lane by lane: the same tiles, shared-memory layouts and strides, the
// per-lane fragments of mma.m16n8k16 as the PTX ISA defines them, the quad
// shuffles and the online softmax, in float32 with fp16 operands. It tests
// the kernel's indexing and arithmetic on machines without a GPU; only the
// tensor cores' order of summation is not reproduced (float64 here).
//
// q is (n, heads, hd) f32; K and V are the decoded cache (n, kvheads, hd);
// out receives (n, heads, hd) f32 (before the output's half rounding).
func flashLanes(out, q []float32, K, V func(t, h, i int) float32, n, heads, kvheads, hd int, scaleLog2 float32) {
	const BR, BC = 64, 64
	KSTR, VSTR := hd+8, BC+8
	ks := make([]uint16, BC*KSTR)
	vt := make([]uint16, hd*VSTR)
	qstride := heads * hd
	f16 := func(v float32) uint32 { return uint32(quant.F32ToF16(v)) }
	pack := func(lo, hi float32) uint32 { return f16(lo) | f16(hi)<<16 }
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
				qf     [][32][4]uint32 // [kc]
				o      [][32][4]float32
				m0, m1 [32]float32
				l0, l1 [32]float32
			}
			ws := make([]warpState, 4)
			for w := range 4 {
				st := &ws[w]
				st.qf = make([][32][4]uint32, hd/16)
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
					}
					st.m0[lane], st.m1[lane] = float32(math.Inf(-1)), float32(math.Inf(-1))
				}
			}
			kvEnd := min(n, (qtile+1)*BR)
			for k0 := 0; k0 < kvEnd; k0 += BC {
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
								if col > row || col >= n {
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
					pa := make([][32][4]uint32, BC/16)
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
						}
					}
				}
			}
			for w := range 4 {
				st := &ws[w]
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
