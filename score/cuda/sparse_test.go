package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// IndexKeys (sparse.go, kernels/sparse.cu: DSA's scores and top_k on the
// device, ties past the last place on the host) against nn.LightningTopK
// over the same inputs, as the CPU backend computes it (q and k rotated,
// k through the bf16 cache): 300 rows, 4 heads of 32, top_k 40, the rows
// in blocks of 24 (indexerProducts lowered). Queries, keys and weights of small integers make every
// product and sum exact in any order: the scores are the CPU's to the bit
// and so are the sets, ties (the many equal integer scores, relu's zeros)
// broken as ggml's TOP_K. A NaN in one head's query of row 150 makes
// every score of that row NaN, as the CPU's relu keeps it (with fmaxf's
// zero the row's choice was the other heads': 56 keys apart). Rotated,
// the scores differ by roundings and near ties go either way: measured 6
// of the 11,220 chosen keys apart.
func TestIndexKeysParity(t *testing.T) {
	defer func(v int) { indexerProducts = v }(indexerProducts)
	indexerProducts = 24 * 4 * 300
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(73, 1))
		const n, heads, dim, topK, nanRow = 300, 4, 32, 40, 150
		ints := func(m, lo, hi int) []float32 {
			v := make([]float32, m)
			for i := range v {
				v[i] = float32(lo + rng.IntN(hi-lo+1))
			}
			return v
		}
		q, k, w := ints(n*heads*dim, -2, 2), ints(n*dim, -2, 2), ints(n*heads, -1, 2)
		q[(nanRow*heads+1)*dim+3] = float32(math.NaN()) // one head's products of a row
		for _, rotate := range []bool{false, true} {
			qr, kr := append([]float32(nil), q...), append([]float32(nil), k...)
			c := nn.NewContext(0)
			if rotate {
				rot := nn.HadamardMatrix(dim)
				rot.Forward(c, qr, q, n*heads)
				rot.Forward(c, kr, k, n)
			}
			var blk kvcache.Block
			kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, n, 1, dim)
			want := nn.LightningTopK(c, qr, kr, w, n, heads, dim, topK)
			got := hostKeys(t, b, b.IndexKeys(b.put(t, n, heads*dim, q), b.put(t, n, dim, k), b.put(t, n, heads, w), heads, topK, rotate))
			apart, chosen := 0, 0
			for i := range n {
				for j := 0; j <= i; j++ {
					if want.Has(i, j) {
						chosen++
					}
					if got.Has(i, j) != want.Has(i, j) {
						apart++
					}
				}
			}
			t.Logf("rotate %v: %d of %d chosen keys apart", rotate, apart, chosen)
			if bound := map[bool]int{false: 0, true: 12}[rotate]; apart > bound {
				t.Errorf("rotate %v: %d of %d chosen keys apart, want at most %d", rotate, apart, chosen, bound)
			}
		}
	})
}

// top_keys against nn.TopKeys (ggml's TOP_K) on 40 rows of 640 to 679
// keys, top_k 37, each row's flag against the definition
// (topKeysSettled): normal scores; small integers (equal scores at the
// last place: the host's); exactly as many zeros, -0 among them, or +Inf
// as fit after the scores above them (settled: every one chosen) and one
// more (the host's); -Inf keys; a NaN; neighbours one ulp apart; scores
// all negative, subnormal. Settled rows to the bit, the others 0.
func TestTopKeysParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(75, 1))
		const rows, r0, topK = 40, 639, 37
		const ld, words = r0 + rows, (r0 + rows + 63) / 64
		inf := float32(math.Inf(1))
		sc := make([]float32, rows*ld)
		for r := range rows {
			row := sc[r*ld : r*ld+r0+r+1]
			for j := range row {
				row[j] = float32(rng.NormFloat64())
			}
			fill := func(v float32, count int) { // count keys of v, the rest below -1
				for j := range row {
					row[j] = -1 - float32(rng.IntN(1000))
				}
				for _, j := range rng.Perm(len(row))[:count] {
					row[j] = v
				}
			}
			switch r % 10 {
			case 1:
				for j := range row {
					row[j] = float32(rng.IntN(7) - 3)
				}
			case 2, 3: // 20 above zero, then zeros (every other one -0) to fill, or one more
				fill(0, 0)
				for i, j := range rng.Perm(len(row))[:topK+r%10-2] {
					switch {
					case i < 20:
						row[j] = 1 + float32(rng.IntN(1000))
					case i%2 == 0:
						row[j] = float32(math.Copysign(0, -1))
					default:
						row[j] = 0
					}
				}
			case 4, 5:
				fill(inf, topK+r%10-4)
			case 6:
				for j := range row {
					if j%3 != 0 {
						row[j] = -inf
					}
				}
			case 7:
				row[rng.IntN(len(row))] = float32(math.NaN())
			case 8:
				base, perm := rng.Uint32()>>2, rng.Perm(len(row))
				for j := range row {
					row[j] = math.Float32frombits(base + uint32(perm[j]))
				}
			case 9:
				for j := range row {
					row[j] = -math.Float32frombits(uint32(rng.IntN(1 << 23)))
				}
			}
		}
		wd, fl := devAlloc(t, e, 8*rows*words), devAlloc(t, e, 4*rows)
		scp := devPut(t, e, sc)
		do(t, e, func() error { return e.topKeys(wd, fl, scp, rows, ld, words, r0, topK, candidates{1, 0, 1}) })
		got, flags := devGet[uint64](t, e, wd, rows*words), devGet[int32](t, e, fl, rows)
		order := make([]int32, ld)
		settled := 0
		for r := range rows {
			i := r0 + r
			_, ok := topKeysSettled(sc[r*ld:r*ld+i+1], topK)
			if flags[r] != int32(b2i(!ok)) {
				t.Errorf("row %d (case %d): flag %d, want %d", r, r%10, flags[r], b2i(!ok))
				continue
			}
			want := nn.NewKeySet(ld)
			if ok {
				settled++
				for _, j := range nn.TopKeys(sc[r*ld:r*ld+i+1], order[:i+1], topK) {
					want.Add(i, int(j))
				}
			}
			if w := want.Words()[i*words : (i+1)*words]; !slices.Equal(got[r*words:(r+1)*words], w) {
				t.Errorf("row %d (case %d, settled %v): bitmap %x, want %x", r, r%10, ok, got[r*words:(r+1)*words], w)
			}
		}
		if settled != 24 {
			t.Errorf("%d of %d rows settled on the device, want 24 (cases 1, 3, 5, 7 the host's)", settled, rows)
		}
	})
}

// sparseInputs returns m values: small integers in [lo, hi] (every
// product and sum exact in any order) or, with normal, normal floats.
func sparseInputs(rng *rand.Rand, m, lo, hi int, normal bool) []float32 {
	v := make([]float32, m)
	for i := range v {
		if normal {
			v[i] = float32(rng.NormFloat64())
		} else {
			v[i] = float32(lo + rng.IntN(hi-lo+1))
		}
	}
	return v
}

// hostKeys reads s, the set b chose last, back from the device, failing t
// where b failed or s is not that set.
func hostKeys(t *testing.T, b *gpuBackend, s ml.KeySet) *nn.KeySet {
	t.Helper()
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	d, ok := s.(*deviceKeys)
	if !ok || d != b.keysOf {
		t.Fatalf("a key set (%T) other than the one the backend chose last", s)
	}
	h := nn.NewKeySets(d.n, d.groups)
	copy(h.Words(), devGet[uint64](t, b.e, b.keys.p, len(h.Words())))
	return h
}

// keysApart counts the keys j <= i of every row and group that a and b
// do not both hold or leave out, and those b holds.
func keysApart(a, b *nn.KeySet, n int) (apart, chosen int) {
	for g := range b.Groups() {
		for i := range n {
			for j := 0; j <= i; j++ {
				chosen += b2i(b.HasIn(g, i, j))
				apart += b2i(a.HasIn(g, i, j) != b.HasIn(g, i, j))
			}
		}
	}
	return apart, chosen
}

// BlockKeys (sparse.go: MSA's block scores and choice on the device)
// against nn.MSABlocks over the same inputs, k through the bf16 cache:
// 200 rows, 3 indexer heads of 16, blocks of 8, top 6 with the 2 local,
// chunks of 80 rows (indexerProducts lowered). Small integers make every
// product exact: the sets are the CPU's to the key (the many equal
// scores chosen on the host, as ggml's TOP_K), the CPU's float and ggml
// products alike. Normal floats: cuBLAS's products differ by roundings
// from the CPU's, measured 0 of the 23,820 chosen keys apart.
func TestBlockKeysParity(t *testing.T) {
	defer func(v int) { indexerProducts = v }(indexerProducts)
	const n, heads, dim, block, topK, local = 200, 3, 16, 8, 6, 2
	indexerProducts = 80 * heads * n
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(77, 1))
		for _, normal := range []bool{false, true} {
			q, k := sparseInputs(rng, n*heads*dim, -2, 2, normal), sparseInputs(rng, n*dim, -2, 2, normal)
			kr := slices.Clone(k)
			var blk kvcache.Block
			kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, n, 1, dim)
			got := hostKeys(t, b, b.BlockKeys(b.put(t, n, heads*dim, q), b.put(t, n, dim, k), heads, block, topK, local))
			for _, ggml := range []bool{false, true} {
				want := nn.MSABlocks(nn.NewContext(0), q, kr, n, heads, dim, block, topK, local, ggml)
				apart, chosen := keysApart(got, want, n)
				t.Logf("normal %v, ggml %v: %d of %d chosen keys apart", normal, ggml, apart, chosen)
				if apart > 0 {
					t.Errorf("normal %v, ggml %v: %d of %d chosen keys apart, want 0", normal, ggml, apart, chosen)
				}
			}
		}
	})
}

// PoolKeys, PooledKeys and IndexBlocks (sparse.go, compressed.go: QSA's
// pools, block scores and choice on the device) against nn.QSAPool and
// nn.QSABlocks over the same inputs, keys through the bf16 cache: 120
// rows, 4 heads of 16, blocks of 5, a budget of 30 keys (6 blocks), chunks
// of 30 rows, with the heads' weights (GLM5-Next's) and without
// (1/sqrt(dim)), in both activation modes (the int8 mode's sums fused as
// llama.cpp's, the other's in float64); DeepSeek-V4's q and p turned by
// the Hadamard matrix first. The pools are the CPU's to the bit; with small integers so
// are the sets; with normal floats (the emulator only: the host runtime
// launches a process a kernel) cuBLAS's products differ by roundings,
// measured 0 of the 3,345 chosen keys apart.
func TestPooledKeysParity(t *testing.T) {
	defer func(v int) { indexerProducts = v }(indexerProducts)
	const n, heads, dim, block, topK = 120, 4, 16, 5, 30
	indexerProducts = 30 * heads * (n / block)
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(79, 1))
		k := sparseInputs(rng, n*dim, 0, 0, true)
		kr := slices.Clone(k)
		var blk kvcache.Block
		kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, n, 1, dim)
		want := make([]float32, n*dim)
		nn.QSAPool(want, kr, n, dim, block)
		p := b.Alloc(n, dim)
		b.PoolKeys(p, b.put(t, n, dim, k), nil, nil, block)
		if got := b.Read(p); !slices.EqualFunc(got, want, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
			t.Errorf("pooled keys differ from nn.QSAPool's")
		}
		_, host := e.dev.(*hostDevice)
		for _, normal := range []bool{false, true} {
			for _, c := range []struct{ weighted, int8, rotate bool }{
				{false, false, false}, {false, true, false}, {true, false, false}, {true, true, false}, {true, false, true}, {true, true, true},
			} {
				if host && (normal || c.rotate) { // the host runtime's GEMM is the emulator's
					continue
				}
				q, pk := sparseInputs(rng, n*heads*dim, -2, 2, normal), sparseInputs(rng, n*dim, -2, 2, normal)
				var w []float32
				var wt ml.Tensor
				if c.weighted {
					w = sparseInputs(rng, n*heads, -1, 2, false)
					wt = b.put(t, n, heads, w)
				}
				qt, pt := b.put(t, n, heads*dim, q), b.put(t, n, dim, pk)
				if c.rotate {
					rot, cc := nn.HadamardMatrix(dim), nn.NewContext(0)
					qr, pr := make([]float32, len(q)), make([]float32, len(pk))
					rot.Forward(cc, qr, q, n*heads)
					rot.Forward(cc, pr, pk, n)
					q, pk = qr, pr
				}
				pr := slices.Clone(pk)
				kvcache.RoundTrip(kvcache.BF16{}, &blk, pr, n, 1, dim)
				b.prec.Int8 = c.int8
				var set ml.KeySet
				if c.rotate {
					set = b.IndexBlocks(qt, pt, wt, heads, block, topK/block)
				} else {
					set = b.PooledKeys(qt, pt, wt, heads, block, topK)
				}
				b.prec.Int8 = false
				got := hostKeys(t, b, set)
				want := nn.QSABlocks(nn.NewContext(0), q, pr, w, n, heads, dim, block, topK, c.int8)
				apart, chosen := keysApart(got, want, n)
				t.Logf("normal %v, %+v: %d of %d chosen keys apart", normal, c, apart, chosen)
				if apart > 0 {
					t.Errorf("normal %v, %+v: %d of %d chosen keys apart, want 0", normal, c, apart, chosen)
				}
			}
		}
	})
}

// gated_pool (DeepSeek-V4's and GLM5-Next's compressed keys) against
// nn.GatedPool and nn.OverlapPool, the AVX-512 build's and the AVX2
// build's arithmetic (ggml_v_expf's lanes of 16 or 8, glibc's expf past
// them) and the float64 one: blocks of 4, 5, 16 and 24 (entries all in
// lanes, all past them, both), with and without the overlap, 40 rows of 6
// channels; the gates normal and spread, then a channel of gates 90 apart
// (exponentials that underflow), one of -Inf gates besides finite ones,
// one NaN. llama.cpp's to the bit; float64 within 1 ulp (the device's exp
// is not Go's), measured equal.
func TestGatedPoolParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(81, 1))
		const n, dim = 40, 6
		inf := float32(math.Inf(1))
		for _, block := range []int{4, 5, 16, 24} {
			for _, overlap := range []bool{false, true} {
				w := dim
				if overlap {
					w = 2 * dim
				}
				k, g, ape := sparseInputs(rng, n*w, 0, 0, true), sparseInputs(rng, n*w, 0, 0, true), sparseInputs(rng, block*w, 0, 0, true)
				for i := range g {
					switch d := i % w % dim; {
					case d == 1:
						g[i] = float32(90 * rng.IntN(3))
					case d == 2 && i%3 == 0:
						g[i] = -inf
					case d == 3 && i == 3*w+3:
						g[i] = float32(math.NaN())
					default:
						g[i] *= 4
					}
				}
				kp, gp, ap := devPut(t, e, k), devPut(t, e, g), devPut(t, e, ape)
				out := devAlloc(t, e, 4*n*dim)
				for _, c := range []struct{ ggml, avx2 bool }{{false, false}, {true, false}, {true, true}} {
					do(t, e, func() error {
						return e.launch("gated_pool", gridFor(n*dim), block256, out, kp, gp, ap, n, dim, block, b2i(overlap), b2i(c.ggml), b2i(c.avx2))
					})
					got, want := devGet[float32](t, e, out, n*dim), make([]float32, n*dim)
					if overlap {
						nn.OverlapPool(want, k, g, ape, n, dim, block, c.ggml, c.avx2)
					} else {
						nn.GatedPool(want, k, g, ape, n, dim, block, c.ggml, c.avx2)
					}
					apart := 0
					for i := range want {
						if u := ulps(got[i], want[i]); u > 1 || (u == 1 && c.ggml) {
							t.Errorf("block %d, overlap %v, %+v: row %d channel %d: %g, want %g", block, overlap, c, i/dim, i%dim, got[i], want[i])
						} else if u != 0 {
							apart++
						}
					}
					if apart > 0 {
						t.Errorf("block %d, overlap %v, %+v: %d of %d values 1 ulp apart, measured 0", block, overlap, c, apart, n*dim)
					}
				}
			}
		}
	})
}

// PLEGate (ple_gate) against nn.GGMLPLEGate in the int8 mode and
// nn.PLEGate otherwise: 30 tokens of 4 groups of 37 values, normal, then
// a token of zeros (d = 0: 1/2), one whose products nearly cancel (|d|
// under the clamp of 1e-6), one of 10⁴ (sigmoid's 0 and 1), an infinite
// key, a NaN. llama.cpp's to the bit; the float64 definition within 1
// ulp (the device's exp is not Go's), measured equal.
func TestPLEGateParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(97, 1))
		const n, S, E = 30, 4, 37
		const scale = 0.1643989873053573 // 1/sqrt(37)
		w := S * E
		k, q := randF32(rng, n*w, 1), randF32(rng, n*w, 1)
		clear(k[:w])
		for e := range w {
			q[w+e] = k[w+e] // token 1: d a sum of squares, sign flipped below
			k[2*w+e] *= 1e4
		}
		for e := range E {
			k[w+e], q[w+e] = 1e-4, 1e-4*float32(2*(e%2)-1) // group 0: ±1e-8 products
		}
		k[3*w+5] = float32(math.Inf(1))
		q[4*w+E+1] = float32(math.NaN())
		kt, qt := b.put(t, n, w, k), b.put(t, n, w, q)
		for _, int8 := range []bool{false, true} {
			want := make([]float32, n*S)
			for tk := range n {
				o, kr, qr := want[tk*S:(tk+1)*S], k[tk*w:(tk+1)*w], q[tk*w:(tk+1)*w]
				if int8 {
					nn.GGMLPLEGate(o, kr, qr, float32(scale))
				} else {
					nn.PLEGate(o, kr, qr, scale)
				}
			}
			dst := b.Alloc(n, S)
			b.prec.Int8 = int8
			b.PLEGate(dst, kt, qt, scale)
			b.prec.Int8 = false
			got := b.Read(dst)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			apart := 0
			for i := range want {
				if u := ulps(got[i], want[i]); u > 1 || (u == 1 && int8) {
					t.Errorf("int8 %v: token %d group %d: %g, want %g", int8, i/S, i%S, got[i], want[i])
				} else if u != 0 {
					apart++
				}
			}
			if apart > 0 {
				t.Errorf("int8 %v: %d of %d gates 1 ulp apart, measured 0", int8, apart, n*S)
			}
		}
	})
}

// layout_keys (DeepSeek-V4's compressed layout's key set, built on the
// device) against nn.NewCompressedLayout's: 300 and 70 queries, ratios 4,
// 5 and 128 (a layout without a whole block), windows 1, 64 and 200,
// every block read, a random choice of every block's first keys (with
// other keys set beside them, which the layout ignores) and a choice of
// none. To the bit.
func TestLayoutKeysParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(101, 1))
		for _, n := range []int{300, 70} {
			random, none := nn.NewKeySet(n), nn.NewKeySet(n)
			for i := range random.Words() {
				random.Words()[i] = rng.Uint64()
			}
			for _, ratio := range []int{4, 5, 128} {
				for _, window := range []int{1, 64, 200} {
					for _, vis := range []*nn.KeySet{nil, random, none} {
						want := nn.NewCompressedLayout(nn.NewContext(0), n, ratio, window, vis)
						l := nn.CompressedRows(n, ratio)
						var chosen ml.KeySet // nil, not a nil *nn.KeySet
						if vis != nil {
							chosen = vis
						}
						var set ptr
						do(t, e, func() (err error) {
							set, err = b.layoutKeys(l, n, ratio, window, chosen)
							return err
						})
						got := devGet[uint64](t, e, set, len(want.Keys.Words()))
						if !slices.Equal(got, want.Keys.Words()) {
							t.Errorf("%d queries, ratio %d, window %d, choice %v: the key set differs from nn.NewCompressedLayout's", n, ratio, window, vis != nil)
						}
					}
				}
			}
		}
	})
}

// The key set chooseBlocks makes stays on the device: choosing it reads
// back only top_keys' flags, 4 bytes a sparse row and group (normal
// floats: no row left to the host), not the set's 19,200 bytes; keySet
// hands out its buffer, copying nothing; a host's set (the same bits) is
// copied in full; a set chosen before the last is refused, as are
// another engine's and one of the wrong size. Emulator: MSA's set of 200 rows (152 past the 6 blocks
// of 8 keys) and 3 groups.
func TestKeySetStays(t *testing.T) {
	e := simEngine()
	dev := e.dev.(*simDevice)
	copied := dev.copiedBytes
	b := testBackend(e)
	defer b.Close()
	const n, heads, dim = 200, 3, 16
	rng := rand.New(rand.NewPCG(83, 1))
	choose := func() ml.KeySet {
		q, k := b.put(t, n, heads*dim, sparseInputs(rng, n*heads*dim, -2, 2, true)), b.put(t, n, dim, sparseInputs(rng, n*dim, -2, 2, true))
		before := dev.backBytes()
		set := b.BlockKeys(q, k, heads, 8, 6, 2)
		if got, want := dev.backBytes()-before, int64(4*heads*(n-6*8)); got != want {
			t.Errorf("choosing the set read back %d bytes, want %d (the flags)", got, want)
		}
		return set
	}
	set := choose()
	host := hostKeys(t, b, set)
	for _, c := range []struct {
		name  string
		keys  ml.KeySet
		bytes int64
	}{{"chosen", set, 0}, {"host's", host, 8 * int64(len(host.Words()))}} {
		before := copied()
		var p ptr
		do(t, e, func() (err error) {
			p, _, err = b.keySet(&ml.Attn{Keys: c.keys, KVHeads: heads}, n)
			return err
		})
		if got := copied() - before; got != c.bytes || (p == b.keys.p) != (c.bytes == 0) {
			t.Errorf("%s set: %d bytes copied, the chosen set's buffer %v; want %d bytes", c.name, got, p == b.keys.p, c.bytes)
		}
		if got := devGet[uint64](t, e, p, len(host.Words())); !slices.Equal(got, host.Words()) {
			t.Errorf("%s set: the device's bits differ from the set's", c.name)
		}
	}
	choose()
	other := testBackend(e)
	defer other.Close()
	for _, c := range []struct {
		name string
		keys ml.KeySet
		rows int
		want string
	}{
		{"older", set, n, "cuda: a key set chosen before the last one, whose buffer holds another now"},
		{"another engine's", &deviceKeys{other, n, heads}, n, "cuda: a key set another engine chose"},
		{"shorter", b.keysOf, n + 1, "cuda: a key set of 200 rows for 201"},
		{"host's shorter", host, n + 1, "cuda: a key set of 2400 words for 201 rows in 3 groups, want 2412"},
	} {
		var err error
		do(t, e, func() error {
			_, _, err = b.keySet(&ml.Attn{Keys: c.keys, KVHeads: heads}, c.rows)
			return nil
		})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s set: error %v, want %q", c.name, err, c.want)
		}
	}
}
