package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/kernels"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/nn"
)

// attnHostRun is one launch of the attention harness
// (testdata/attention_host.cc).
type attnHostRun struct {
	kernel                 string
	grid                   [2]int
	n, heads, kvheads, hd  int
	scale                  float32 // attn_simple's scale or attn_faHD's scale_log2
	window                 int
	sinks                  []float32
	kfmt, vfmt             int
	kplanes, vplanes       kvcache.Block
	outF16                 int
	q                      []float32
	hasKTScale, hasVTScale bool
}

// run launches the kernel, in threadIdx order and in the order other
// (runHarness: the two must agree bit for bit), and returns its output.
func (r *attnHostRun) run(bin, other string) ([]uint16, error) {
	ts := func(has bool) int { return 4 * b2i(has) }
	head := fmt.Sprintf("%s %d %d 128 %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d", r.kernel, r.grid[0], r.grid[1],
		r.n, r.heads, r.kvheads, r.hd, math.Float32bits(r.scale), r.window, len(r.sinks),
		r.kfmt, len(r.kplanes.Data), len(r.kplanes.Scales), ts(r.hasKTScale),
		r.vfmt, len(r.vplanes.Data), len(r.vplanes.Scales), ts(r.hasVTScale), r.outF16)
	in := []any{r.q, r.sinks}
	for _, p := range []struct {
		b   *kvcache.Block
		has bool
	}{{&r.kplanes, r.hasKTScale}, {&r.vplanes, r.hasVTScale}} {
		in = append(in, p.b.Data, p.b.Scales)
		if p.has {
			in = append(in, p.b.TensorScale)
		}
	}
	out, err := runHarness(bin, other, head, in...)
	if err != nil {
		return nil, err
	}
	if len(out) != 2*len(r.q) {
		return nil, fmt.Errorf("%s: %d bytes out, want %d", r.kernel, len(out), 2*len(r.q))
	}
	h := make([]uint16, len(r.q))
	binary.Decode(out, binary.LittleEndian, h)
	return h, nil
}

// attnErr is the worst of |got-want| / (abs + rel·|want|) over the
// elements, with its index (NaN and infinities: +Inf).
func attnErr(got []uint16, f16 int, want []float32, abs, rel float64) (float64, int) {
	worst, at := 0.0, 0
	for i, w := range want {
		g := float64(halfToF32(got[i], f16))
		d := math.Abs(g-float64(w)) / (abs + rel*math.Abs(float64(w)))
		if d != d || math.IsInf(g, 0) {
			d = math.Inf(1)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

// TestAttentionHostHarness runs kernels/attention.cu's CUDA C on the host
// (testdata/attention_host.cc on the SIMT runtime testdata/simt_host.h:
// every thread a fiber, real __syncthreads, shuffles and mma.sync) with
// the launch shapes of Engine.attention and attentionPlain (ops.go), over
// caches encoded by package kvcache, and compares
//   - attn_simple and attn_faHD with the CPU reference (nn.Attention over
//     the cache round trip), at TestAttentionParity's tolerances;
//   - attn_faHD with attn_simple (the check a model load makes, checkFlash:
//     flashTolerance on a GPU; far tighter here, see below);
//   - attn_faHD with its Go port flashLanes, which rounds the same values to
//     fp16 and differs only in the order of the mma sums (none: both add
//     the 16 products to C in float64) and in exp2f (the host's libm and
//     math.Exp2 rounded): the halves agree almost everywhere;
//   - each kernel's output with its output under another schedule of the
//     block's threads (greedy: one warp runs ahead as far as the barriers
//     let it), bit for bit: a difference is a race on shared memory.
//
// The harness also fails on a deadlock (a barrier some threads never
// reach), a read past a buffer, and (with the sanitizer) a misaligned
// vector access or an index past a fixed-size array.
func TestAttentionHostHarness(t *testing.T) {
	bin := buildSIMTHarness(t, "testdata/attention_host.cc")
	cases := []struct {
		dtype                 string
		n, heads, kvheads, hd int
		window                int  // attn_simple only
		sink                  bool // attn_simple only
		outF16                int  // the kernels' output type: bf16 (0) or fp16
	}{
		{"bf16", 150, 4, 2, 64, 0, false, 1},
		{"f16", 65, 2, 1, 16, 0, false, 0},
		{"bf16", 1, 2, 2, 32, 0, false, 1},
		{"f16", 130, 2, 1, 128, 0, false, 1},
		{"k8v4", 100, 2, 2, 64, 0, false, 1},
		{"nvfp4", 70, 2, 1, 32, 0, false, 0},
		{"q8_0", 64, 2, 2, 32, 0, false, 1},
		{"f32", 50, 3, 1, 64, 0, false, 0},
		{"rk8v4", 90, 4, 2, 64, 0, false, 1},
		{"bf16", 140, 2, 1, 256, 0, false, 1},
		{"f16", 97, 2, 1, 256, 0, false, 0},
		{"bf16", 200, 2, 1, 80, 37, true, 1}, // attn_simple only: window, sinks, a head size without a flash kernel
		{"f16", 300, 1, 1, 64, 0, true, 1},
	}
	for ci, c := range cases {
		name := fmt.Sprintf("%s/n%d-h%d-kv%d-d%d", c.dtype, c.n, c.heads, c.kvheads, c.hd)
		if c.window > 0 || c.sink {
			name += fmt.Sprintf("-w%d-sink%v", c.window, c.sink)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(ci), 77))
			f, err := kvcache.Lookup(c.dtype)
			if err != nil {
				t.Fatal(err)
			}
			kid, vid, err := kvFormat(c.dtype)
			if err != nil {
				t.Fatal(err)
			}
			q := randF32(rng, c.n*c.heads*c.hd, 1)
			k := randF32(rng, c.n*c.kvheads*c.hd, 1)
			v := randF32(rng, c.n*c.kvheads*c.hd, 1)
			var sinks []float32
			if c.sink {
				sinks = randF32(rng, c.heads, 2)
			}
			// the cache planes, and the CPU reference over their round trip
			var kb, vb kvcache.Block
			f.K.Encode(&kb, k, c.n, c.kvheads, c.hd)
			f.V.Encode(&vb, v, c.n, c.kvheads, c.hd)
			kr, vr := append([]float32(nil), k...), append([]float32(nil), v...)
			var tmp kvcache.Block
			kvcache.RoundTrip(f.K, &tmp, kr, c.n, c.kvheads, c.hd)
			kvcache.RoundTrip(f.V, &tmp, vr, c.n, c.kvheads, c.hd)
			scale := 1 / math.Sqrt(float64(c.hd))
			want := make([]float32, len(q))
			att := nn.Attention{Heads: c.heads, KVHeads: c.kvheads, HeadDim: c.hd, Scale: scale, Window: c.window, Sinks: sinks}
			att.Forward(nn.NewContext(0), want, q, kr, vr, c.n)
			// the queries the kernels read: rotated into the keys' basis
			// for a rotated key format (Engine.attnQuery)
			qk := q
			if kernels.KVRotated(kid) {
				qk = append([]float32(nil), q...)
				for r := 0; r < len(qk); r += c.hd {
					kvcache.Hadamard(qk[r : r+c.hd])
				}
			}
			run := attnHostRun{n: c.n, heads: c.heads, kvheads: c.kvheads, hd: c.hd, window: c.window, sinks: sinks,
				kfmt: kid, vfmt: vid, kplanes: kb, vplanes: vb, q: qk, hasKTScale: kid == kvNVFP4, hasVTScale: vid == kvNVFP4}

			simple := run
			simple.kernel, simple.grid, simple.scale, simple.outF16 = "attn_simple", [2]int{c.n, c.heads}, float32(scale), c.outF16
			plain, err := simple.run(bin, "greedy-reverse")
			if err != nil {
				t.Fatal(err)
			}
			// plain: float32 softmax and sums, half output (bf16: 2^-9 relative).
			worst, at := attnErr(plain, simple.outF16, want, 1e-3, 0x1p-7)
			t.Logf("attn_simple vs reference: worst error / tolerance %.3f (element %d: %v vs %v)", worst, at, halfToF32(plain[at], simple.outF16), want[at])
			if worst > 1 {
				t.Errorf("attn_simple: element %d is %v, want %v (%.3g × tolerance)", at, halfToF32(plain[at], simple.outF16), want[at], worst)
			}
			if c.window > 0 || c.sink {
				return
			}

			fl := run
			fl.kernel, fl.grid, fl.scale, fl.outF16 = fmt.Sprintf("attn_fa%d", c.hd), [2]int{(c.n + 63) / 64, c.heads}, float32(scale*math.Log2E), c.outF16
			fa, err := fl.run(bin, fmt.Sprintf("greedy-random:%d", ci))
			if err != nil {
				t.Fatal(err)
			}
			// flash: fp16 q, k, v and probabilities on the tensor cores.
			worst, at = attnErr(fa, fl.outF16, want, 4e-3, 0x1p-8)
			t.Logf("%s vs reference: worst error / tolerance %.3f (element %d: %v vs %v)", fl.kernel, worst, at, halfToF32(fa[at], fl.outF16), want[at])
			if worst > 1 {
				t.Errorf("%s: element %d is %v, want %v (%.3g × tolerance)", fl.kernel, at, halfToF32(fa[at], fl.outF16), want[at], worst)
			}
			var diff float64
			for i := range fa {
				d := math.Abs(float64(halfToF32(fa[i], fl.outF16) - halfToF32(plain[i], simple.outF16)))
				if d != d {
					d = math.Inf(1)
				}
				diff = max(diff, d)
			}
			rel := attnHostVsPlainRel
			if fl.outF16 == 0 {
				rel += 0x1p-7 // the two roundings to bf16 can part by one unit
			}
			worst, at = attnErr(fa, fl.outF16, fromHalfs(plain, simple.outF16), attnHostVsPlainAbs, rel)
			t.Logf("%s vs attn_simple: largest difference %.3g (flashTolerance %g), worst / bound %.3f", fl.kernel, diff, flashTolerance, worst)
			if worst > 1 {
				t.Errorf("%s vs attn_simple: element %d is %v, attn_simple's %v (%.3g × bound)", fl.kernel, at, halfToF32(fa[at], fl.outF16), halfToF32(plain[at], simple.outF16), worst)
			}

			// flashLanes over the same planes
			K := simPlanes{format: kid, data: kb.Data, scales: kb.Scales, heads: c.kvheads, hd: c.hd}
			V := simPlanes{format: vid, data: vb.Data, scales: vb.Scales, heads: c.kvheads, hd: c.hd}
			if kid == kvNVFP4 {
				K.tscale = binary.LittleEndian.AppendUint32(nil, math.Float32bits(kb.TensorScale))
			}
			if vid == kvNVFP4 {
				V.tscale = binary.LittleEndian.AppendUint32(nil, math.Float32bits(vb.TensorScale))
			}
			lanes := make([]float32, len(q))
			flashLanes(lanes, qk, K.decode, V.decode, c.n, c.heads, c.kvheads, c.hd, fl.scale)
			differ, far := 0, 0
			for i, v := range lanes {
				if d := halfULPs(fa[i], f32ToHalf(v, fl.outF16)); d != 0 {
					differ++
					far = max(far, d)
				}
			}
			t.Logf("%s vs flashLanes: %d of %d halves differ, by at most %d ulps", fl.kernel, differ, len(lanes), far)
			if differ*attnHostLanesShare > len(lanes) || far > 1 {
				t.Errorf("%s vs flashLanes: %d of %d halves differ (at most 1 in %d), by up to %d ulps (at most 1)",
					fl.kernel, differ, len(lanes), attnHostLanesShare, far)
			}
		})
	}
}

// Bounds of the harness's flash kernels (the test logs the measured
// values).
const (
	// |attn_faHD - attn_simple| <= abs + rel·|attn_simple| on normal
	// inputs, both writing fp16 (bf16: one unit of bf16 more); measured
	// up to 0.96 of 2e-3 + 2^-8 relative.
	attnHostVsPlainAbs, attnHostVsPlainRel = 3e-3, 0x1p-8
	// attn_faHD and flashLanes: at most one half in attnHostLanesShare
	// differs, by one unit in the last place.
	attnHostLanesShare = 1000
)

// fromHalfs decodes halves of the kernels' output type (f16 != 0: fp16).
func fromHalfs(h []uint16, f16 int) []float32 {
	out := make([]float32, len(h))
	for i, x := range h {
		out[i] = halfToF32(x, f16)
	}
	return out
}

// halfULPs is the distance between two halves of one type in units of the
// last place (across zero when the signs differ); 0 for two NaNs.
func halfULPs(a, b uint16) int {
	ord := func(h uint16) int {
		if h&0x8000 != 0 {
			return -int(h & 0x7fff)
		}
		return int(h)
	}
	if a == b || a&0x7fff > 0x7f80 && b&0x7fff > 0x7f80 {
		return 0
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}
