package nn

import "math"

// PLEGate is the gate of Qwen3.8's n-gram embeddings (qwen4exp) for one
// token: for each of the len(dst) groups of the rows key and query (E =
// len(key)/len(dst) values each), with d = Σ key·query · scale,
// dst[s] = sigmoid(sign(d)·sqrt(max(|d|, 1e-6))), in float64, rounded
// once (d = 0 gives 1/2).
func PLEGate(dst, key, query []float32, scale float64) {
	check("PLEGate", len(key), len(query))
	E := len(key) / len(dst)
	for s := range dst {
		var d float64
		for e := s * E; e < (s+1)*E; e++ {
			d += float64(float64(key[e]) * float64(query[e]))
		}
		d *= scale
		g := math.Sqrt(max(math.Abs(d), 1e-6))
		if d < 0 {
			g = -g
		} else if d == 0 {
			g = 0
		}
		dst[s] = float32(1 / (1 + math.Exp(-g)))
	}
}

// GGMLPLEGate is PLEGate as llama.cpp's graph rounds it: each product
// rounded to float32 (MUL), the group's sum in float64 rounded to float32
// (SUM_ROWS), times scale in float32 (SCALE), |·| clamped to [1e-6, ∞)
// (float32 1e-6) and sqrtf'd, times the sign (SGN, MUL), then SIGMOID
// with glibc's expf.
func GGMLPLEGate(dst, key, query []float32, scale float32) {
	check("GGMLPLEGate", len(key), len(query))
	E := len(key) / len(dst)
	for s := range dst {
		var sum float64
		for e := s * E; e < (s+1)*E; e++ {
			sum += float64(key[e] * query[e])
		}
		d := float32(sum) * scale
		mag := float32(math.Sqrt(float64(max(float32(math.Abs(float64(d))), float32(1e-6)))))
		var sg float32
		switch {
		case d > 0:
			sg = 1
		case d < 0:
			sg = -1
		}
		dst[s] = 1 / (1 + LibcExpf(-(sg * mag)))
	}
}
