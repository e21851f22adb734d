package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// glu_f32 (gemma4.cu) against the nn activations it emulates, with gates
// and ups past gpt-oss's clamps, in place on the gate as gemma4 calls it.
func TestGLUF32Parity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(44, 1))
		const rows, f = 5, 77
		gate, up := randF32(rng, rows*f, 4), randF32(rng, rows*f, 4)
		gate[0], up[1], up[2], gate[3] = 9, 12, -30, -800
		for _, c := range []struct {
			act ml.Act
			ref func(out, gate, up []float32)
		}{{ml.SwiGLU, nn.SwiGLU}, {ml.GeGLU, nn.GeGLU}, {ml.OAISwiGLU, nn.OAISwiGLU}} {
			want := make([]float32, rows*f)
			c.ref(want, gate, up)
			gt, ut := b.put(t, rows, f, gate), b.put(t, rows, f, up)
			b.GLU(gt, gt, ut, c.act)
			got := b.Read(gt)
			var bc bitCompare
			for i := range got {
				bc.add(got[i], want[i], i)
			}
			// tanh and exp in float64 within an ulp of Go's: equal after
			// rounding but for ties.
			bc.check(t, fmt.Sprintf("glu_f32 %v", c.act), 1, 1e-2)
		}
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
	})
}
