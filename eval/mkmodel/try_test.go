package mkmodel

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ppl.dev/eval/bpe"
)

func pplOf(seqs [][]int32, logit func(i int32, out []float64), v int) float64 {
	var nll float64
	var n int
	buf := make([]float64, v)
	for _, s := range seqs {
		for k := 0; k+1 < len(s); k++ {
			logit(s[k], buf)
			mx := math.Inf(-1)
			for _, x := range buf {
				mx = max(mx, x)
			}
			var se float64
			for _, x := range buf {
				se += math.Exp(x - mx)
			}
			nll -= buf[s[k+1]] - mx - math.Log(se)
			n++
		}
	}
	return math.Exp(nll / float64(n))
}

func TestTry(t *testing.T) {
	files, _ := filepath.Glob("../corpora/ppl-heldout-v1/*/*.txt")
	var texts, en [][]byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		texts = append(texts, b)
		if filepath.Base(filepath.Dir(f)) == "en" {
			en = append(en, b)
		}
	}
	for _, size := range []int{2048} {
		voc, _ := bpe.Train(texts, bpe.TrainOptions{Size: size, Special: []string{"<|endoftext|>"}})
		var seqs, enseq, shseq [][]int32
		for _, x := range texts {
			seqs = append(seqs, voc.Encode(x))
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for _, x := range en {
			enseq = append(enseq, voc.Encode(x))
			y := append([]byte(nil), x...)
			rng.Shuffle(len(y), func(i, j int) { y[i], y[j] = y[j], y[i] })
			shseq = append(shseq, voc.Encode(y))
		}
		v := voc.Size()
		counts, _ := CountBigrams(v, seqs)
		for _, alpha := range []float64{0.5} {
			g := &Bigram{V: v, Alpha: alpha, Beta: 0.5, Counts: counts}
			l := g.LogProbs()
			full := func(i int32, out []float64) { copy(out, l.row(int(i))) }
			t.Logf("V=%d alpha=%g exact: en %.2f shuffled %.2f", v, alpha, pplOf(enseq, full, v), pplOf(shseq, full, v))
			for _, r := range []int{126} {
				t0 := time.Now()
				g.Rank = r
				if err := g.Factor(1); err != nil {
					t.Fatal(err)
				}
				lr := func(i int32, out []float64) {
					a := g.A.row(int(i))
					for j := range out {
						out[j] = dot(a, g.B.row(j))
					}
				}
				t.Logf("  rank %d: en %.2f shuffled %.2f (%v)", r, pplOf(enseq, lr, v), pplOf(shseq, lr, v), time.Since(t0))
				for step := 0; step < 3; step++ {
					t0 = time.Now()
					loss := g.refine(5, 0.05)
					t.Logf("  refine %d: loss %.3f en %.2f shuffled %.2f (%v)", (step+1)*5, loss, pplOf(enseq, lr, v), pplOf(shseq, lr, v), time.Since(t0))
				}
			}
		}
	}
}
