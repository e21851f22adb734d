package model

import (
	"path/filepath"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
)

// amxShape gives genModel's llama matrices whose inputs and rows are
// multiples of 256, so that llama.cpp's AMX buffer takes every one of
// them in every type it has kernels for (nn.AMXTaken).
func amxShape(s *mkmodel.Shape) { s.Embd, s.Heads, s.KVHeads, s.HeadDim, s.FFN = 256, 4, 2, 64, 512 }

// TestGeneratedAMX holds --activations int8-amx to llama.cpp 0.7.0's CPU
// build for CPUs with AMX-INT8 (Debian's libggml-cpu-sapphirerapids, on an
// Intel Xeon with AMX-INT8): genModel's llama in each type the AMX buffer
// takes, a mixture (its experts not in the AMX buffer), a tied head and a
// phi3 whose fused attn_qkv the buffer takes though its k and v parts
// alone would not be, scored in the first windows of 128 tokens (stride
// 64) of en-gpl3 with an f16 cache, against llama.cpp's sums of log-probs
// per window on the same bytes. int8 (the AVX-512 build's order) was
// 0.012 (F16) to 0.74 (Q4_K_M) off those sums; the phi3's parts taken by
// their own rows, 0.16.
func TestGeneratedAMX(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := golden.Header.Tokens
	for _, c := range []struct {
		typ, sha256 string
		variant     string    // "moe": 4 experts, 2 used, theirs not in the AMX buffer; "tied": the head the token embedding, 32000 rows; "phi3": attn_qkv of 64+16+16 rows (parts not multiples of 32, the tensor one)
		sums        []float64 // llama.cpp's with AMX
	}{
		{"Q8_0", "a67da97f3fe0c94e335959bb544bff4d89e38266183307614a19191a815fcf46", "",
			[]float64{-1622.9626118, -785.6311900, -791.5510963, -770.3074168, -788.3085866, -781.3254129}},
		{"Q4_0", "e5343caf2525ec6e7d744af52f8f2ba65acc4b936675b6d0b11e3bb1344ad77f", "",
			[]float64{-1622.7010834, -780.5169105, -794.0662840, -766.2484550, -789.1939117, -781.9268294}},
		{"Q4_1", "d0aa33239a7c54063aecf9a4768c198a77b5d58ed24bf9a94284ded046d1b304", "",
			[]float64{-1623.0858482, -785.0038301, -791.8724030, -771.7244541, -783.0152560, -783.3830136}},
		{"Q4_K_M", "b1fb825e93417d0338645e98f1002f04dbe1adf318d49ddddb4473c82a531980", "",
			[]float64{-1621.2956371, -787.8880044, -794.4528614, -773.1483506, -787.6189753, -782.7577125}},
		{"Q5_K_M", "cb4ac8835b69e56e171d72b81a7bce1db7ccd02775b7fb9c83a131fa7a7759e2", "",
			[]float64{-1626.3959493, -788.2228128, -793.3911894, -770.0783637, -787.7171735, -781.4384443}},
		{"Q6_K", "40db890ee53cc7ba658acc7482cddc4508308ea662e148c2a8556848cf1eced0", "",
			[]float64{-1624.3637053, -786.5606934, -790.7503396, -768.8846505, -787.7908914, -780.2833190}},
		{"Q8_0", "0fe08eb7b9d84fa2bf6507f3b59f1d27293e8de40f30d83782bcf543bda58924", "moe",
			[]float64{-1615.1246615, -797.7797717, -804.8453095, -759.4801597, -795.5063847, -782.5853588}},
		{"Q8_0", "e98b32518d205c0a25ca48cd6c9e590681234b52fa0630880da293e9deecdf2f", "tied",
			[]float64{-1537.0348172, -776.8841872, -794.2213800, -805.3829919, -790.6316155, -806.2276618}},
		{"Q8_0", "b96738924cd0521ce01f96d4c21c94138ae55d4b7740486668b6c8d7db0f81ab", "phi3",
			[]float64{-1585.5698649, -815.4715545, -808.5850187, -796.5387736, -786.2860268, -792.9755260}},
		{"F16", "f4164da2636d30e2992fb00197eea4c67fbe9c21787343ac225aa2e491519c67", "",
			[]float64{-1622.5665574, -785.5218764, -791.5230842, -769.8716618, -788.2342144, -781.1831908}},
	} {
		t.Run(c.typ+c.variant, func(t *testing.T) {
			arch := "llama"
			if c.variant == "phi3" {
				arch = "phi3"
			}
			path := genModelType(t, dir, arch, c.typ, func(s *mkmodel.Shape) {
				amxShape(s)
				switch c.variant {
				case "moe":
					s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 2, s.FFN
				case "tied":
					s.Tied, s.Vocab = true, 32000
				case "phi3":
					s.Embd, s.Heads, s.KVHeads, s.HeadDim = 64, 4, 1, 16
				}
			})
			checkSHA(t, path, c.sha256)
			m, err := Load(path, Options{KVDtype: "f16", Activations: ActInt8AMX, Context: 128})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			scoreSums(t, m, c.typ, tokens, slidingWindows(len(c.sums)), c.sums, 1e-6)
		})
	}
}
