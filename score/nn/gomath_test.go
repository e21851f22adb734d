package nn

import (
	"math"
	"testing"
)

// The digest is the same at every call and moves when one function's one
// result moves by an ulp.
func TestGoMath(t *testing.T) {
	d := mathDigest(goMathFuncs)
	if len(d) != 12 || GoMath() != d || mathDigest(goMathFuncs) != d {
		t.Fatalf("digest %q, GoMath %q", d, GoMath())
	}
	for i, p := range goMathFuncs {
		off := make([]probe, len(goMathFuncs))
		copy(off, goMathFuncs)
		n := 0
		off[i].f = func(x float64) float64 {
			n++
			y := p.f(x)
			if n == probeArgs/2 {
				y = math.Nextafter(y, math.Inf(1))
			}
			return y
		}
		if got := mathDigest(off); got == d {
			t.Errorf("%s one ulp off at one argument: digest %s unchanged", p.name, got)
		}
	}
}
