package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
	"ppl.dev/quant"
	"ppl.dev/score/cuda/cublas"
)

var (
	gpuOnce sync.Once
	gpuEng  *Engine
	gpuErr  error
	simOnce sync.Once
	simEng  *Engine
)

// gpuEngine returns CUDA device 0, or skips the test saying why there is none.
func gpuEngine(t testing.TB) *Engine {
	t.Helper()
	gpuOnce.Do(func() {
		gpuEng, gpuErr = Open(0)
		if gpuEng != nil {
			gpuEng.SyncEach = true // name the kernel of an asynchronous fault
		}
	})
	if gpuErr != nil {
		if os.Getenv("PPL_REQUIRE_GPU") == "1" { // tests/gpu/check.sh: a missing GPU is a failure there
			t.Fatalf("no GPU, and PPL_REQUIRE_GPU=1: %v", gpuErr)
		}
		t.Skipf("skipping GPU parity test: %v", gpuErr)
	}
	return gpuEng
}

func simEngine() *Engine {
	simOnce.Do(func() { simEng = newSimEngine() })
	return simEng
}

// onDevices runs f on the simulated device and on GPU 0 (when there is one).
func onDevices(t *testing.T, f func(t *testing.T, e *Engine)) {
	t.Run("sim", func(t *testing.T) { f(t, simEngine()) })
	t.Run("gpu", func(t *testing.T) { f(t, gpuEngine(t)) })
}

// do runs f on the engine and fails the test on error.
func do(t testing.TB, e *Engine, f func() error) {
	t.Helper()
	if err := e.Do(func() error {
		if err := f(); err != nil {
			return err
		}
		return e.sync("test")
	}); err != nil {
		t.Fatal(err)
	}
}

// devAlloc allocates device memory freed when the test ends.
func devAlloc(t testing.TB, e *Engine, bytes int64) ptr {
	t.Helper()
	var b buf
	do(t, e, func() error {
		var err error
		b, err = e.alloc(bytes)
		return err
	})
	t.Cleanup(func() { e.Do(func() error { return e.release(&b) }) })
	return b.p
}

// devPut copies v to new device memory.
func devPut[T any](t testing.TB, e *Engine, v []T) ptr {
	t.Helper()
	var z T
	p := devAlloc(t, e, int64(len(v))*int64(unsafe.Sizeof(z)))
	do(t, e, func() error { return upload(e, p, v) })
	return p
}

// devGet copies n values from device memory.
func devGet[T any](t testing.TB, e *Engine, p ptr, n int) []T {
	t.Helper()
	out := make([]T, n)
	do(t, e, func() error { return download(e, out, p) })
	return out
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	return v
}

func randBF16(rng *rand.Rand, n int, scale float64) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		v[i] = quant.F32ToBF16(float32(rng.NormFloat64() * scale))
	}
	return v
}

func toBF16(v []float32) []uint16 {
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = quant.F32ToBF16(x)
	}
	return out
}

func fromHalf(v []uint16, t cublas.DataType) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = halfToF32(x, isF16(t))
	}
	return out
}

// ulps is the distance in units of the last place between two float32s of
// the same sign (large when the signs differ or one is NaN).
func ulps(a, b float32) int64 {
	if a == b || (a != a && b != b) {
		return 0
	}
	if a != a || b != b || math.Signbit(float64(a)) != math.Signbit(float64(b)) {
		return math.MaxInt64
	}
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

// worstError returns the largest |got - want| / (abs + rel·|want|) over
// the elements, and where it is; a NaN is infinitely far.
func worstError(got, want []float32, abs, rel float64) (worst float64, at int) {
	for i := range want {
		d := math.Abs(float64(got[i]-want[i])) / (abs + rel*math.Abs(float64(want[i])))
		if d != d {
			d = math.Inf(1)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

// sameBits reports whether two float32s are the same bits, any two NaNs
// counting as equal (CUDA writes its canonical NaN, whatever the payload).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// bitCompare counts elements that differ and the largest ulp distance,
// for float32 results that should be (nearly) bit-identical.
type bitCompare struct {
	n, differ int
	maxULP    int64
	worst     string
}

func (c *bitCompare) add(got, want float32, where int) {
	c.n++
	if u := ulps(got, want); u != 0 {
		c.differ++
		if u > c.maxULP {
			c.maxULP, c.worst = u, fmt.Sprintf("element %d: got %v, want %v", where, got, want)
		}
	}
}

func (c *bitCompare) check(t testing.TB, what string, maxULP int64, maxFrac float64) {
	t.Helper()
	t.Logf("%s: %d of %d elements differ, at most %d ulp %s", what, c.differ, c.n, c.maxULP, c.worst)
	if c.maxULP > maxULP || float64(c.differ) > maxFrac*float64(c.n) {
		t.Errorf("%s: %d of %d elements differ (allowed %.2g%%), up to %d ulp (allowed %d); worst %s",
			what, c.differ, c.n, 100*maxFrac, c.maxULP, maxULP, c.worst)
	}
}

// storeKV writes k and v (n tokens × kvheads × hd) into a new cache pair
// of formats kid and vid on e, as a layer stores them, and frees it when
// the test ends.
func storeKV(t *testing.T, e *Engine, kid, vid int, k, v []float32, n, kvheads, hd int) (kt, vt *kvTensor) {
	t.Helper()
	groups := int64(n * kvheads)
	do(t, e, func() error {
		var err error
		if kt, err = e.newKV(kid, groups, hd); err != nil {
			return err
		}
		vt, err = e.newKV(vid, groups, hd)
		return err
	})
	t.Cleanup(func() { e.Do(func() error { e.freeKV(kt); e.freeKV(vt); return nil }) })
	kp, vp := devPut(t, e, k), devPut(t, e, v)
	do(t, e, func() error {
		if err := e.kvStore(kt, kp, n, kvheads, hd); err != nil {
			return err
		}
		return e.kvStore(vt, vp, n, kvheads, hd)
	})
	return kt, vt
}

// q8Vocab returns the oracle's directory, the tokenizer of its
// tiny-llama-spm-q8_0 and the Q8_0 file type: what the tests that write
// models with ppl-mkmodel's generator use; skipped where the GPU bundle
// lacks that model.
func q8Vocab(t *testing.T) (string, mkmodel.Tokenizer, mkmodel.FileType) {
	t.Helper()
	dir := oracle.Require(t)
	vocab := oracle.Model(dir, "tiny-llama-spm-q8_0")
	if _, err := os.Stat(vocab); err != nil {
		t.Skipf("skipping: %v", err) // a GPU bundle without it
	}
	tok, err := mkmodel.TokenizerFrom(vocab)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := mkmodel.LookupFileType("Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	return dir, tok, ft
}

// genQ8 writes a Q8_0 model of shape s with q8Vocab's vocabulary (seed 1)
// to a temporary file.
func genQ8(t *testing.T, s mkmodel.Shape) string {
	t.Helper()
	_, tok, ft := q8Vocab(t)
	s.Vocab = tok.NVocab
	path := filepath.Join(t.TempDir(), s.Arch+".gguf")
	if err := mkmodel.Write(path, &mkmodel.Config{Shape: s, Type: ft, Seed: 1, Tokenizer: tok, Residual: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}
