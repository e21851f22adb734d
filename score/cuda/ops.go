package cuda

import (
	"fmt"
	"math"

	"ppl.dev/kernels"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// Typed launchers, one per kernel of ppl.dev/kernels, in the order of the
// kernels' parameters. Each runs on the engine's thread.

// embed: out (n, dim) f32 <- rows tokens of table (vocab, dim) of half type t.
func (e *Engine) embed(out, table, tokens ptr, n, dim int, t cublas.DataType) error {
	return e.launch("embed", dim3{uint32(n), 1, 1}, block256, out, table, tokens, n, dim, isF16(t))
}

// isF16 is the kernels' flag for fp16 (1) rather than bf16 (0) halves.
func isF16(t cublas.DataType) int {
	if t == cublas.R16F {
		return 1
	}
	if t != cublas.R16BF {
		panic(fmt.Sprintf("cuda: %d is not a half type", t))
	}
	return 0
}

// The output types of the kernels that write halves or float32 (their
// otype parameter: dequant_*, attn_simple, gather_rows); the two halves
// are isF16's flag.
const (
	otypeBF16 = 0
	otypeF16  = 1
	otypeF32  = 2
)

// otypeOf is t's otype: isF16's flag for a half type, otypeF32 for float32.
func otypeOf(t cublas.DataType) int {
	if t == f32 {
		return otypeF32
	}
	return isF16(t)
}

// rmsnormF32: out (rows, d) f32 <- RMSNorm(x) · w; out may be x.
func (e *Engine) rmsnormF32(out, x, w ptr, rows, d, wrows int, eps float64) error {
	return e.launch("rmsnorm_f32", dim3{uint32(rows), 1, 1}, dim3{128, 1, 1}, out, x, w, rows, d, wrows, eps)
}

// layernormF32: out (rows, d) f32 <- LayerNorm(x)·w (+ b when b is not 0),
// w and b of wrows rows, row r taking row r mod wrows; out may be x.
func (e *Engine) layernormF32(out, x, w, b ptr, rows, d, wrows int, eps float64) error {
	hasB := 0
	if b != 0 {
		hasB = 1
	}
	return e.launch("layernorm_f32", dim3{uint32(rows), 1, 1}, dim3{128, 1, 1}, out, x, w, b, hasB, rows, d, wrows, eps)
}

// rope rotates x (n, heads, hd) f32 in place with tables (n, dims/2) float64.
func (e *Engine) rope(x, cos, sin ptr, n, heads, hd, dims int, neox bool) error {
	return e.launch("rope", gridFor(int64(n)*int64(heads)*int64(dims/2)), block256, x, cos, sin, n, heads, hd, dims, b2i(neox))
}

// swiglu: out (rows, f) of half type t <- silu(gate)·up, gate and up rows
// of f with strides gs and us. With amax (4 bytes of device memory) an fp16
// output is scaled by a power of two where it would overflow, which
// unscale divides out of the product (kernels/swiglu.cu).
func (e *Engine) swiglu(out, gate, up ptr, rows, f, gs, us int, t cublas.DataType, amax ptr) error {
	return e.gluLaunch("swiglu_half", int64(rows)*int64(f), amax, out, gate, up, rows, f, gs, us, isF16(t))
}

// glu: out (rows, f) of half type t <- act(gate)·up for ml.GeGLU,
// ml.OAISwiGLU, ml.ClampSwiGLU or ml.SwiGLUClampIn of limit or ml.ReGLU (act), or act(gate) for the
// ungated ml.ReLUSqr and ml.GELU (up unused: 0), gate and up dense (rows,
// f); amax as swiglu's.
func (e *Engine) glu(out, gate, up ptr, rows, f int, act ml.Act, limit float32, t cublas.DataType, amax ptr) error {
	if act != ml.GeGLU && act != ml.OAISwiGLU && act != ml.ReLUSqr && act != ml.GELU && act != ml.ClampSwiGLU && act != ml.ReGLU && act != ml.SwiGLUClampIn {
		return fmt.Errorf("cuda: activation %v has no glu_half kernel", act)
	}
	return e.gluLaunch("glu_half", int64(rows)*int64(f), amax, out, gate, up, rows, f, int(act), limit, isF16(t))
}

// gluMaxBlocks bounds the grid of a launch that finds the maximum: one
// atomic per warp.
const gluMaxBlocks = 512

// gluLaunch runs a GLU kernel over n values: once without amax; with it,
// *amax zeroed, the launch that writes the values and their maximum, then
// the rescaling launch.
func (e *Engine) gluLaunch(name string, n int64, amax ptr, args ...any) error {
	if amax == 0 {
		return e.launch(name, gridFor(n), block256, append(args, ptr(0), 0)...)
	}
	if err := e.fillF32(amax, 1, 0); err != nil {
		return err
	}
	grid := gridFor(n)
	grid[0] = min(grid[0], gluMaxBlocks)
	if err := e.launch(name, grid, block256, append(args, amax, 0)...); err != nil {
		return err
	}
	return e.launch(name, gridFor(n), block256, append(args, amax, 1)...)
}

// unscale: x (count) f32 *= 2^-k for the k a GLU launch with amax scaled
// its output by (nothing when none).
func (e *Engine) unscale(x ptr, count int64, amax ptr) error {
	return e.launch("unscale_f32", gridFor(count), block256, x, count, amax)
}

// addBias: x (rows, d) f32 += b (d), or with bi (rows int32) row r of x
// += row bi[r] of b.
func (e *Engine) addBias(x, b, bi ptr, rows, d int) error {
	return e.launch("add_bias", gridFor(int64(rows)*int64(d)), block256, x, b, bi, rows, d)
}

// castHalf: out (count) of half type t <- x (count) f32.
func (e *Engine) castHalf(out, x ptr, count int64, t cublas.DataType) error {
	return e.launch("cast_half", gridFor(count), block256, out, x, count, isF16(t))
}

// addF32: x (count) f32 += y (count).
func (e *Engine) addF32(x, y ptr, count int64) error {
	return e.launch("add_f32", gridFor(count), block256, x, y, count)
}

// scaleF32: x (count) f32 *= s.
func (e *Engine) scaleF32(x ptr, count int64, s float32) error {
	return e.launch("scale_f32", gridFor(count), block256, x, count, s)
}

// clampF32: x (count) f32 = min(max(x, -c), c).
func (e *Engine) clampF32(x ptr, count int64, c float32) error {
	return e.launch("clamp_f32", gridFor(count), block256, x, count, c)
}

// gateMul: x (rows, cols) f32 *= sigmoid(g), or softplus(g), g (rows, gcols), gcols
// cols or 1.
func (e *Engine) gateMul(x, g ptr, rows, cols, gcols int, f ml.GateFn) error {
	fn := 0 // the sigmoid, whichever way the model writes it
	switch f {
	case ml.SoftplusGate:
		fn = 1
	case ml.Softplus2Gate:
		fn = 2
	}
	return e.launch("gate_mul", gridFor(int64(rows)*int64(cols)), block256, x, g, rows, cols, gcols, fn)
}

// softcap: x (count) f32 <- cap·tanh(x/cap).
func (e *Engine) softcap(x ptr, count int64, cp float64) error {
	return e.launch("softcap", gridFor(count), block256, x, count, cp)
}

// xielu: x (count) f32 <- xielu(x) with p's parameters (nn.XIELU.Ref).
func (e *Engine) xielu(x ptr, count int64, p nn.XIELU) error {
	return e.launch("xielu_f32", gridFor(count), block256, x, count, p.AlphaN, p.AlphaP, p.Beta, p.Eps)
}

// widenHalf: out (count) f32 <- h (count) of half type t, exactly.
func (e *Engine) widenHalf(out, h ptr, count int64, t cublas.DataType) error {
	return e.launch("widen_half", gridFor(count), block256, out, h, count, isF16(t))
}

// gatherRows: out row i (cols of type t: a half type or float32) <- x row
// rows[i] (f32), n rows.
func (e *Engine) gatherRows(out, x, rows ptr, n, cols int, t cublas.DataType) error {
	return e.launch("gather_rows", gridFor(int64(n)*int64(cols)), block256, out, x, rows, n, cols, otypeOf(t))
}

// scatterScaled: res slot choice[i] (cols f32) <- y row i · w[choice[i]], n rows.
func (e *Engine) scatterScaled(res, y, choice, w ptr, n, cols int) error {
	return e.launch("scatter_scaled", gridFor(int64(n)*int64(cols)), block256, res, y, choice, w, n, cols)
}

// scaleRows: out row i (cols f32) <- x row rows[i] · w[i], for n rows.
func (e *Engine) scaleRows(out, x, rows, w ptr, n, cols int) error {
	return e.launch("scale_rows", gridFor(int64(n)*int64(cols)), block256, out, x, rows, w, n, cols)
}

// sumChoices: dst row t (cols f32) <- Σ_j res slot t·k+j, in order of j.
func (e *Engine) sumChoices(dst, res ptr, rows, k, cols int) error {
	return e.launch("sum_choices", gridFor(int64(rows)*int64(cols)), block256, dst, res, rows, k, cols)
}

// moeRoute: each of n tokens' K experts and weights from its router
// logits, by r's float64 arithmetic (ml.Router.Route; moe_route) or with
// r.GGML its ggml arithmetic (moe_route_ggml); with r.Chosen, experts
// holds r.Chosen already and the kernel weighs them; bias is r.SelBias on
// the device (0 without); *flag is set when a row is left to the host.
func (e *Engine) moeRoute(logits, bias, experts, weights, flag ptr, n int, r *ml.Router) error {
	opts := 0
	if r.Norm {
		opts |= 1
	}
	if r.SelectSigmoid {
		opts |= 2
	}
	if r.Chosen != nil {
		opts |= 4
	}
	name, grid := "moe_route", dim3{uint32(n), 1, 1} // a warp a token
	args := []any{logits, bias, experts, weights, flag, n, r.Experts, r.K, int(r.Gating), r.Groups, r.GroupsUsed, r.Chunk, opts, r.Scale}
	if r.GGML { // a thread a token
		name, grid, args = "moe_route_ggml", dim3{uint32((n + 31) / 32), 1, 1}, append(args, b2i(r.GGMLAVX2))
	}
	return e.launch(name, grid, dim3{32, 1, 1}, args...)
}

// fillUniform: out (count) of half type t <- uniform(-a, a) from seed,
// rounded to bf16 first.
func (e *Engine) fillUniform(out ptr, count int64, seed uint64, a float32, t cublas.DataType) error {
	return e.launch("fill_uniform_half", gridFor(count), block256, out, count, seed, a, isF16(t))
}

// fillF32: out (count) f32 <- v.
func (e *Engine) fillF32(out ptr, count int64, v float32) error {
	return e.launch("fill_f32", gridFor(count), block256, out, count, v)
}

const lsmThreads = 512 // LSM_THREADS in logsoftmax.cu

// logsoftmax: per row r of logits (rows, vocab) f32: lp[r] (float64), arg[r]
// and bad[r] (int32) for target targets[r].
func (e *Engine) logsoftmax(logits ptr, rows, vocab int, targets, lp, arg, bad ptr) error {
	return e.launch("logsoftmax_target", dim3{uint32(rows), 1, 1}, dim3{lsmThreads, 1, 1}, logits, rows, vocab, targets, lp, arg, bad)
}

// logsoftmaxKLD: logsoftmax for logits and the reference's rlogits, and
// kld[r] = KL(ref || model).
func (e *Engine) logsoftmaxKLD(logits, rlogits ptr, rows, vocab int, targets, lp, arg, bad, rlp, rarg, rbad, kld ptr) error {
	return e.launch("logsoftmax_kld", dim3{uint32(rows), 1, 1}, dim3{lsmThreads, 1, 1},
		logits, rlogits, rows, vocab, targets, lp, arg, bad, rlp, rarg, rbad, kld)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// KV cache format ids: kernels.KVFormats is their one source (it
// generates kernels/kvids.cuh); the short names are this package's.
const (
	kvF32   = kernels.KVF32
	kvF16   = kernels.KVF16
	kvBF16  = kernels.KVBF16
	kvInt8  = kernels.KVInt8
	kvFP8   = kernels.KVFP8
	kvQ4    = kernels.KVQ4
	kvNVFP4 = kernels.KVNVFP4
	kvQ8_0  = kernels.KVQ8_0
	kvQ4_1  = kernels.KVQ4_1
	kvQ5_0  = kernels.KVQ5_0
	kvQ5_1  = kernels.KVQ5_1
	kvIQ4NL = kernels.KVIQ4NL
	kvQ2    = kernels.KVQ2
	kvRInt8 = kernels.KVRInt8
	kvRQ4   = kernels.KVRQ4
	kvRQ2   = kernels.KVRQ2
)

// kvBlockBytes are the bytes of one block of 32 of the ggml-style block
// formats (kv_block_bytes in kvformat.cuh).
var kvBlockBytes = map[int]int64{kvQ8_0: 34, kvQ4_1: 20, kvQ5_0: 22, kvQ5_1: 24, kvIQ4NL: 18, kvQ2: 10, kvRQ2: 10}

// kvIDs maps a kvcache codec name to its format id.
var kvIDs = func() map[string]int {
	m := map[string]int{}
	for id, name := range kernels.KVFormats {
		m[name] = id
	}
	return m
}()

// kvFormat returns the device format ids of a --kv-dtype's key and value codecs.
func kvFormat(name string) (k, v int, err error) {
	f, err := kvcache.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	k, okK := kvIDs[f.K.Name()]
	v, okV := kvIDs[f.V.Name()]
	if !okK || !okV {
		return 0, 0, fmt.Errorf("cuda: KV cache dtype %s (%s keys, %s values) has no kernels", f.Name, f.K.Name(), f.V.Name())
	}
	return k, v, nil
}

// kvSizes returns the bytes of the data and scales planes of a cache tensor
// of groups (token, head) pairs of hd values (kvcache's layouts).
func kvSizes(format int, groups int64, hd int) (data, scales int64) {
	n := groups * int64(hd)
	switch format {
	case kvF32:
		return 4 * n, 0
	case kvF16, kvBF16:
		return 2 * n, 0
	case kvInt8, kvFP8, kvRInt8:
		return n, 4 * groups
	case kvQ4, kvRQ4:
		return groups * int64((hd+31)/32) * 18, 0
	case kvQ8_0, kvQ4_1, kvQ5_0, kvQ5_1, kvIQ4NL, kvQ2, kvRQ2:
		return groups * int64((hd+31)/32) * kvBlockBytes[format], 0
	case kvNVFP4:
		return groups * int64((hd+1)/2), groups * int64((hd+15)/16)
	}
	panic(fmt.Sprintf("cuda: unknown KV format %d", format))
}

// kvTensor is one cache tensor (a layer's keys or values of a window) on
// the device: its planes, sized for up to groups (token, head) pairs.
type kvTensor struct {
	format       int
	groups       int64
	hd           int
	data, scales buf
	words        buf // [0] the nvfp4 tensor scale (float), [1] its amax (bits)
	qrot         buf // rotated keys: the queries rotated to match (attention)
}

func (e *Engine) newKV(format int, groups int64, hd int) (*kvTensor, error) {
	t := &kvTensor{format: format, groups: groups, hd: hd}
	d, s := kvSizes(format, groups, hd)
	var err error
	if t.data, err = e.alloc(d); err != nil {
		return nil, err
	}
	if t.scales, err = e.alloc(s); err != nil {
		e.release(&t.data)
		return nil, err
	}
	if t.words, err = e.alloc(8); err != nil {
		e.release(&t.data)
		e.release(&t.scales)
		return nil, err
	}
	return t, nil
}

func (e *Engine) freeKV(t *kvTensor) {
	if t == nil {
		return
	}
	e.release(&t.data)
	e.release(&t.scales)
	e.release(&t.words)
	e.release(&t.qrot)
}

func (t *kvTensor) tscale() ptr { return t.words.at(0) }

// kvStore encodes x (tokens, heads, hd) f32 into t's format.
func (e *Engine) kvStore(t *kvTensor, x ptr, tokens, heads, hd int) error {
	groups := int64(tokens) * int64(heads)
	if groups > t.groups || hd != t.hd {
		return fmt.Errorf("cuda: KV tensor for %d×%d values holds %d×%d", groups, hd, t.groups, t.hd)
	}
	count := groups * int64(hd)
	switch t.format {
	case kvF32, kvF16, kvBF16:
		return e.launch("kv_store_plain", gridFor(count), block256, t.data.p, x, count, t.format)
	case kvInt8, kvFP8:
		return e.launch("kv_store_scaled", gridFor(groups), block256, t.data.p, t.scales.p, x, groups, hd, t.format)
	case kvQ4:
		return e.launch("kv_store_q4", gridFor(groups*int64((hd+31)/32)), block256, t.data.p, x, groups, hd)
	case kvQ8_0, kvQ4_1, kvQ5_0, kvQ5_1, kvIQ4NL, kvQ2:
		return e.launch("kv_store_ggml", gridFor(groups*int64((hd+31)/32)), block256, t.data.p, x, groups, hd, t.format)
	case kvRInt8, kvRQ4, kvRQ2:
		if err := checkRotated(hd); err != nil {
			return err
		}
		return e.launch("kv_store_rot", gridFor(groups), block256, t.data.p, t.scales.p, x, groups, hd, t.format, kvcache.HadamardScale(hd))
	case kvNVFP4:
		amax := t.words.at(4)
		if err := e.dev.memsetD32(amax, 0, 1); err != nil {
			return fmt.Errorf("cuda: clearing the nvfp4 amax: %w", err)
		}
		if err := e.launch("kv_amax", gridFor(count), block256, amax, x, count); err != nil {
			return err
		}
		return e.launch("kv_store_nvfp4", gridFor(groups*int64((hd+15)/16)), block256,
			t.data.p, t.scales.p, t.tscale(), amax, x, groups, hd)
	}
	return fmt.Errorf("cuda: unknown KV format %d", t.format)
}

// kvDecode writes t's first tokens×heads groups back as f32 (tests), as
// kvcache's Decode: a rotated format's heads are rotated back.
func (e *Engine) kvDecode(out ptr, t *kvTensor, tokens, heads int) error {
	n := int64(tokens) * int64(heads) * int64(t.hd)
	if err := e.launch("kv_decode", gridFor(n), block256, out, t.format, t.data.p, t.scales.p, t.tscale(), int64(tokens), heads, t.hd); err != nil {
		return err
	}
	if !kernels.KVRotated(t.format) {
		return nil
	}
	return e.rotate(out, out, int64(tokens)*int64(heads), t.hd)
}

// checkRotated refuses head sizes the Hadamard kernels cannot rotate.
func checkRotated(hd int) error {
	if hd <= 0 || hd > attnMaxDim || hd&(hd-1) != 0 {
		return fmt.Errorf("cuda: rotated KV cache formats need a power-of-two head size of at most %d, not %d", attnMaxDim, hd)
	}
	return nil
}

// rotate: out (rows, n) f32 <- each row times the normalised Walsh-Hadamard
// matrix (kvcache.Hadamard); out may be x.
func (e *Engine) rotate(out, x ptr, rows int64, n int) error {
	if err := checkRotated(n); err != nil {
		return err
	}
	return e.launch("kv_rotate", gridFor(rows), block256, out, x, rows, n, kvcache.HadamardScale(n))
}

// fwht: out (rows, n) f32 <- each row turned as ggml-cpu's fast
// Walsh-Hadamard transform turns it (nn.FWHT: scaled, then butterflies);
// out may be x.
func (e *Engine) fwht(out, x ptr, rows int64, n int) error {
	return e.fwhtHeads(out, x, rows, n, n, n)
}

// fwhtHeads: out (heads, stride) f32 <- the first width values of each
// row of x turned in blocks of n (nn.FWHTHeads), the rest copied; out may
// be x.
func (e *Engine) fwhtHeads(out, x ptr, heads int64, stride, width, n int) error {
	if err := checkRotated(n); err != nil {
		return err
	}
	if width%n != 0 || width > stride {
		return fmt.Errorf("cuda: turning %d of %d values in blocks of %d", width, stride, n)
	}
	if out != x && width < stride {
		if err := e.copyCols(out, stride, width, x, stride, width, stride-width, int(heads)); err != nil {
			return err
		}
	}
	blocks := heads * int64(width/n)
	return e.launch("fwht_f32", gridFor(blocks), block256, out, x, blocks, n, width/n, stride, kvcache.HadamardScale(n))
}

// attnQuery returns the queries attention reads with the key cache k: q
// itself, or for a rotated key format q's heads rotated into k's buffer
// (q·(H r̂) = (H q)·r̂ with H the normalised Walsh-Hadamard matrix, its own
// inverse), which attention then reads against the stored rotated keys.
func (e *Engine) attnQuery(q ptr, n, heads, hd int, k *kvTensor) (ptr, error) {
	if !kernels.KVRotated(k.format) {
		return q, nil
	}
	if err := e.grow(&k.qrot, 4*int64(n)*int64(heads)*int64(hd), "rotated query buffer"); err != nil {
		return 0, err
	}
	return k.qrot.p, e.rotate(k.qrot.p, q, int64(n)*int64(heads), hd)
}

// flashHeadDims are the head sizes with tensor-core attention kernels,
// attn_faHD and attn_fxHD (64-key tiles, 32-key tiles for heads of 256,
// 16 for 512).
var flashHeadDims = map[int]bool{16: true, 32: true, 64: true, 128: true, 256: true, 512: true}

// attnMaxDim is the largest head size of the attention kernels
// (ATTN_MAXD): Gemma 4's global layers.
const attnMaxDim = 512

// flashGrid is the grid of attn_faHD and attn_fxHD: a block per 64 queries,
// head and 256 output dims (heads of 512 take two).
func flashGrid(n, heads, hd int) dim3 {
	return dim3{uint32((n + 63) / 64), uint32(heads), uint32(max(1, hd/256))}
}

// attention: out (n, heads·hd) of half type ot <- causal attention of q
// (n, heads, hd) f32 over the cache tensors k and v (n, kvheads, hd),
// scores scaled by scale. flash selects the tensor-core kernel (head sizes
// in flashHeadDims).
func (e *Engine) attention(out, q ptr, n, heads, kvheads, hd int, scale float64, k, v *kvTensor, flash bool, ot cublas.DataType) error {
	return e.attentionMasked(out, q, n, heads, kvheads, hd, scale, attnMask{}, k, v, flash, ot)
}

// attnMask is what every attention kernel adds to causality: a sliding
// window, sinks (one float32 logit per head), ALiBi's slopes (one float32
// per head) and a key set (keys: a bitmap in nn.KeySet.Words' layout, of
// kgroups groups), each 0 for none.
type attnMask struct {
	window        int
	sinks, slopes ptr
	keys          ptr
	kgroups       int
}

// attentionMasked is attention with m.
func (e *Engine) attentionMasked(out, q ptr, n, heads, kvheads, hd int, scale float64, m attnMask, k, v *kvTensor, flash bool, ot cublas.DataType) error {
	if heads%kvheads != 0 || hd > attnMaxDim {
		return fmt.Errorf("cuda: attention with %d heads, %d KV heads of size %d not supported", heads, kvheads, hd)
	}
	if flash && flashHeadDims[hd] {
		q, err := e.attnQuery(q, n, heads, hd, k)
		if err != nil {
			return err
		}
		args := []any{out, q, n, heads, kvheads, float32(scale * math.Log2E), m.window, m.sinks, m.slopes,
			k.format, k.data.p, k.scales.p, k.tscale(), v.format, v.data.p, v.scales.p, v.tscale(), isF16(ot), m.keys, m.kgroups}
		// One block of 4 warps per 64 queries, head and 256 output dims,
		// whatever its key tile.
		return e.launch(fmt.Sprintf("attn_fa%d", hd), flashGrid(n, heads, hd), dim3{128, 1, 1}, args...)
	}
	return e.attentionPlain(out, q, n, heads, kvheads, hd, scale, m, plainOpts{}, k, v, isF16(ot))
}

// splitExact reports whether attn_fx computes attention over a cache of
// formats kf and vf to float32's level: fp16 must hold the keys and values
// (f16, or bf16 within fp16's normal range).
func splitExact(kf, vf, hd int) bool {
	return flashHeadDims[hd] && halvesExact(kf) && halvesExact(vf)
}

// halvesExact reports whether two fp16 halves hold every value of cache
// format f exactly (f16, or bf16 within fp16's normal range): attn_fx's
// and attn_flx's condition for float32's level.
func halvesExact(f int) bool { return f == kvF16 || f == kvBF16 }

// attentionSplit is attentionMasked on attn_fxHD: out (n, heads·hd)
// float32.
func (e *Engine) attentionSplit(out, q ptr, n, heads, kvheads, hd int, scale float64, m attnMask, k, v *kvTensor) error {
	if heads%kvheads != 0 || !flashHeadDims[hd] {
		return fmt.Errorf("cuda: split attention with %d heads, %d KV heads of size %d not supported", heads, kvheads, hd)
	}
	q, err := e.attnQuery(q, n, heads, hd, k)
	if err != nil {
		return err
	}
	return e.launch(fmt.Sprintf("attn_fx%d", hd), flashGrid(n, heads, hd), dim3{128, 1, 1},
		out, q, n, heads, kvheads, float32(scale*math.Log2E), m.window, m.sinks, m.slopes,
		k.format, k.data.p, k.scales.p, k.tscale(), v.format, v.data.p, v.scales.p, v.tscale(), m.keys, m.kgroups)
}

// plainOpts are what only the plain kernel computes: a soft-cap and
// chunks, each 0 for none.
type plainOpts struct {
	softCap float64
	chunk   int
}

// attentionPlain is the plain kernel, with m and o, writing otype (a half
// type's or otypeF32).
func (e *Engine) attentionPlain(out, q ptr, n, heads, kvheads, hd int, scale float64, m attnMask, o plainOpts, k, v *kvTensor, otype int) error {
	if heads%kvheads != 0 || hd > attnMaxDim {
		return fmt.Errorf("cuda: attention with %d heads, %d KV heads of size %d not supported", heads, kvheads, hd)
	}
	q, err := e.attnQuery(q, n, heads, hd, k)
	if err != nil {
		return err
	}
	args := []any{out, q, n, heads, kvheads, hd, float32(scale), m.window, m.sinks,
		k.format, k.data.p, k.scales.p, k.tscale(), v.format, v.data.p, v.scales.p, v.tscale(), otype, float32(o.softCap), o.chunk, m.slopes,
		m.keys, m.kgroups}
	return e.launch("attn_simple", dim3{uint32(n), uint32(heads), 1}, dim3{128, 1, 1}, args...)
}
