package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/kernels"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// kvEdgeInput is cache content made of the groups that stress the
// quantizers' corner cases, one pattern per (token, head), cycling: zeros
// and negative zeros, values that land exactly on rounding ties (k + 0.5
// steps of int8's and Q8_0's scale, E4M3's and E2M1's midpoints), float32
// subnormals, values so small that fp16 scales underflow, so large that
// they overflow (Q4_1's hi - lo to infinity at ±MaxFloat32), a constant
// group (Q4_1's d = 0), magnitudes from 1e-30 to 1e30 in one group, and,
// with bad, a NaN, +Inf or -Inf in a group (nvfp4's tensor scale then goes
// NaN for the whole tensor).
func kvEdgeInput(rng *rand.Rand, tokens, heads, hd int, bad bool) []float32 {
	x := make([]float32, tokens*heads*hd)
	patterns := 11
	if bad {
		patterns = 14
	}
	for g := range tokens * heads {
		v := x[g*hd : (g+1)*hd]
		switch g % patterns {
		case 0:
			for i := range v {
				v[i] = float32(math.Copysign(0, float64(i%2)-0.5))
			}
		case 1: // int8: |x|/d = j + 0.5 exactly (d = 1), and 127
			for i := range v {
				v[i] = float32(i%126) + 0.5
				if i%3 == 1 {
					v[i] = -v[i]
				}
			}
			v[rng.IntN(hd)] = 127
		case 2: // E4M3 and E2M1 midpoints and neighbours, scale 448
			mids := []float32{448, 0.5, 1.25, 2.5, 3.5, 5, 0.25, 0.75, 1.75, 4.5, 9, 17, 0.001953125 * 1.5, 240, 232, 440}
			for i := range v {
				v[i] = mids[i%len(mids)] * float32(1-2*(i/len(mids)%2))
			}
		case 3:
			for i := range v {
				v[i] = math.Float32frombits(uint32(rng.IntN(1 << 23)))
				if i%2 == 1 {
					v[i] = -v[i]
				}
			}
		case 4:
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 1e-9)
			}
		case 5:
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 1e7)
			}
		case 6:
			for i := range v {
				v[i] = math.MaxFloat32 * float32(1-2*(i%2))
			}
		case 7:
			for i := range v {
				v[i] = -2.75
			}
		case 8:
			for i := range v {
				v[i] = float32(math.Pow(10, rng.Float64()*60-30) * float64(1-2*rng.IntN(2)))
			}
		case 9: // Q8_0 ties: amax 127 (d = 1, id = 1), halves away from zero
			for i := range v {
				v[i] = float32(i%64)/2 - 16
			}
			v[0] = -127
		case 10: // one large value among small ones
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 1e-3)
			}
			v[rng.IntN(hd)] = 1000
		case 11:
			copy(v, randF32(rng, hd, 1))
			v[rng.IntN(hd)] = float32(math.NaN())
		case 12:
			copy(v, randF32(rng, hd, 1))
			v[rng.IntN(hd)] = float32(math.Inf(1))
		case 13:
			copy(v, randF32(rng, hd, 1))
			v[hd-1] = float32(math.Inf(-1))
		}
	}
	return x
}

// TestKVStoreEdgeParity is TestKVStoreParity on kvEdgeInput, finite and
// with NaNs and infinities, for every format, head sizes from 8 to 256
// (the rotated formats' largest, kv_store_rot's v[256]) and one not a
// multiple of 32 (a padded last block): the planes byte for byte, the
// decoded cache bit for bit.
func TestKVStoreEdgeParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(8, 2))
		names := make([]string, 0, len(kvIDs))
		for name := range kvIDs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			id := kvIDs[name]
			for _, s := range []struct {
				tokens, heads, hd int
				bad               bool
			}{{7, 2, 32, false}, {7, 2, 32, true}, {3, 5, 256, false}, {2, 3, 512, true}, {4, 4, 8, true}, {6, 3, 48, true}} {
				if kernels.KVRotated(id) && s.hd&(s.hd-1) != 0 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%dx%dx%d-bad%v", name, s.tokens, s.heads, s.hd, s.bad), func(t *testing.T) {
					checkKVStore(t, e, id, kvEdgeInput(rng, s.tokens, s.heads, s.hd, s.bad), s.tokens, s.heads, s.hd)
				})
			}
		}
		if _, ok := e.dev.(*hostDevice); ok {
			for _, k := range kernelModules["kvstore"] {
				if hostRan(e, k) == 0 {
					t.Errorf("%s never ran on the host", k)
				}
			}
		}
	})
}

// TestEmulationMatchesHost: the emulator runs the flash-attention and
// delta-rule kernels as Go ports of their arithmetic (flashLanes,
// simDeltaNet), which every emulated end-to-end test relies on; here the
// ports and the CUDA C on the host get the same inputs. They may part only
// where the host's libm and Go's math round differently (exp2f, expf):
// measured, attention 0-3 of 16,000-77,000 halves by one unit, the delta
// rule up to 1.1% of its values (a rounded state carries an expf that
// rounds apart), by up to 1.7e-8 of the largest; the split attention
// (float32 outputs, where every exp2f that rounds apart shows) up to 18% of
// its values, by up to 4.8e-7.
func TestEmulationMatchesHost(t *testing.T) {
	host, sim := hostEngine(t), simEngine()
	t.Run("attention", func(t *testing.T) {
		kid, vid, err := kvFormat("bf16")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			n, heads, kvheads, hd, window int
			sinks                         []float32
			alibi                         float32 // ALiBi's maximum bias
		}{
			{65, 2, 1, 16, 0, nil, 0}, {150, 4, 2, 64, 0, nil, 0}, {130, 2, 1, 128, 0, nil, 0}, {140, 2, 1, 256, 0, nil, 0}, {97, 3, 3, 256, 0, nil, 0},
			{150, 4, 2, 64, 70, []float32{-3, 0, 2, 9}, 0}, {140, 2, 1, 256, 33, nil, 0}, {90, 2, 1, 512, 0, nil, 0},
			{150, 6, 2, 64, 0, nil, 8}, {140, 2, 1, 256, 33, []float32{1, -1}, 16},
		} {
			t.Run(fmt.Sprintf("n%d-h%d-kv%d-d%d-w%d-alibi%v", s.n, s.heads, s.kvheads, s.hd, s.window, s.alibi), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(s.n), uint64(s.hd)))
				q := randF32(rng, s.n*s.heads*s.hd, 1)
				k := randF32(rng, s.n*s.kvheads*s.hd, 1)
				v := randF32(rng, s.n*s.kvheads*s.hd, 1)
				scale := 1 / math.Sqrt(float64(s.hd))
				// attend runs kernel (out, q, sinks, cache) on e's copy of
				// the inputs, into an output of size bytes per value.
				attend := func(e *Engine, size int, kernel func(out, qp ptr, m attnMask, kt, vt *kvTensor) error) ptr {
					kt, vt := storeKV(t, e, kid, vid, k, v, s.n, s.kvheads, s.hd)
					qp, out := devPut(t, e, q), devAlloc(t, e, int64(size*len(q)))
					m := attnMask{window: s.window}
					if s.sinks != nil {
						m.sinks = devPut(t, e, s.sinks)
					}
					if s.alibi > 0 {
						m.slopes = devPut(t, e, nn.ALiBiSlopes(s.heads, s.alibi))
					}
					do(t, e, func() error { return kernel(out, qp, m, kt, vt) })
					return out
				}
				run := func(e *Engine) []uint16 {
					out := attend(e, 2, func(out, qp ptr, m attnMask, kt, vt *kvTensor) error {
						return e.attentionMasked(out, qp, s.n, s.heads, s.kvheads, s.hd, scale, m, kt, vt, true, f16)
					})
					return devGet[uint16](t, e, out, len(q))
				}
				a, b := run(sim), run(host)
				differ, far := 0, 0
				for i := range a {
					if d := halfULPs(a[i], b[i]); d != 0 {
						differ++
						far = max(far, d)
					}
				}
				t.Logf("flashLanes vs attn_fa%d: %d of %d halves differ, by at most %d ulps", s.hd, differ, len(a), far)
				if differ*1000 > len(a) || far > 1 {
					t.Errorf("flashLanes vs attn_fa%d: %d of %d halves differ (at most 1 in 1000), by up to %d ulps (at most 1)", s.hd, differ, len(a), far)
				}
				split := func(e *Engine) []float32 {
					out := attend(e, 4, func(out, qp ptr, m attnMask, kt, vt *kvTensor) error {
						return e.attentionSplit(out, qp, s.n, s.heads, s.kvheads, s.hd, scale, m, kt, vt)
					})
					return devGet[float32](t, e, out, len(q))
				}
				x, y := split(sim), split(host)
				differ, worst := 0, 0.0
				for i := range x {
					if x[i] != y[i] {
						differ++
						worst = max(worst, math.Abs(float64(x[i]-y[i])))
					}
				}
				// Float32 outputs show each exp2f that rounds apart (12-18%
				// of them differ, by up to 4.8e-7, 2 steps of float32).
				t.Logf("flashLanes vs attn_fx%d: %d of %d floats differ, by at most %.2g", s.hd, differ, len(x), worst)
				if worst > 1e-6 {
					t.Errorf("flashLanes vs attn_fx%d: %d of %d floats differ, by up to %.2g (at most 1e-6)", s.hd, differ, len(x), worst)
				}
			})
		}
	})
	t.Run("delta_net", func(t *testing.T) {
		for _, d := range []ml.DeltaRule{
			{KHeads: 2, VHeads: 4, Dim: 16, Tiled: true}, {KHeads: 1, VHeads: 3, Dim: 48},
			{KHeads: 2, VHeads: 2, Dim: 128, Tiled: true}, {KHeads: 2, VHeads: 2, Dim: 16, State: "f16"},
			{KHeads: 1, VHeads: 2, Dim: 32, State: "bf16"}, {KHeads: 2, VHeads: 2, Dim: 64, KeyGates: true},
		} {
			t.Run(fmt.Sprintf("d%d_hk%d_hv%d_%s_keygates%v", d.Dim, d.KHeads, d.VHeads, d.State, d.KeyGates), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(d.Dim), 5))
				const n = 70
				D, Hk, Hv := d.Dim, d.KHeads, d.VHeads
				q, k, v, g, beta := deltaInputs(rng, n, d)
				state := randF32(rng, Hv*D*D, 0.1)
				run := func(e *Engine) []float32 {
					b := testBackend(e)
					defer b.Close()
					st := b.put(t, Hv*D, D, state)
					o := b.Alloc(n, Hv*D)
					b.DeltaNet(o, b.put(t, n, Hk*D, q), b.put(t, n, Hk*D, k), b.put(t, n, Hv*D, v), b.put(t, n, d.GateCols(), g), b.put(t, n, Hv, beta), st, &d)
					out := append(b.Read(o), b.Read(st)...)
					if err := b.Err(); err != nil {
						t.Fatal(err)
					}
					return out
				}
				a, b := run(sim), run(host)
				// A step's expf that rounds apart moves what follows by an
				// ulp of the state, many ulps of an output that cancels
				// to near 0: the differences are bounded by the scale.
				differ, scale, worst := 0, 0.0, 0.0
				for i := range a {
					scale = max(scale, math.Abs(float64(a[i])))
					if a[i] != b[i] {
						differ++
						worst = max(worst, math.Abs(float64(a[i]-b[i])))
					}
				}
				t.Logf("simDeltaNet vs delta_net: %d of %d values differ, by at most %.2g of the largest", differ, len(a), worst/scale)
				if differ*50 > len(a) || worst > 5e-8*scale {
					t.Errorf("simDeltaNet vs delta_net: %d of %d values differ (at most 2%%), by up to %.2g of the largest (at most 5e-8)", differ, len(a), worst/scale)
				}
			})
		}
	})
}

// halfULPs is the distance between two halves of one type in units of the
// last place (across zero when the signs differ); 0 for two NaNs.
func halfULPs(a, b uint16) int {
	ord := func(h uint16) int {
		if h&0x8000 != 0 {
			return -int(h & 0x7fff)
		}
		return int(h)
	}
	if a == b || a&0x7fff > 0x7f80 && b&0x7fff > 0x7f80 {
		return 0
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}
