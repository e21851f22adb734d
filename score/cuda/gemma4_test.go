package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// glu_f32 (gemma4.cu) against the nn activations it emulates, with gates
// and ups past gpt-oss's clamps, in place on the gate as gemma4 calls it;
// and its ungated ReLU², which GLU refuses.
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
		}{{ml.SwiGLU, nn.SwiGLU}, {ml.GeGLU, nn.GeGLU}, {ml.OAISwiGLU, nn.OAISwiGLU}, {ml.ReGLU, nn.ReGLU}} {
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

		// The ungated ReLU² (an MLP's glu_f32, up 0) in place, exact:
		// negatives, both zeros, NaN, infinities, squares that underflow
		// to subnormals and 0 and that overflow.
		x := randF32(rng, rows*f, 4)
		copy(x, []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), 0, float32(math.Inf(1)), float32(math.Inf(-1)),
			1e-30, -1e-30, 1e-20, 3e19, -3e19, math.MaxFloat32, math.SmallestNonzeroFloat32, -7})
		want := make([]float32, rows*f)
		nn.ReLUSqr(want, x, nil)
		xp := devPut(t, e, x)
		do(t, e, func() error { return e.gluF32(xp, xp, 0, int64(len(x)), ml.ReLUSqr, 0, 0) })
		var bc bitCompare
		for i, v := range devGet[float32](t, e, xp, len(x)) {
			bc.add(v, want[i], i)
		}
		bc.check(t, "glu_f32 relu2 (exact)", 0, 0)

		// Step-3.5's clamped SwiGLU (an MLP's glu_f32 with its limit),
		// which GLU refuses (it has no limit): in place on the gate.
		nn.ClampSwiGLU(0.5)(want, gate, up)
		gp, upp := devPut(t, e, gate), devPut(t, e, up)
		do(t, e, func() error { return e.gluF32(gp, gp, upp, int64(len(gate)), ml.ClampSwiGLU, 0.5, 0) })
		bc = bitCompare{}
		for i, v := range devGet[float32](t, e, gp, len(gate)) {
			bc.add(v, want[i], i)
		}
		bc.check(t, "glu_f32 swiglu-clamp", 1, 1e-2)

		// Maple's SWIGLU_CLAMP, its input clamped, the same way.
		nn.SwiGLUClampIn(0.5)(want, gate, up)
		gp = devPut(t, e, gate)
		do(t, e, func() error { return e.gluF32(gp, gp, upp, int64(len(gate)), ml.SwiGLUClampIn, 0.5, 0) })
		bc = bitCompare{}
		for i, v := range devGet[float32](t, e, gp, len(gate)) {
			bc.add(v, want[i], i)
		}
		bc.check(t, "glu_f32 swiglu-clamp-in", 1, 1e-2)

		// The ungated GELU the same way, to its float64 reference.
		nn.GELU(want, x, nil)
		xp = devPut(t, e, x)
		do(t, e, func() error { return e.gluF32(xp, xp, 0, int64(len(x)), ml.GELU, 0, 0) })
		bc = bitCompare{}
		for i, v := range devGet[float32](t, e, xp, len(x)) {
			bc.add(v, want[i], i)
		}
		bc.check(t, "glu_f32 gelu", 0, 0)

		// The ungated SiLU (K2-Horizon's value experts) the same way, to
		// its float64 reference: NaN, zeros, infinities, the extremes.
		copy(want, x)
		nn.SiLU32(want)
		xp = devPut(t, e, x)
		do(t, e, func() error { return e.gluF32(xp, xp, 0, int64(len(x)), ml.SiLU, 0, 0) })
		bc = bitCompare{}
		for i, v := range devGet[float32](t, e, xp, len(x)) {
			bc.add(v, want[i], i)
		}
		bc.check(t, "glu_f32 silu", 1, 1e-3)

		defer func() {
			if recover() == nil {
				t.Error("GLU with the ungated ReLU² did not panic")
			}
		}()
		b.GLU(b.Alloc(rows, f), b.Alloc(rows, f), b.Alloc(rows, f), ml.ReLUSqr)
	})
}
