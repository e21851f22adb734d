package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"ppl.dev/score/ml"
)

// hostCXX returns a host C++ compiler, skipping the test without one
// unless PPL_REQUIRE_CXX=1 (CI) makes that a failure.
func hostCXX(t *testing.T, what string) string {
	t.Helper()
	for _, c := range []string{"g++", "c++", "clang++"} {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "no host C++ compiler (g++, c++, clang++) to build " + what
	if os.Getenv("PPL_REQUIRE_CXX") == "1" {
		t.Fatal(msg + ", and PPL_REQUIRE_CXX=1")
	}
	t.Skip(msg)
	return ""
}

// buildSIMTHarness compiles one of the testdata harnesses that run CUDA C
// on the SIMT runtime of testdata/simt_host.h: -ffp-contract=off for the
// __*_rn intrinsics, -fno-strict-aliasing for the kernels' vector loads
// through pointer casts, and where the compiler has it the undefined
// behaviour sanitizer for what faults on a GPU: a misaligned vector load
// or store (the vector types have CUDA's alignments) and an index past a
// fixed-size array (__shared__ ones included).
func buildSIMTHarness(t *testing.T, src string) string {
	cxx := hostCXX(t, src)
	bin := filepath.Join(t.TempDir(), filepath.Base(src)+".bin")
	note, err := compileSIMT(cxx, src, bin)
	if note != "" {
		t.Log(note)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// compileSIMT compiles src to bin as buildSIMTHarness says, with the
// further arguments more (-D definitions); note says when it had to do
// without the sanitizer.
func compileSIMT(cxx, src, bin string, more ...string) (note string, err error) {
	args := append([]string{"-std=c++17", "-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-Wno-unknown-pragmas", "-o", bin, src}, more...)
	san := []string{"-fsanitize=alignment,bounds", "-fno-sanitize-recover=all"}
	out, err := exec.Command(cxx, append(san, args...)...).CombinedOutput()
	if err != nil {
		note = fmt.Sprintf("%s without the sanitizer: %v\n%s", cxx, err, out)
		out, err = exec.Command(cxx, args...).CombinedOutput()
	}
	if err != nil {
		return note, fmt.Errorf("%s %s: %v\n%s", cxx, src, err, out)
	}
	return note, nil
}

// runHarness runs a host harness with the text line head and the arrays
// in (binary.Write's little-endian encoding), and returns its output. It
// runs it twice, in threadIdx order and in the order other
// (SIMT_SCHEDULE, testdata/simt_host.h: "greedy-reverse" lets one warp run
// ahead as far as the barriers let it), and fails when the two outputs
// differ: a difference is a race between the block's threads.
func runHarness(bin, other, head string, in ...any) ([]byte, error) {
	var outs [2][]byte
	for i, schedule := range []string{"", other} {
		var b bytes.Buffer
		b.WriteString(head + "\n")
		for _, x := range in {
			binary.Write(&b, binary.LittleEndian, x)
		}
		cmd := exec.Command(bin)
		cmd.Stdin = &b
		cmd.Env = append(os.Environ(), "SIMT_SCHEDULE="+schedule)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %s", head, err, stderr.Bytes())
		}
		outs[i] = out
	}
	if at := firstDiff(outs[0], outs[1]); at < max(len(outs[0]), len(outs[1])) {
		return nil, fmt.Errorf("%s: a race: the output differs at byte %d between threadIdx order and order %s", head, at, other)
	}
	return outs[0], nil
}

// runFloats is runHarness for an output of count float32.
func runFloats(bin, head string, count int, in ...any) ([]float32, error) {
	out, err := runHarness(bin, "greedy-reverse", head, in...)
	if err != nil {
		return nil, err
	}
	if len(out) != 4*count {
		return nil, fmt.Errorf("%s: %d bytes out, want %d", head, len(out), 4*count)
	}
	v := make([]float32, count)
	binary.Decode(out, binary.LittleEndian, v)
	return v, nil
}

// TestRecurrentHostHarness runs kernels/recurrent.cu's cooperative
// kernels on the host (testdata/recurrent_host.cc on the SIMT runtime, see
// TestAttentionHostHarness) with the backend's launch shapes: delta_net
// against its float32 port simDeltaNet (the same sums in the same order:
// bit for bit but for expf, the host's against math.Exp rounded) and the
// float64 recurrence at TestDeltaNetParity's tolerances; l2norm_f32 and
// gated_rmsnorm (block_sum_d: double shuffles and a shared-memory
// reduction) against their float64 definitions, within an ulp.
func TestRecurrentHostHarness(t *testing.T) {
	bin := buildSIMTHarness(t, "testdata/recurrent_host.cc")
	t.Run("delta_net", func(t *testing.T) {
		for _, c := range []struct {
			d         ml.DeltaRule
			n         int
			tolerance float64
		}{
			{ml.DeltaRule{KHeads: 2, VHeads: 4, Dim: 16, Tiled: true}, 70, 1e-6},
			{ml.DeltaRule{KHeads: 1, VHeads: 3, Dim: 48}, 45, 1e-6},
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 128, Tiled: true}, 40, 1e-6},
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 16, State: "f16"}, 100, 2e-3},
			{ml.DeltaRule{KHeads: 1, VHeads: 2, Dim: 32, State: "bf16"}, 130, 1e-2},
		} {
			d := c.d
			t.Run(fmt.Sprintf("d%d_hk%d_hv%d_%s", d.Dim, d.KHeads, d.VHeads, d.State), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(d.Dim), 5))
				n, D, Hk, Hv := c.n, d.Dim, d.KHeads, d.VHeads
				q, k := unitRows(rng, n*Hk, D), unitRows(rng, n*Hk, D)
				for i := range q {
					q[i] /= float32(math.Sqrt(float64(D)))
				}
				v := randF32(rng, n*Hv*D, 1)
				g, beta := make([]float32, n*Hv), make([]float32, n*Hv)
				for i := range g {
					g[i] = -float32(rng.Float64()) * []float32{12, 1e-4, 1}[i%3]
					beta[i] = float32(rng.Float64())
				}
				state := randF32(rng, Hv*D*D, 0.1)
				head := fmt.Sprintf("delta_net %d %d %d %d %d %d", n, Hk, Hv, D, b2i(d.Tiled), stateDtypes[d.State])
				got, err := runFloats(bin, head, n*Hv*D+Hv*D*D, q, k, v, g, beta, state)
				if err != nil {
					t.Fatal(err)
				}
				out, st := got[:n*Hv*D], got[n*Hv*D:]

				port, portState := make([]float32, n*Hv*D), append([]float32(nil), state...)
				simDeltaNet(port, q, k, v, g, beta, portState, n, Hk, Hv, D, d.Tiled, stateDtypes[d.State])
				var bc bitCompare
				for i := range out {
					bc.add(out[i], port[i], i)
				}
				for i := range st {
					bc.add(st[i], portState[i], len(out)+i)
				}
				t.Logf("vs simDeltaNet: %d of %d differ, at most %d ulps %s", bc.differ, bc.n, bc.maxULP, bc.worst)
				// measured: 11 of 5504 differ, by up to 4 ulps
				if bc.maxULP > 16 || bc.differ*100 > bc.n {
					t.Errorf("vs simDeltaNet: %d of %d differ, by up to %d ulps (%s)", bc.differ, bc.n, bc.maxULP, bc.worst)
				}

				st64 := make([]float64, len(state))
				for i, x := range state {
					st64[i] = float64(x)
				}
				want := refDeltaNet(q, k, v, g, beta, st64, n, &d)
				for _, part := range []struct {
					what string
					got  []float32
					want []float64
				}{{"output", out, want}, {"state", st, st64}} {
					var scale, worst float64
					for _, w := range part.want {
						scale = max(scale, math.Abs(w))
					}
					for i, w := range part.want {
						dd := math.Abs(float64(part.got[i])-w) / scale
						if dd != dd {
							dd = math.Inf(1)
						}
						worst = max(worst, dd)
					}
					t.Logf("%s vs the float64 recurrence: max |Δ| / max |want| %.2e", part.what, worst)
					if worst > c.tolerance {
						t.Errorf("%s: %.2e of the scale, allowed %g", part.what, worst, c.tolerance)
					}
				}
			})
		}
	})
	t.Run("norms", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, s := range []struct{ rows, d int }{{5, 16}, {3, 128}, {4, 300}, {2, 1000}} {
			x, z, w := randF32(rng, s.rows*s.d, 1), randF32(rng, s.rows*s.d, 2), randF32(rng, s.d, 1)
			const eps = 1e-6
			bx := normBlock(s.d)[0]
			l2, err := runFloats(bin, fmt.Sprintf("l2norm_f32 %d %d %d %d", s.rows, s.d, bx, math.Float64bits(eps)), s.rows*s.d, x)
			if err != nil {
				t.Fatal(err)
			}
			gated, err := runFloats(bin, fmt.Sprintf("gated_rmsnorm %d %d %d %d", s.rows, s.d, bx, math.Float64bits(eps)), s.rows*s.d, x, z, w)
			if err != nil {
				t.Fatal(err)
			}
			var bl, bg bitCompare
			for r := range s.rows {
				var ss float64
				for _, v := range x[r*s.d : (r+1)*s.d] {
					ss += float64(v) * float64(v)
				}
				inv, scale := 1/math.Max(math.Sqrt(ss), eps), 1/math.Sqrt(ss/float64(s.d)+eps)
				for i := range s.d {
					at := r*s.d + i
					zz := float64(z[at])
					bl.add(l2[at], float32(float64(x[at])*inv), at)
					bg.add(gated[at], float32(float64(x[at])*scale*float64(w[i])*(zz/(1+math.Exp(-zz)))), at)
				}
			}
			t.Logf("rows of %d, blocks of %d: l2norm_f32 %d of %d differ (at most %d ulps), gated_rmsnorm %d (at most %d ulps)",
				s.d, bx, bl.differ, bl.n, bl.maxULP, bg.differ, bg.maxULP)
			if bl.maxULP > 1 || bg.maxULP > 1 {
				t.Errorf("rows of %d: l2norm_f32 up to %d ulps (%s), gated_rmsnorm %d (%s); at most 1", s.d, bl.maxULP, bl.worst, bg.maxULP, bg.worst)
			}
		}
	})
}

// TestLogSoftmaxHostHarness runs kernels/logsoftmax.cu on the host
// (testdata/logsoftmax_host.cc on the SIMT runtime) with Engine.logsoftmax's
// launch shape, on TestLogSoftmaxParity's inputs: a vocabulary that is no
// multiple of the block, a tie for the argmax (the first index wins), and a
// row with a NaN and an infinity (the first bad index and its value).
func TestLogSoftmaxHostHarness(t *testing.T) {
	bin := buildSIMTHarness(t, "testdata/logsoftmax_host.cc")
	rng := rand.New(rand.NewPCG(7, 1))
	const rows, vocab = 5, 7001
	z, rz := randF32(rng, rows*vocab, 3), make([]float32, rows*vocab)
	for i := range rz {
		rz[i] = z[i] + float32(rng.NormFloat64()*0.3)
	}
	z[2*vocab+100], z[2*vocab+5000] = 50, 50 // a tie
	rz[1*vocab+6999], rz[1*vocab+7] = 40, 40 // the reference's, across the block's stride
	z[3*vocab+777], z[3*vocab+500] = float32(math.NaN()), float32(math.Inf(1))
	rz[4*vocab+20] = float32(math.Inf(-1))
	targets := make([]int32, rows)
	for i := range targets {
		targets[i] = int32(rng.IntN(vocab))
	}
	targets[2] = 5000
	for _, withRef := range []bool{false, true} {
		name, in := "logsoftmax_target", []any{z, targets}
		if withRef {
			name, in = "logsoftmax_kld", []any{z, rz, targets}
		}
		out, err := runHarness(bin, "greedy-reverse", fmt.Sprintf("%s %d %d", name, rows, vocab), in...)
		if err != nil {
			t.Fatal(err)
		}
		want := 16 * rows
		if withRef {
			want = 40 * rows
		}
		if len(out) != want {
			t.Fatalf("%s: %d bytes out, want %d", name, len(out), want)
		}
		lp, arg, bad := make([]float64, rows), make([]int32, rows), make([]int32, rows)
		rlp, rarg, rbad, kl := make([]float64, rows), make([]int32, rows), make([]int32, rows), make([]float64, rows)
		parts := []any{lp, arg, bad}
		if withRef {
			parts = append(parts, rlp, rarg, rbad, kl)
		}
		rd := bytes.NewReader(out)
		for _, p := range parts {
			binary.Read(rd, binary.LittleEndian, p)
		}
		for r := range rows {
			row, rrow := z[r*vocab:(r+1)*vocab], rz[r*vocab:(r+1)*vocab]
			lse, am, b := refLogSumExp(row)
			rlse, ram, rb := refLogSumExp(rrow)
			if b >= 0 || withRef && rb >= 0 {
				// the first bad token and its value, as the CPU's error names them
				wantLP := 0.0
				if b >= 0 {
					wantLP = float64(row[b])
				}
				if bad[r] != int32(b) || !(lp[r] == wantLP || math.IsNaN(lp[r]) && math.IsNaN(wantLP)) {
					t.Errorf("%s row %d: bad %d value %v, want %d %v", name, r, bad[r], lp[r], b, wantLP)
				}
				if withRef && rbad[r] != int32(rb) {
					t.Errorf("%s row %d: reference bad %d, want %d", name, r, rbad[r], rb)
				}
				continue
			}
			// float64 sums in another order (trees) with the host's exp: measured
			// up to 3e-14 (log p) and 6e-13 (KLD)
			wantLP := float64(row[targets[r]]) - lse
			if bad[r] != -1 || arg[r] != int32(am) || math.Abs(lp[r]-wantLP) > 1e-12 {
				t.Errorf("%s row %d: log p %v argmax %d bad %d, want %v %d -1", name, r, lp[r], arg[r], bad[r], wantLP, am)
			}
			t.Logf("%s row %d: log p off by %.3g", name, r, lp[r]-wantLP)
			if !withRef {
				continue
			}
			rwant, kw := float64(rrow[targets[r]])-rlse, refKLD(rrow, rlse, row, lse)
			if rbad[r] != -1 || rarg[r] != int32(ram) || math.Abs(rlp[r]-rwant) > 1e-12 || math.Abs(kl[r]-kw) > 1e-11*(1+kw) {
				t.Errorf("%s row %d: ref log p %v argmax %d bad %d KLD %v, want %v %d -1 %v", name, r, rlp[r], rarg[r], rbad[r], kl[r], rwant, ram, kw)
			}
			t.Logf("%s row %d: reference log p off by %.3g, KLD by %.3g", name, r, rlp[r]-rwant, kl[r]-kw)
		}
	}
}
