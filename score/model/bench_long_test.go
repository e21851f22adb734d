package model

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
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
