package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// Lightning (lightning.go, kernels/lightning.cu) against nn.LightningRef,
// the float64 definition: 300 tokens (three chunks of 128 keys) over heads
// of 32 and of 128 (MiniMax-01's), the slopes of 8 heads at the first
// layer's scale (the slowest decay: every key counts) and the last's
// (1e-5: hardly any decay), and values of 10³ beside 10⁻³ (sums that
// cancel), within 10⁻⁶ of the sum of the terms' magnitudes: worst 0.26
// of that on the host runtime, 0.29 in the emulation (the CPU's lanes).
func TestLightningParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(71, 1))
		const n, heads = 300, 8
		slopes := nn.LightningSlopes(heads)
		for _, c := range []struct {
			d     int
			scale float32
			big   bool
		}{{32, nn.LightningScale(0, 4), false}, {128, nn.LightningScale(3, 4), false}, {32, nn.LightningScale(1, 4), true}} {
			qkv := randF32(rng, n*heads*3*c.d, 0.5)
			if c.big {
				for i := range qkv {
					if i%7 == 0 {
						qkv[i] *= 1e3
					} else if i%5 == 0 {
						qkv[i] *= 1e-3
					}
				}
			}
			want := make([]float32, n*heads*c.d)
			nn.LightningRef(want, qkv, n, heads, c.d, slopes, c.scale)
			xt, ot := b.put(t, n, heads*3*c.d, qkv), b.Alloc(n, heads*c.d)
			b.Lightning(ot, xt, slopes, c.scale)
			got := b.Read(ot)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			// float32 sums over up to 300 keys of products up to 10⁶·d:
			// relative to the sum of magnitudes.
			mag := make([]float64, len(want))
			w := heads * 3 * c.d
			for j := range n {
				for h := range heads {
					for i := 0; i <= j; i++ {
						qk := 0.0
						for e := range c.d {
							qk += math.Abs(float64(qkv[j*w+h*3*c.d+e]) * float64(qkv[i*w+h*3*c.d+c.d+e]))
						}
						for e := range c.d {
							mag[(j*heads+h)*c.d+e] += qk * math.Abs(float64(qkv[i*w+h*3*c.d+2*c.d+e]))
						}
					}
				}
			}
			worst, where := 0.0, ""
			for i := range want {
				d := math.Abs(float64(got[i]-want[i])) / (1e-6*mag[i] + 1e-30)
				if d != d {
					d = math.Inf(1)
				}
				if d > worst {
					worst, where = d, fmt.Sprintf("element %d: %v vs %v", i, got[i], want[i])
				}
			}
			t.Logf("heads of %d, scale %v, big %v: worst error / tolerance %.3f (%s)", c.d, c.scale, c.big, worst, where)
			if worst > 1 {
				t.Errorf("heads of %d, scale %v: %s (%.3g × tolerance)", c.d, c.scale, where, worst)
			}
		}
	})
}

// TestEndToEndMiniMax01: MiniMax-Text-01's layout (ppl-mkmodel's
// minimax-01: lightning attention in every layer but each second, softmax
// attention in the others, the normed residual joins, experts) on the GPU
// against the CPU, bf16 cache, every expert used, two windows of 256
// scored from 1 and 228. Emulation, 383 targets: max 0.0123, mean 0.00225,
// PPL ratio 1.000126.
func TestEndToEndMiniMax01(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "minimax-01", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, AttnInterval: 2, Experts: 4, ExpertsUsed: 4, ExpertFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		windows := []e2eWindow{{0, 256, 1}, {100, 356, 228}}
		st := e2eCase(t, e, Mixed, path, model.Options{KVDtype: "bf16", Context: 256}, windows, toks, false)
		t.Logf("bf16 cache: %v", st)
		if m := st.sumAbs / float64(st.n); st.maxAbs > 0.02 || m > 0.003 || math.Abs(st.pplRatio()-1) > 0.0003 {
			t.Errorf("bf16 cache: %v; want max |Δ| <= 0.02, mean <= 0.003, |PPL ratio - 1| <= 0.0003", st)
		}
	})
}
