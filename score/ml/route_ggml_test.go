package ml

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The expected values here are libggml 0.27.0's (Debian's llama.cpp 0.7.0
// packages, CPU builds zen4 for AVX-512 and haswell for AVX2), computed from
// the same inputs by nn/testdata/ggml_ops.py: route (build_moe_ffn's routing
// graph: SOFT_MAX or SIGMOID, ADD, ARGSORT, GET_ROWS, SUM_ROWS, CLAMP, DIV,
// SCALE, SET_ROWS) and argsort. PPL_GGML_DUMP=DIR writes the inputs into
// DIR and the commands that compute libggml's outputs there into
// DIR/route.sh and DIR/argsort.sh.

// TestRouteGGML pins a few rows to libggml's chosen experts, in its order,
// and its weights' bits.
func TestRouteGGML(t *testing.T) {
	cases := ggmlRouteTable()
	want := []struct {
		experts []int32
		weights [2][]uint32 // AVX-512 build, AVX2 build
	}{
		{[]int32{2, 4}, [2][]uint32{{0x3f033308, 0x3ef999f2}, {0x3f033307, 0x3ef999f0}}},
		{[]int32{12, 1, 23}, [2][]uint32{{0x3dcc112e, 0x3dc726b9, 0x3dc38f8f}, {0x3dcc112f, 0x3dc726ba, 0x3dc38f8f}}},
		{[]int32{22, 2, 17, 7}, [2][]uint32{{0x3e800000, 0x3e800000, 0x3e800000, 0x3e800000}, {0x3e800000, 0x3e800000, 0x3e800000, 0x3e800000}}},
		{[]int32{1, 8, 2, 9}, [2][]uint32{{0x3f219be4, 0x3f21ddcf, 0x3f1e783b, 0x3f1e0e12}, {0x3f219be4, 0x3f21ddcf, 0x3f1e783b, 0x3f1e0e12}}},
		{[]int32{0, 1}, [2][]uint32{{0x3dce2a0e, 0x3d7a172d}, {0x3dce2a0e, 0x3d7a172d}}},
		{[]int32{2, 4}, [2][]uint32{{0x3f033307, 0x3ef999f0}, {0x3f033307, 0x3ef999f0}}},
	}
	for i, c := range cases {
		for b, avx2 := range []bool{false, true} {
			r := c.r
			r.GGML, r.GGMLAVX2 = true, avx2
			got, err := r.Route(c.logits)
			if err != nil {
				t.Fatal(err)
			}
			for j, e := range want[i].experts {
				w := want[i].weights[b][j]
				if got.Expert[j] != e || math.Float32bits(got.Weight[j]) != w {
					t.Errorf("%s (avx2 %v): choice %d: expert %d weight %#08x, libggml's %d %#08x",
						c.name, avx2, j, got.Expert[j], math.Float32bits(got.Weight[j]), e, w)
				}
			}
		}
	}
}

type ggmlRouteCase struct {
	name   string
	r      Router
	logits []float32
}

func ggmlRouteTable() []ggmlRouteCase {
	row := func(n int, f func(i float64) float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(f(float64(i)))
		}
		return x
	}
	qwen := []float32{0.3, -1.2, 2.1, 0.7, 2.05, -0.4, 1.1, 0}
	return []ggmlRouteCase{
		// The AVX2 build's 8 lanes of ggml_v_expf take the whole row.
		{"softmax, renormalized", Router{Experts: 8, K: 2, Gating: GateSoftmax, Norm: true}, qwen},
		// AVX-512: two lanes of 16, then 8 through expf.
		{"softmax over 40", Router{Experts: 40, K: 3, Gating: GateSoftmax},
			row(40, func(i float64) float64 { return 3 * math.Sin(1.7*i) })},
		// Five equal best logits among 24: std::sort's order, not the index's
		// (the float64 route takes 2, 7, 12, 17).
		{"ties past 16 experts", Router{Experts: 24, K: 4, Gating: GateSoftmax, Norm: true},
			row(24, func(i float64) float64 { return float64(int(i) * 7 % 5) })},
		{"sigmoid, groups, selection bias, scale", Router{Experts: 16, K: 4, Gating: GateSigmoid, Groups: 4, GroupsUsed: 2, Norm: true, Scale: 2.5,
			SelBias: row(16, func(i float64) float64 { return 0.05 * math.Cos(i) })},
			row(16, func(i float64) float64 { return 2 * math.Sin(0.9*i+0.3) })},
		// The two weights sum to 9.8e-6 < 2^-14: divided by 2^-14.
		{"sum below the clamp", Router{Experts: 8, K: 2, Gating: GateSigmoid, Norm: true},
			row(8, func(i float64) float64 { return -12 - 0.5*i })},
		{"softmax of the selected", Router{Experts: 8, K: 2, Gating: GateSoftmaxSelected}, qwen},
	}
}

// ggmlRouteCases are many rows of each kind of router, ties, huge, tiny and
// -Inf logits, and sums below the clamp included.
func ggmlRouteCases() []ggmlRouteCase {
	r := rand.New(rand.NewPCG(3, 4))
	gen := func(E int, f func() float64) []float32 {
		x := make([]float32, 200*E)
		for i := range x {
			x[i] = float32(f())
		}
		return x
	}
	normal := func(s float64) func() float64 { return func() float64 { return r.NormFloat64() * s } }
	ties := func(levels int, s float64) func() float64 {
		return func() float64 { return float64(r.IntN(levels)) * s }
	}
	mixed := func() float64 {
		switch r.IntN(10) {
		case 0:
			return math.Inf(-1)
		case 1:
			return r.NormFloat64() * 60
		case 2:
			return 1.5
		case 3:
			return r.NormFloat64() * 1e-6
		}
		return r.NormFloat64() * 3
	}
	low := func() float64 { return -12 - 10*r.Float64() }
	bias := func(E int, s float64) []float32 {
		b := make([]float32, E)
		for i := range b {
			b[i] = float32(r.NormFloat64() * s)
		}
		return b
	}
	var cs []ggmlRouteCase
	for _, E := range []int{8, 16, 40, 64, 128} {
		K := min(8, E/4)
		for _, c := range []struct {
			name string
			r    Router
			f    func() float64
		}{
			{"softmax", Router{Gating: GateSoftmax, K: K}, normal(3)},
			{"softmax-norm", Router{Gating: GateSoftmax, K: K, Norm: true}, normal(20)},
			{"softmax-ties", Router{Gating: GateSoftmax, K: K, Norm: true}, ties(4, 0.5)},
			{"softmax-mixed", Router{Gating: GateSoftmax, K: K, Norm: true, Scale: 2.5}, mixed},
			{"sigmoid-bias", Router{Gating: GateSigmoid, K: K, Norm: true, Scale: 2.5, SelBias: bias(E, 0.1)}, normal(3)},
			{"sigmoid-saturated", Router{Gating: GateSigmoid, K: K, Norm: true}, normal(40)},
			{"sigmoid-clamp", Router{Gating: GateSigmoid, K: 2, Norm: true}, low},
			{"selected", Router{Gating: GateSoftmaxSelected, K: K}, normal(3)},
			{"selected-ties", Router{Gating: GateSoftmaxSelected, K: E / 2, Norm: true}, ties(3, 1)},
		} {
			c.r.Experts = E
			cs = append(cs, ggmlRouteCase{fmt.Sprint(c.name, "-", E), c.r, gen(E, c.f)})
		}
	}
	for _, c := range []struct {
		E, K, G, GU int
		f           func() float64
		bias        float64
	}{{16, 4, 4, 2, normal(3), 0.1}, {16, 4, 4, 2, ties(3, 20), 0}, {256, 8, 8, 4, normal(3), 0.1}, {256, 8, 8, 4, ties(3, 20), 0}} {
		cs = append(cs, ggmlRouteCase{fmt.Sprint("groups-", c.E), Router{Experts: c.E, K: c.K, Gating: GateSigmoid, Groups: c.G, GroupsUsed: c.GU,
			Norm: true, Scale: 2.5, SelBias: bias(c.E, c.bias)}, gen(c.E, c.f)})
	}
	return append(cs, ggmlRouteCase{"groups-softmax-64", Router{Experts: 64, K: 6, Gating: GateSoftmax, Groups: 8, GroupsUsed: 3, Norm: true}, gen(64, mixed)})
}

// TestRouteGGMLHashes compares every choice of ggmlRouteCases (expert and
// weight bits) with libggml's, by hash, for both builds.
func TestRouteGGMLHashes(t *testing.T) {
	cases := ggmlRouteCases()
	if dir := os.Getenv("PPL_GGML_DUMP"); dir != "" {
		dumpRouteCases(t, dir, cases)
	}
	for b, want := range []uint64{0x62d16087617de892, 0x54ac5bcffb39b7f3} {
		h := fnv.New64a()
		for _, c := range cases {
			r := c.r
			r.GGML, r.GGMLAVX2 = true, b == 1
			got, err := r.Route(c.logits)
			if err != nil {
				t.Fatal(err)
			}
			for j, e := range got.Expert {
				binary.Write(h, binary.LittleEndian, [2]uint32{uint32(e), math.Float32bits(got.Weight[j])})
			}
		}
		if s := h.Sum64(); s != want {
			t.Errorf("avx2 %v: hash %#x, libggml's %#x", b == 1, s, want)
		}
	}
}

// ggmlSortRows are rows of n = 2..300 values: few distinct values (ties),
// normal values, and McIlroy's adversary against this very quicksort, whose
// rows take introsort's heapsort past its depth limit.
func ggmlSortRows() map[int][][]float32 {
	r := rand.New(rand.NewPCG(7, 9))
	rows := map[int][][]float32{}
	for _, n := range []int{2, 5, 16, 17, 24, 40, 64, 100, 256, 300} {
		for rep := range 8 {
			v := make([]float32, n)
			for i := range v {
				if rep < 6 {
					v[i] = float32(r.IntN(1 + rep))
				} else {
					v[i] = float32(r.NormFloat64())
				}
			}
			rows[n] = append(rows[n], v)
		}
		rows[n] = append(rows[n], antiQuicksort(n))
	}
	return rows
}

// antiQuicksort returns values that make stdSort (hence std::sort) take its
// worst path (M. D. McIlroy, "A killer adversary for quicksort", 1999):
// values are fixed only when compared, the pivot candidate lowest.
func antiQuicksort(n int) []float32 {
	gas := n
	key := make([]int, n)
	for i := range key {
		key[i] = gas
	}
	solid, cand := 0, int32(-1)
	less := func(x, y int32) bool {
		if key[x] == gas && key[y] == gas {
			if x == cand {
				key[x] = solid
			} else {
				key[y] = solid
			}
			solid++
		}
		if key[x] == gas {
			cand = x
		} else if key[y] == gas {
			cand = y
		}
		return key[x] < key[y]
	}
	a := make([]int32, n)
	for i := range a {
		a[i] = int32(i)
	}
	stdSort{a, less}.sort()
	v := make([]float32, n)
	for i, k := range key {
		v[i] = -float32(k) // descending on v is ascending on the keys
	}
	return v
}

// TestGGMLArgsort compares ggmlArgsort with libggml's ARGSORT (std::sort in
// descending order) by hash of the orders.
func TestGGMLArgsort(t *testing.T) {
	rows := ggmlSortRows()
	ns := []int{2, 5, 16, 17, 24, 40, 64, 100, 256, 300}
	if dir := os.Getenv("PPL_GGML_DUMP"); dir != "" {
		var cmds []string
		for _, n := range ns {
			d := filepath.Join(dir, fmt.Sprint("sort", n))
			writeF32(t, filepath.Join(d, "x.bin"), concat(rows[n]))
			cmds = append(cmds, fmt.Sprintf("GX=$GX/sort%d python3 $GX/ggml_ops.py argsort %d", n, n))
		}
		writeScript(t, filepath.Join(dir, "argsort.sh"), cmds)
	}
	h := fnv.New64a()
	for _, n := range ns {
		for _, v := range rows[n] {
			idx := make([]int32, n)
			ggmlArgsort(idx, v)
			binary.Write(h, binary.LittleEndian, idx)
		}
	}
	const want uint64 = 0xfa5a10cd0ee0e2f0
	if s := h.Sum64(); s != want {
		t.Errorf("hash %#x, libggml's %#x", s, want)
	}
}

func concat(rows [][]float32) []float32 {
	var x []float32
	for _, r := range rows {
		x = append(x, r...)
	}
	return x
}

func writeF32(t *testing.T, path string, v []float32) {
	t.Helper()
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeScript writes the commands that compute libggml's outputs, to be run
// as GX=DIR sh SCRIPT where ggml_ops.py is DIR/ggml_ops.py.
func writeScript(t *testing.T, path string, cmds []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(cmds, "\n")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// dumpRouteCases writes the cases' logits and selection biases, and the
// ggml_ops.py route commands for them.
func dumpRouteCases(t *testing.T, dir string, cases []ggmlRouteCase) {
	var cmds []string
	for i, c := range append(ggmlRouteTable(), cases...) {
		d := filepath.Join(dir, fmt.Sprintf("route%02d", i))
		writeF32(t, filepath.Join(d, "x.bin"), c.logits)
		bias, norm := 0, 0
		if c.r.SelBias != nil {
			bias = 1
			writeF32(t, filepath.Join(d, "w.bin"), c.r.SelBias)
		}
		if c.r.Norm {
			norm = 1
		}
		cmds = append(cmds, fmt.Sprintf("GX=$GX/route%02d python3 $GX/ggml_ops.py route %d %d %d %d %v %d %d %d # %s",
			i, c.r.Experts, c.r.K, int(c.r.Gating), norm, c.r.Scale, c.r.Groups, c.r.GroupsUsed, bias, c.name))
	}
	writeScript(t, filepath.Join(dir, "route.sh"), cmds)
}
