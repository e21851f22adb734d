package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/kernels"
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
			}{{7, 2, 32, false}, {7, 2, 32, true}, {3, 5, 256, false}, {4, 4, 8, true}, {6, 3, 48, true}} {
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
