package nn

// RWKV's recurrences' kernels (rwkv_amd64.s): a token of a head of
// WKV7GGML in the AVX-512 build's lanes and the AVX2 build's, and of
// WKV6GGML in vectors of 16.

//go:noescape
func wkv7AVX512(s *float32, d int, r, w, k, v, a, b *float32, np int, out *float32)

//go:noescape
func wkv7AVX2(s *float32, d int, r, w, k, v, a, b *float32, np int, out *float32)

//go:noescape
func wkv6AVX512(s *float32, d int, r, k, v, w, u, y *float32)
