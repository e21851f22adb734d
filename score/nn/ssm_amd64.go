package nn

// The recurrent layers' kernels (ssm_amd64.s): the selective scan's
// ssmRowsGGMLGeneric's vector part in the AVX-512 build's lanes and in the
// AVX2 build's, and ssmRowsF32Generic in vectors of 16 and 8 rows; and
// deltaRowsGGMLGeneric (the delta rule's token) in both builds' lanes.

//go:noescape
func ssmGGMLAVX512(s *float32, n int, b, c, x *float32, rows, np int, dA, d float32, y *float32)

//go:noescape
func ssmGGMLAVX2(s *float32, n int, b, c, x *float32, rows, np int, dA, d float32, y *float32)

//go:noescape
func ssmF32AVX512(s *float32, p int, b, c *float32, n int, xd *float32, dA float32, y *float32)

//go:noescape
func ssmF32AVX2(s *float32, p int, b, c *float32, n int, xd *float32, dA float32, y *float32)

//go:noescape
func deltaGGMLAVX512(m *float32, d int, k, q, v *float32, e, b, scale float32, out *float32)

//go:noescape
func deltaGGMLAVX2(m *float32, d int, k, q, v *float32, e, b, scale float32, out *float32)
