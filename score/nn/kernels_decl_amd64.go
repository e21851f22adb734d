package nn

// Declarations of the assembly kernels of kernels_amd64.s (see gen/main.go).

//go:noescape
func gemmF32x32m1(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m3(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m4(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m5(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m6(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m7(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m8(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m9(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m10(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m11(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m12(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m1(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m3(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m4(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m5(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m6(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m7(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m8(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m9(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m10(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m11(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m12(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m1AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x32m2AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m1AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m2AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m3AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func gemmF32x16m4AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

//go:noescape
func softmaxTileAVX512(s *float32, rows int, lim *int32, scale float32, m *float32, l *float32, alpha *float32)

//go:noescape
func transpose16AVX512(dst *uint32, dstStride int, src *uint32, srcStride int, tiles int)

//go:noescape
func swiglu32AVX512(out *float32, gate *float32, up *float32, n int)

//go:noescape
func expSumAVX512(x *float32, n int, m float32) float64

//go:noescape
func int8g32m1VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m2VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m3VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m4VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m5VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m6VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm1VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm2VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm3VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm4VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm5VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm6VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m1VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m2VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m3VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m4VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m5VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m6VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm1VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm2VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm3VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm4VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm5VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm6VNNI(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func quantQ80AVX512(x *float32, nb int, rec *byte, dOff, xs16Off int)

//go:noescape
func quantQ8KAVX512(x *float32, nb int, rec *byte, dOff, xs16Off int)

//go:noescape
func roundF16AVX512(dst, x *float32, n int)

//go:noescape
func int8g32m1W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m2W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m3W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m4W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m5W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m6W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32m1W256(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm1W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm2W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm3W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm4W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm5W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm6W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g32minm1W256(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m1W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m2W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m3W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m4W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m5W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m6W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16m1W256(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm1W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm2W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm3W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm4W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm5W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm6W512(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func int8g16minm1W256(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

//go:noescape
func sumSquaresAVX512(x *float32, n int) float64

//go:noescape
func scaleRowAVX512(out, x, w *float32, n int, scale float64)
