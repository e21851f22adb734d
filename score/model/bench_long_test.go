package model

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// BenchmarkScoreLong scores one window of $PPL_BENCH_TOKENS tokens
// (default 65,536; targets in its second half, as the sliding protocol
// scores a window) of the model at $PPL_BENCH_MODEL, and reports tokens/s
// and the process's peak resident memory. For the Qwen3.5 figures:
//
//	ppl-mkmodel -o q35.gguf --arch qwen35 --params 0.8B --type Q8_0 --vocab-from tiny-qwen35.gguf
//	PPL_BENCH_MODEL=q35.gguf go test -run - -bench ScoreLong -benchtime 1x ./score/model
//
// $PPL_BENCH_ACT, $PPL_BENCH_KV and $PPL_BENCH_SSM set the activations,
// the KV cache and the recurrent state (llama.cpp's arithmetic: int8 and
// f16).
func BenchmarkScoreLong(b *testing.B) {
	path := os.Getenv("PPL_BENCH_MODEL")
	if path == "" {
		b.Skip("set PPL_BENCH_MODEL")
	}
	n := 65536
	if s := os.Getenv("PPL_BENCH_TOKENS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 2 {
			b.Fatalf("PPL_BENCH_TOKENS=%q: want a count of at least 2", s)
		}
		n = v
	}
	m, err := Load(path, Options{Activations: os.Getenv("PPL_BENCH_ACT"), KVDtype: os.Getenv("PPL_BENCH_KV"), SSMStateDtype: os.Getenv("PPL_BENCH_SSM")})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32((i*7919 + 13) % m.Vocab())
	}
	for b.Loop() {
		if _, err := m.Score(toks, n/2); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
	if kb := peakRSSKB(); kb > 0 {
		b.ReportMetric(float64(kb)/1024, "peak-RSS-MB")
	}
}

// peakRSSKB is the process's peak resident set (VmHWM, Linux), or 0.
func peakRSSKB() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	return 0
}

// BenchmarkResidualPasses times the backend's passes over a window's
// residual stream that do no products (4096 tokens × 4096 values: an add,
// a LayerNorm and a scale), which split over the threads: bound by
// memory, each thread brings its share of the bandwidth. Reports millions
// of residual values a second (each through all three passes).
func BenchmarkResidualPasses(b *testing.B) {
	const n, d = 4096, 4096
	be := newCPU(nn.NewContext(0))
	x, y := be.Alloc(n, d), be.Alloc(n, d)
	xs, ys := ct(x).d, ct(y).d
	for i := range xs {
		xs[i], ys[i] = float32(i%97)*0.01, float32(i%89)*0.02
	}
	w := &ml.Vector{Name: "w", V: make([]float32, d)}
	for i := range w.V {
		w.V[i] = 1
	}
	for b.Loop() {
		be.Add(x, y)
		be.LayerNorm(y, x, w, nil, 1e-5)
		be.Scale(x, 0.5)
	}
	b.ReportMetric(float64(n*d)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvalues/s")
}

// BenchmarkKVStore times the KV cache's simulation of one layer's keys
// and values over a window (4096 tokens × 8 heads × 128, f16 and q8_0) on
// one thread and on all, split over them by tokens. Reports millions of
// values a second.
func BenchmarkKVStore(b *testing.B) {
	const tokens, heads, hd = 4096, 8, 128
	for _, name := range []string{"f16", "q8_0"} {
		for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(b *testing.B) {
				f, err := kvcache.Lookup(name)
				if err != nil {
					b.Fatal(err)
				}
				s := &kvStore{format: f, c: nn.NewContext(threads)}
				k, v := make([]float32, tokens*heads*hd), make([]float32, tokens*heads*hd)
				for i := range k {
					k[i], v[i] = float32(i%97)*0.01, float32(i%89)*0.02
				}
				for b.Loop() {
					s.Store(0, k, v, tokens, heads, hd)
				}
				b.ReportMetric(float64(2*len(k))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvalues/s")
			})
		}
	}
}
