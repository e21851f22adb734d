package nn

import "math/big"

// bigFMA is a·b + c computed exactly with big.Float and rounded once to
// float32 (to nearest, ties to even).
func bigFMA(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(300).SetFloat64(float64(a))
	y := new(big.Float).SetPrec(300).SetFloat64(float64(b))
	z := new(big.Float).SetPrec(300).SetFloat64(float64(c))
	x.Mul(x, y)
	x.Add(x, z)
	f, _ := x.Float32()
	return f
}
