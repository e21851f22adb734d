package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/quant"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/cuda/driver"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/nn"
)

// simDevice emulates the device in Go: memory is byte slices, each kernel
// is its CPU reference (or a port of the kernel's arithmetic) behind the
// kernel's exact parameter list, and GEMM is cublasGemmEx's column-major
// definition. It checks launch shapes where a kernel needs its grid to
// cover the work. The engine and the model run on it unchanged, so every
// host-side path (arguments, offsets, the order of the forward pass, row
// blocks, chunks) is tested on machines without a GPU.
type simDevice struct {
	mu     sync.Mutex
	mem    map[uint64][]byte
	copied int64 // bytes copied to the device
	back   int64 // bytes copied from it
	// peers are the devices whose memory this one's kernels read (peer
	// access); noPeers refuses it, as a driver does between devices that
	// cannot reach each other.
	peers   []*simDevice
	noPeers bool
	// limit, when not 0, is the device's memory: an allocation past it
	// fails as the driver's CUDA_ERROR_OUT_OF_MEMORY does.
	limit, used int64
	// failCopies, when not nil, is every copy to the device's error.
	failCopies error
	launches   map[string]int
	// laneFlash runs the flash kernels lane by lane (flashLanes);
	// otherwise they are nn.Attention over inputs rounded to fp16 when
	// roundAttention is set.
	laneFlash, roundAttention bool
}

const simSpan = 1 << 40 // address space per allocation

// simNext numbers the emulated allocations of every device: one address
// space, as CUDA's unified addressing gives a process.
var simNext atomic.Uint64

func newSimEngine() *Engine {
	e := &Engine{Ordinal: -1, Name: "simulated GPU", CC: [2]int{9, 0}, SMs: 1, Memory: 1 << 34, Driver: "sim",
		work: make(chan func()), SyncEach: true,
		dev: &simDevice{mem: map[uint64][]byte{}, launches: map[string]int{}, laneFlash: true, roundAttention: true}}
	ready := make(chan error)
	go e.loop(func() error { return nil }, ready)
	<-ready
	return e
}

func (s *simDevice) alloc(n int64) (ptr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= simSpan {
		return 0, errors.New("simulated out of memory")
	}
	if s.limit > 0 && s.used+n > s.limit {
		return 0, &driver.Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	}
	s.used += n
	base := simNext.Add(1) * simSpan
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xff // poison: a kernel that reads what nothing wrote sees NaNs
	}
	s.mem[base] = b
	return ptr(base), nil
}

func (s *simDevice) free(p ptr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.mem[uint64(p)]
	if !ok {
		return fmt.Errorf("free of %#x: not an allocation", uint64(p))
	}
	s.used -= int64(len(b))
	delete(s.mem, uint64(p))
	return nil
}

// view returns the bytes from p to the end of its allocation, in the
// device's memory or a peer's: what a kernel reads.
func (s *simDevice) view(p ptr) []byte {
	if b := s.own(p); b != nil {
		return b
	}
	for _, o := range s.peers {
		if b := o.own(p); b != nil {
			return b
		}
	}
	panic(fmt.Sprintf("sim: address %#x is not in an allocation of the device or its peers", uint64(p)))
}

// own returns the bytes from p to the end of its allocation in the
// device's memory, or nil: a copy's view (the engine of the device that
// holds the memory makes it).
func (s *simDevice) own(p ptr) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := uint64(p) / simSpan * simSpan
	b, ok := s.mem[base]
	off := uint64(p) - base
	if !ok || off > uint64(len(b)) {
		return nil
	}
	return b[off:]
}

// ownView is own for a copy of n bytes, or the error.
func (s *simDevice) ownView(p ptr, n int64, what string) ([]byte, error) {
	d := s.own(p)
	switch {
	case d == nil:
		return nil, fmt.Errorf("%s of %d bytes at %#x: not an allocation of this device", what, n, uint64(p))
	case int64(len(d)) < n:
		return nil, fmt.Errorf("%s of %d bytes at %#x overruns its allocation", what, n, uint64(p))
	}
	return d, nil
}

func (s *simDevice) peer(o device) error {
	p, ok := o.(*simDevice)
	if h, isHost := o.(*hostDevice); isHost {
		p, ok = h.simDevice, true
	}
	switch {
	case !ok:
		return fmt.Errorf("not an emulated device (%T)", o)
	case s.noPeers || p.noPeers:
		return errors.New("the emulated driver reports no peer access between the two")
	}
	if !slices.Contains(s.peers, p) {
		s.peers = append(s.peers, p)
	}
	return nil
}

func (s *simDevice) htod(dst ptr, src unsafe.Pointer, n int64) error {
	if s.failCopies != nil {
		return s.failCopies
	}
	d, err := s.ownView(dst, n, "copy to the device")
	if err != nil {
		return err
	}
	copy(d[:n], unsafe.Slice((*byte)(src), n))
	s.mu.Lock()
	s.copied += n
	s.mu.Unlock()
	return nil
}

// copiedBytes is how many bytes have been copied to the device.
func (s *simDevice) copiedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copied
}

func (s *simDevice) dtoh(dst unsafe.Pointer, src ptr, n int64) error {
	d, err := s.ownView(src, n, "copy from the device")
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(dst), n), d[:n])
	s.mu.Lock()
	s.back += n
	s.mu.Unlock()
	return nil
}

// backBytes is how many bytes have been copied from the device.
func (s *simDevice) backBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.back
}

func (s *simDevice) memsetD32(p ptr, v uint32, n int64) error {
	d, err := s.ownView(p, 4*n, "memset")
	if err != nil {
		return err
	}
	u := u32s(d)
	for i := range n {
		u[i] = v
	}
	return nil
}

func (s *simDevice) sync() error                      { return nil }
func (s *simDevice) memInfo() (uint64, uint64, error) { return 1 << 33, 1 << 34, nil }

func f32s(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }
func f64s(b []byte) []float64 { return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8) }
func u16s(b []byte) []uint16  { return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2) }
func u32s(b []byte) []uint32  { return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4) }
func u64s(b []byte) []uint64  { return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8) }
func i32s(b []byte) []int32   { return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4) }

// simArgs reads a kernel's arguments by position, checking their Go types
// against the C parameter types.
type simArgs struct {
	s    *simDevice
	args []any
	err  error
}

func (a *simArgs) fail(i int, want string) {
	if a.err == nil {
		a.err = fmt.Errorf("argument %d is %T, the kernel takes %s", i, a.args[i], want)
	}
}

func (a *simArgs) ptr(i int) []byte {
	switch v := a.args[i].(type) {
	case ptr:
		if v == 0 {
			return nil
		}
		return a.s.view(v)
	case buf:
		return a.s.view(v.p)
	}
	a.fail(i, "a pointer")
	return nil
}

func (a *simArgs) int(i int) int {
	switch v := a.args[i].(type) {
	case int:
		return v
	case int32:
		return int(v)
	}
	a.fail(i, "int")
	return 0
}

func (a *simArgs) i64(i int) int64 {
	if v, ok := a.args[i].(int64); ok {
		return v
	}
	a.fail(i, "long long")
	return 0
}

func (a *simArgs) u64(i int) uint64 {
	if v, ok := a.args[i].(uint64); ok {
		return v
	}
	a.fail(i, "unsigned long long")
	return 0
}

func (a *simArgs) f32(i int) float32 {
	if v, ok := a.args[i].(float32); ok {
		return v
	}
	a.fail(i, "float")
	return 0
}

func (a *simArgs) f64(i int) float64 {
	if v, ok := a.args[i].(float64); ok {
		return v
	}
	a.fail(i, "double")
	return 0
}

// simKernel is a kernel's emulation and its parameter count.
type simKernel struct {
	nargs int
	run   func(s *simDevice, a *simArgs, grid dim3) error
}

// simKernels maps kernel names to their emulation (the other sim_*_test.go
// files add theirs in init).
var simKernels = map[string]simKernel{
	"embed": {6, func(s *simDevice, a *simArgs, grid dim3) error {
		out, table, tok, n, dim, f16 := f32s(a.ptr(0)), u16s(a.ptr(1)), i32s(a.ptr(2)), a.int(3), a.int(4), a.int(5)
		if err := covers(grid[0], n, "tokens"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		for t := range n {
			for i := range dim {
				out[t*dim+i] = halfToF32(table[int(tok[t])*dim+i], f16)
			}
		}
		return nil
	}},
	"rmsnorm_f32": {7, func(s *simDevice, a *simArgs, grid dim3) error {
		x, w, rows, d, wrows, eps := f32s(a.ptr(1)), f32s(a.ptr(2)), a.int(3), a.int(4), a.int(5), a.f64(6)
		if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		norm := nn.RMSNorm{Name: "sim", W: w[:wrows*d], Eps: eps, Cols: d}
		norm.Forward(nn.NewContext(1), f32s(a.ptr(0))[:rows*d], x[:rows*d], rows)
		return nil
	}},
	"layernorm_f32": {9, func(s *simDevice, a *simArgs, grid dim3) error {
		x, w, hasB, rows, d, wrows, eps := f32s(a.ptr(1)), f32s(a.ptr(2)), a.int(4), a.int(5), a.int(6), a.int(7), a.f64(8)
		var b []float32
		if hasB != 0 {
			b = f32s(a.ptr(3))[:wrows*d]
		}
		if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		nn.LayerNorm(f32s(a.ptr(0))[:rows*d], x[:rows*d], w[:wrows*d], b, eps, rows, d)
		return nil
	}},
	"rope": {8, func(s *simDevice, a *simArgs, grid dim3) error {
		x, cos, sin := f32s(a.ptr(0)), f64s(a.ptr(1)), f64s(a.ptr(2))
		n, heads, hd, dims, neox := a.int(3), a.int(4), a.int(5), a.int(6), a.int(7)
		if a.err != nil {
			return a.err
		}
		half := dims / 2
		for t := range n {
			for h := range heads {
				v := x[(t*heads+h)*hd : (t*heads+h+1)*hd]
				for i := range half {
					ia, ib := 2*i, 2*i+1
					if neox != 0 {
						ia, ib = i, i+half
					}
					c, s := cos[t*half+i], sin[t*half+i]
					p, q := float64(v[ia]), float64(v[ib])
					v[ia] = float32(p*c - q*s)
					v[ib] = float32(p*s + q*c)
				}
			}
		}
		return nil
	}},
	"swiglu_half": {10, func(s *simDevice, a *simArgs, grid dim3) error {
		out, gate, up := u16s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2))
		rows, f, gs, us, f16 := a.int(3), a.int(4), a.int(5), a.int(6), a.int(7)
		amax, rescale := a.ptr(8), a.int(9)
		if a.err != nil {
			return a.err
		}
		tmp := make([]float32, rows*f)
		for r := range rows {
			nn.SwiGLU(tmp[r*f:(r+1)*f], gate[r*gs:r*gs+f], up[r*us:r*us+f])
		}
		simGLUHalf(out, tmp, f16, amax, rescale)
		return nil
	}},
	"unscale_f32": {3, func(s *simDevice, a *simArgs, grid dim3) error {
		x, n, amax := f32s(a.ptr(0)), a.i64(1), a.ptr(2)
		if a.err != nil {
			return a.err
		}
		if k := downExp(binary.LittleEndian.Uint32(amax)); k != 0 {
			for i := range n {
				x[i] *= pow2f(-k)
			}
		}
		return nil
	}},
	"add_bias": {5, func(s *simDevice, a *simArgs, grid dim3) error {
		x, b, bi, rows, d := f32s(a.ptr(0)), f32s(a.ptr(1)), a.ptr(2), a.int(3), a.int(4)
		for r := range rows {
			o := 0
			if bi != nil {
				o = int(i32s(bi)[r]) * d
			}
			for j := range d {
				x[r*d+j] += b[o+j]
			}
		}
		return a.err
	}},
	"cast_half": {4, func(s *simDevice, a *simArgs, grid dim3) error {
		out, x, n, f16 := u16s(a.ptr(0)), f32s(a.ptr(1)), a.i64(2), a.int(3)
		for i := range n {
			out[i] = f32ToHalf(x[i], f16)
		}
		return a.err
	}},
	"fill_uniform_half": {5, func(s *simDevice, a *simArgs, grid dim3) error {
		out, n, seed, amp, f16 := u16s(a.ptr(0)), a.i64(1), a.u64(2), a.f32(3), a.int(4)
		for i := range n {
			out[i] = uniformHalf(seed, i, amp, f16)
		}
		return a.err
	}},
	"fill_f32": {3, func(s *simDevice, a *simArgs, grid dim3) error {
		out, n, v := f32s(a.ptr(0)), a.i64(1), a.f32(2)
		for i := range n {
			out[i] = v
		}
		return a.err
	}},
	"logsoftmax_target": {7, func(s *simDevice, a *simArgs, grid dim3) error {
		logits, rows, vocab, targets := f32s(a.ptr(0)), a.int(1), a.int(2), i32s(a.ptr(3))
		lp, arg, bad := f64s(a.ptr(4)), i32s(a.ptr(5)), i32s(a.ptr(6))
		if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		for r := range rows {
			z := logits[r*vocab : (r+1)*vocab]
			lse, am, b := refLogSumExp(z)
			if b >= 0 {
				bad[r], arg[r], lp[r] = int32(b), 0, float64(z[b])
				continue
			}
			bad[r], arg[r], lp[r] = -1, int32(am), float64(z[targets[r]])-lse
		}
		return nil
	}},
	"logsoftmax_kld": {12, func(s *simDevice, a *simArgs, grid dim3) error {
		logits, rlogits, rows, vocab, targets := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), i32s(a.ptr(4))
		lp, arg, bad := f64s(a.ptr(5)), i32s(a.ptr(6)), i32s(a.ptr(7))
		rlp, rarg, rbad, kld := f64s(a.ptr(8)), i32s(a.ptr(9)), i32s(a.ptr(10)), f64s(a.ptr(11))
		if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		for r := range rows {
			z, rz := logits[r*vocab:(r+1)*vocab], rlogits[r*vocab:(r+1)*vocab]
			lse, am, b := refLogSumExp(z)
			rlse, ram, rb := refLogSumExp(rz)
			if b >= 0 || rb >= 0 {
				bad[r], rbad[r] = int32(b), int32(rb)
				lp[r], rlp[r], kld[r] = 0, 0, 0
				if b >= 0 {
					lp[r] = float64(z[b])
				}
				if rb >= 0 {
					rlp[r] = float64(rz[rb])
				}
				continue
			}
			t := targets[r]
			bad[r], rbad[r], arg[r], rarg[r] = -1, -1, int32(am), int32(ram)
			lp[r], rlp[r] = float64(z[t])-lse, float64(rz[t])-rlse
			kld[r] = refKLD(rz, rlse, z, lse)
		}
		return nil
	}},
	"kv_store_plain": {4, func(s *simDevice, a *simArgs, grid dim3) error {
		data, x, count, format := a.ptr(0), f32s(a.ptr(1)), a.i64(2), a.int(3)
		if a.err != nil {
			return a.err
		}
		var b kvcache.Block
		codecs[format].Encode(&b, x[:count], int(count), 1, 1)
		copy(data, b.Data)
		return nil
	}},
	"kv_store_scaled": {6, func(s *simDevice, a *simArgs, grid dim3) error {
		data, scales, x, groups, hd, format := a.ptr(0), a.ptr(1), f32s(a.ptr(2)), a.i64(3), a.int(4), a.int(5)
		if a.err != nil {
			return a.err
		}
		var b kvcache.Block
		codecs[format].Encode(&b, x[:groups*int64(hd)], int(groups), 1, hd)
		copy(data, b.Data)
		copy(scales, b.Scales)
		return nil
	}},
	"kv_store_q4": {4, func(s *simDevice, a *simArgs, grid dim3) error {
		data, x, groups, hd := a.ptr(0), f32s(a.ptr(1)), a.i64(2), a.int(3)
		if a.err != nil {
			return a.err
		}
		var b kvcache.Block
		kvcache.Q4{}.Encode(&b, x[:groups*int64(hd)], int(groups), 1, hd)
		copy(data, b.Data)
		return nil
	}},
	"kv_store_ggml": {5, func(s *simDevice, a *simArgs, grid dim3) error {
		data, x, groups, hd, format := a.ptr(0), f32s(a.ptr(1)), a.i64(2), a.int(3), a.int(4)
		if a.err != nil {
			return a.err
		}
		var b kvcache.Block
		codecs[format].Encode(&b, x[:groups*int64(hd)], int(groups), 1, hd)
		copy(data, b.Data)
		return nil
	}},
	"kv_store_rot": {7, func(s *simDevice, a *simArgs, grid dim3) error {
		data, scales, x, groups, hd, format, sc := a.ptr(0), a.ptr(1), f32s(a.ptr(2)), a.i64(3), a.int(4), a.int(5), a.f32(6)
		if a.err != nil {
			return a.err
		}
		if sc != kvcache.HadamardScale(hd) {
			return fmt.Errorf("rotation scale %v for head size %d, want %v", sc, hd, kvcache.HadamardScale(hd))
		}
		var b kvcache.Block
		codecs[format].Encode(&b, x[:groups*int64(hd)], int(groups), 1, hd)
		copy(data, b.Data)
		copy(scales, b.Scales)
		return nil
	}},
	"kv_rotate": {5, func(s *simDevice, a *simArgs, grid dim3) error {
		out, x, rows, n, sc := f32s(a.ptr(0)), f32s(a.ptr(1)), a.i64(2), a.int(3), a.f32(4)
		if a.err != nil {
			return a.err
		}
		if sc != kvcache.HadamardScale(n) {
			return fmt.Errorf("rotation scale %v for %d values, want %v", sc, n, kvcache.HadamardScale(n))
		}
		for r := range int(rows) {
			row := make([]float32, n)
			copy(row, x[r*n:(r+1)*n])
			kvcache.Hadamard(row)
			copy(out[r*n:(r+1)*n], row)
		}
		return nil
	}},
	"fwht_f32": {7, func(s *simDevice, a *simArgs, grid dim3) error {
		out, x, blocks, n, per, stride, sc := f32s(a.ptr(0)), f32s(a.ptr(1)), a.i64(2), a.int(3), a.int(4), a.int(5), a.f32(6)
		if a.err != nil {
			return a.err
		}
		if sc != kvcache.HadamardScale(n) {
			return fmt.Errorf("rotation scale %v for %d values, want %v", sc, n, kvcache.HadamardScale(n))
		}
		heads := int(blocks) / per
		// The kernel writes the turned blocks only, not the rest of a row.
		turned := slices.Clone(x[:heads*stride])
		nn.FWHTHeads(nn.NewContext(1), turned, turned, heads, stride, per*n, n)
		for h := range heads {
			copy(out[h*stride:h*stride+per*n], turned[h*stride:])
		}
		return nil
	}},
	"kv_amax": {3, func(s *simDevice, a *simArgs, grid dim3) error {
		word, x, count := u32s(a.ptr(0)), f32s(a.ptr(1)), a.i64(2)
		if a.err != nil {
			return a.err
		}
		var m float32
		bits := uint32(0)
		for _, v := range x[:count] {
			av := float32(math.Abs(float64(v)))
			if !(av <= math.MaxFloat32) {
				bits = 0x7fc00000
				break
			}
			m = max(m, av)
			bits = math.Float32bits(m)
		}
		word[0] = max(word[0], bits)
		return nil
	}},
	"kv_store_nvfp4": {7, func(s *simDevice, a *simArgs, grid dim3) error {
		data, scales, tscale, word := a.ptr(0), a.ptr(1), f32s(a.ptr(2)), u32s(a.ptr(3))
		x, groups, hd := f32s(a.ptr(4)), a.i64(5), a.int(6)
		if a.err != nil {
			return a.err
		}
		var b kvcache.Block
		kvcache.NVFP4{}.Encode(&b, x[:groups*int64(hd)], int(groups), 1, hd)
		if g := math.Float32frombits(word[0]) / (6 * 448); math.Float32bits(g) != math.Float32bits(b.TensorScale) {
			return fmt.Errorf("amax word gives tensor scale %v, kvcache %v", g, b.TensorScale)
		}
		copy(data, b.Data)
		copy(scales, b.Scales)
		tscale[0] = b.TensorScale
		return nil
	}},
	"kv_decode": {8, func(s *simDevice, a *simArgs, grid dim3) error {
		out := f32s(a.ptr(0))
		p := simPlanes{format: a.int(1), data: a.ptr(2), scales: a.ptr(3), tscale: a.ptr(4)}
		tokens, heads, hd := a.i64(5), a.int(6), a.int(7)
		if a.err != nil {
			return a.err
		}
		p.heads, p.hd = heads, hd
		for t := range int(tokens) {
			for h := range heads {
				for i := range hd {
					out[(t*heads+h)*hd+i] = p.decode(t, h, i)
				}
			}
		}
		return nil
	}},
	"attn_simple": {23, func(s *simDevice, a *simArgs, grid dim3) error {
		n, heads := a.int(2), a.int(3)
		if err := covers(grid[0], n, "queries"); err != nil {
			return err
		}
		if err := covers(grid[1], heads, "heads"); err != nil {
			return err
		}
		return simAttention(a, a.int(5), float64(a.f32(6)), a.int(7), simPerHead(a, 8, heads), simPerHead(a, 20, heads), float64(a.f32(18)), a.int(19), simKeys(a, 21, n), 9, false)
	}},
	"attn_fa16":  {20, simFlash(16)},
	"attn_fa32":  {20, simFlash(32)},
	"attn_fa64":  {20, simFlash(64)},
	"attn_fa128": {20, simFlash(128)},
	"attn_fa256": {20, simFlash(256)},
	"attn_fa512": {20, simFlash(512)},
	"attn_fx16":  {19, simFlashSplit(16)},
	"attn_fx32":  {19, simFlashSplit(32)},
	"attn_fx64":  {19, simFlashSplit(64)},
	"attn_fx128": {19, simFlashSplit(128)},
	"attn_fx256": {19, simFlashSplit(256)},
	"attn_fx512": {19, simFlashSplit(512)},
}

func simFlash(hd int) func(s *simDevice, a *simArgs, grid dim3) error {
	return func(s *simDevice, a *simArgs, grid dim3) error {
		n, heads := a.int(2), a.int(3)
		if err := covers(grid[0], (n+63)/64, "query tiles"); err != nil {
			return err
		}
		if err := errors.Join(covers(grid[1], heads, "heads"), covers(grid[2], max(1, hd/256), "output dims")); err != nil {
			return err
		}
		window, sinks, slopes := a.int(6), simPerHead(a, 7, heads), simPerHead(a, 8, heads)
		if !s.laneFlash {
			return simAttention(a, hd, float64(a.f32(5))/math.Log2E, window, sinks, slopes, 0, 0, simKeys(a, 18, n), 9, s.roundAttention)
		}
		out, q, kvheads := u16s(a.ptr(0)), f32s(a.ptr(1)), a.int(4)
		K := simPlanes{format: a.int(9), data: a.ptr(10), scales: a.ptr(11), tscale: a.ptr(12), heads: kvheads, hd: hd}
		V := simPlanes{format: a.int(13), data: a.ptr(14), scales: a.ptr(15), tscale: a.ptr(16), heads: kvheads, hd: hd}
		f16 := a.int(17)
		if a.err != nil {
			return a.err
		}
		o := make([]float32, n*heads*hd)
		flashLanes(o, q, K.decode, V.decode, n, heads, kvheads, hd, a.f32(5), window, sinks, slopes, simKeys(a, 18, n), false)
		for i, v := range o {
			out[i] = f32ToHalf(v, f16)
		}
		return nil
	}
}

// simFlashSplit is attn_fxHD: flashLanes with q and the probabilities in
// two fp16 halves, float32 output.
func simFlashSplit(hd int) func(s *simDevice, a *simArgs, grid dim3) error {
	return func(s *simDevice, a *simArgs, grid dim3) error {
		n, heads, kvheads, window := a.int(2), a.int(3), a.int(4), a.int(6)
		if err := errors.Join(covers(grid[0], (n+63)/64, "query tiles"), covers(grid[1], heads, "heads"), covers(grid[2], max(1, hd/256), "output dims")); err != nil {
			return err
		}
		sinks, slopes := simPerHead(a, 7, heads), simPerHead(a, 8, heads)
		out, q := f32s(a.ptr(0)), f32s(a.ptr(1))
		K := simPlanes{format: a.int(9), data: a.ptr(10), scales: a.ptr(11), tscale: a.ptr(12), heads: kvheads, hd: hd}
		V := simPlanes{format: a.int(13), data: a.ptr(14), scales: a.ptr(15), tscale: a.ptr(16), heads: kvheads, hd: hd}
		if a.err != nil {
			return a.err
		}
		flashLanes(out[:n*heads*hd], q, K.decode, V.decode, n, heads, kvheads, hd, a.f32(5), window, sinks, slopes, simKeys(a, 17, n), true)
		return nil
	}
}

// simKeys reads the key set of arguments i (the words) and i+1 (the
// groups) of a window of n rows, nil for a null pointer.
func simKeys(a *simArgs, i, n int) *nn.KeySet {
	p, groups := a.ptr(i), a.int(i+1)
	if p == nil || a.err != nil {
		return nil
	}
	w := (n + 63) / 64
	words := u64s(p)
	set := nn.NewKeySets(n, groups)
	for gr := range groups {
		for r := range n {
			for j := range n {
				if words[(gr*n+r)*w+j/64]>>(j%64)&1 != 0 {
					set.AddIn(gr, r, j)
				}
			}
		}
	}
	return set
}

// simPerHead is argument i, a float32 per head, or nil for a null pointer.
func simPerHead(a *simArgs, i, heads int) []float32 {
	if p := a.ptr(i); p != nil {
		return f32s(p)[:heads]
	}
	return nil
}

var codecs = map[int]kvcache.Codec{kvF32: kvcache.F32{}, kvF16: kvcache.F16{}, kvBF16: kvcache.BF16{},
	kvInt8: kvcache.Int8{}, kvFP8: kvcache.FP8{}, kvQ4: kvcache.Q4{}, kvNVFP4: kvcache.NVFP4{},
	kvQ8_0: kvcache.GGML{T: gguf.TypeQ8_0}, kvQ4_1: kvcache.GGML{T: gguf.TypeQ4_1}, kvQ5_0: kvcache.GGML{T: gguf.TypeQ5_0},
	kvQ5_1: kvcache.GGML{T: gguf.TypeQ5_1}, kvIQ4NL: kvcache.GGML{T: gguf.TypeIQ4_NL}, kvQ2: kvcache.Q2{},
	kvRInt8: kvcache.Rotated{Inner: kvcache.Int8{}}, kvRQ4: kvcache.Rotated{Inner: kvcache.Q4{}}, kvRQ2: kvcache.Rotated{Inner: kvcache.Q2{}}}

// simGGMLTypes are the weight types of the ggml block formats.
var simGGMLTypes = map[int]gguf.Type{kvQ8_0: gguf.TypeQ8_0, kvQ4_1: gguf.TypeQ4_1, kvQ5_0: gguf.TypeQ5_0,
	kvQ5_1: gguf.TypeQ5_1, kvIQ4NL: gguf.TypeIQ4_NL}

func covers(g uint32, n int, what string) error {
	if int(g) < n {
		return fmt.Errorf("grid of %d blocks for %d %s", g, n, what)
	}
	return nil
}

// simGLUHalf is the GLU kernels' output (kernels/swiglu.cu): v rounded to
// out's half type; for fp16 with amax, rescale 0 also writes the largest
// |v| (NaNs ignored, as fmaxf) into amax, and rescale 1 writes v·2^k, k =
// downExp(amax), when k != 0.
func simGLUHalf(out []uint16, v []float32, f16 int, amax []byte, rescale int) {
	if f16 != 0 && amax != nil && rescale == 1 {
		k := downExp(binary.LittleEndian.Uint32(amax))
		if k == 0 {
			return
		}
		for i, x := range v {
			out[i] = quant.F32ToF16(x * pow2f(k))
		}
		return
	}
	var m float32
	for i, x := range v {
		out[i] = f32ToHalf(x, f16)
		if a := float32(math.Abs(float64(x))); a > m {
			m = a
		}
	}
	if f16 != 0 && amax != nil {
		binary.LittleEndian.PutUint32(amax, max(binary.LittleEndian.Uint32(amax), math.Float32bits(m)))
	}
}

// downExp is kernels/common.cuh's down_exp: the power of two k that
// brings a largest magnitude m (its float32 bits) of 2^15 or more to
// [2^14, 2^15); 0 below 2^15 and for infinities and NaNs.
func downExp(m uint32) int {
	e := m >> 23 & 0xff
	if m < 0x47000000 || e == 0xff {
		return 0
	}
	return 141 - int(e)
}

// pow2f is 2^k for k in [-126, 127].
func pow2f(k int) float32 { return math.Float32frombits(uint32(k+127) << 23) }

func f32ToHalf(v float32, f16 int) uint16 {
	if f16 != 0 {
		return quant.F32ToF16(v)
	}
	return quant.F32ToBF16(v)
}

func halfToF32(h uint16, f16 int) float32 {
	if f16 != 0 {
		return quant.F16ToF32(h)
	}
	return quant.BF16ToF32(h)
}

// simAttention decodes the cache planes (arguments from k0 on: kfmt, kdata,
// kscales, ktscale, vfmt, ...) and runs nn.Attention, with a sliding window
// (0: none) and sinks (nil: none).
func simAttention(a *simArgs, hd int, scale float64, window int, sinks, slopes []float32, softCap float64, chunk int, keys *nn.KeySet, k0 int, round bool) error {
	out, q, n, heads, kvheads := u16s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4)
	K := simPlanes{format: a.int(k0), data: a.ptr(k0 + 1), scales: a.ptr(k0 + 2), tscale: a.ptr(k0 + 3), heads: kvheads, hd: hd}
	V := simPlanes{format: a.int(k0 + 4), data: a.ptr(k0 + 5), scales: a.ptr(k0 + 6), tscale: a.ptr(k0 + 7), heads: kvheads, hd: hd}
	f16 := a.int(k0 + 8)
	if a.err != nil {
		return a.err
	}
	r := func(v float32) float32 {
		if round {
			return quant.F16ToF32(quant.F32ToF16(v))
		}
		return v
	}
	qs := make([]float32, n*heads*hd)
	for i := range qs {
		qs[i] = r(q[i])
	}
	ks, vs := make([]float32, n*kvheads*hd), make([]float32, n*kvheads*hd)
	for t := range n {
		for h := range kvheads {
			for i := range hd {
				ks[(t*kvheads+h)*hd+i] = r(K.decode(t, h, i))
				vs[(t*kvheads+h)*hd+i] = r(V.decode(t, h, i))
			}
		}
	}
	o := make([]float32, n*heads*hd)
	att := nn.Attention{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: scale, Window: window, Sinks: sinks, Slopes: slopes, SoftCap: softCap, Chunk: chunk, Keys: keys}
	att.Forward(nn.NewContext(0), o, qs, ks, vs, n)
	if f16 == otypeF32 {
		copy(f32s(a.ptr(0)), o)
		return nil
	}
	for i, v := range o {
		out[i] = f32ToHalf(v, f16)
	}
	return nil
}

// simPlanes reads a cache tensor's planes as kv_decode1 (kvformat.cuh) does.
type simPlanes struct {
	format               int
	data, scales, tscale []byte
	heads, hd            int
}

func (p *simPlanes) decode(t, h, i int) float32 {
	g := t*p.heads + h
	switch p.format {
	case kvF32:
		return f32s(p.data)[g*p.hd+i]
	case kvF16:
		return quant.F16ToF32(u16s(p.data)[g*p.hd+i])
	case kvBF16:
		return quant.BF16ToF32(u16s(p.data)[g*p.hd+i])
	case kvInt8, kvRInt8:
		return float32(int8(p.data[g*p.hd+i])) * f32s(p.scales)[g]
	case kvQ8_0, kvQ4_1, kvQ5_0, kvQ5_1, kvIQ4NL:
		nb, k, ts := (p.hd+31)/32, i/32, int(kvBlockBytes[p.format])
		var v [32]float32
		quant.DequantizeRow(simGGMLTypes[p.format], p.data[(g*nb+k)*ts:(g*nb+k+1)*ts], v[:])
		return v[i-k*32]
	case kvQ2, kvRQ2:
		nb, k := (p.hd+31)/32, i/32
		j := i - k*32
		blk := p.data[(g*nb+k)*10:]
		d := quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
		return (float32(blk[2+j/4]>>(2*(j%4))&3) - 1.5) * d
	case kvFP8:
		return kvcache.E4M3Value(p.data[g*p.hd+i]) * f32s(p.scales)[g]
	case kvQ4, kvRQ4:
		nb, k := (p.hd+31)/32, i/32
		j := i - k*32
		blk := p.data[(g*nb+k)*18:]
		d := quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
		nib := blk[2+j&15]
		if j >= 16 {
			nib >>= 4
		}
		return float32(int(nib&15)-8) * d
	case kvNVFP4:
		pb, nb := (p.hd+1)/2, (p.hd+15)/16
		b := p.data[g*pb+i/2] >> (4 * (i & 1))
		s := kvcache.E4M3Value(p.scales[g*nb+i/16])
		return kvcache.E2M1Value(b) * s * f32s(p.tscale)[0]
	}
	panic(fmt.Sprintf("sim: KV format %d", p.format))
}

// refLogSumExp is model.logSumExp (score/model/score.go, unexported there):
// log Σ exp(z) in float64, the first argmax, and the first non-finite
// index (-1 when none).
func refLogSumExp(row []float32) (lse float64, arg, bad int) {
	mx := row[0]
	for i, v := range row {
		if v-v != 0 {
			return 0, 0, i
		}
		if v > mx {
			mx, arg = v, i
		}
	}
	m := float64(mx)
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s), arg, -1
}

// refKLD is model.kld: KL(softmax(pz) || softmax(qz)).
func refKLD(pz []float32, plse float64, qz []float32, qlse float64) float64 {
	var s float64
	for i, v := range pz {
		lp := float64(v) - plse
		s += math.Exp(lp) * (lp - (float64(qz[i]) - qlse))
	}
	return s
}

// uniformHalf is fill_uniform_half's element i (kernels/random.cu).
func uniformHalf(seed uint64, i int64, amp float32, f16 int) uint16 {
	r := mix32(seed*0x9e3779b97f4a7c15 + uint64(i))
	u := float32(r>>8) * (1.0 / 16777216.0)
	h := quant.F32ToBF16((2*u - 1) * amp)
	if f16 != 0 {
		h = quant.F32ToF16(quant.BF16ToF32(h))
	}
	return h
}

func mix32(x uint64) uint32 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return uint32(x)
}

func (s *simDevice) launch(kernel string, grid, block dim3, args []any) error {
	k, ok := simKernels[kernel]
	if !ok {
		return errors.New("no such kernel in the simulator")
	}
	if len(args) != k.nargs {
		return fmt.Errorf("%d arguments, the kernel takes %d", len(args), k.nargs)
	}
	if err := checkSignature(kernel, args); err != nil {
		return err
	}
	for i, v := range args {
		if _, err := argBits(v); err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
	}
	if block[0]*block[1]*block[2] > 1024 || block[0]%32 != 0 {
		return fmt.Errorf("bad block %v", block)
	}
	s.mu.Lock()
	s.launches[kernel]++
	s.mu.Unlock()
	return k.run(s, &simArgs{s: s, args: args}, grid)
}

// gemmBatched is cublasGemmBatchedEx's definition: gemm for each of count
// products, their A, B and C addresses read from the device arrays.
func (s *simDevice) gemmBatched(ta, tb cublas.Op, m, n, k int, alpha float32, as ptr, at cublas.DataType, lda int,
	bs ptr, bt cublas.DataType, ldb int, beta float32, cs ptr, ct cublas.DataType, ldc int, count int) error {
	addr := func(arr ptr, i int) (ptr, error) {
		v := s.view(arr)
		if len(v) < 8*count {
			return 0, fmt.Errorf("sim gemmBatched: array %#x of %d addresses overruns its allocation", uint64(arr), count)
		}
		return ptr(binary.LittleEndian.Uint64(v[8*i:])), nil
	}
	s.mu.Lock()
	s.launches["cublasGemmBatchedEx"]++
	s.mu.Unlock()
	for i := range count {
		a, err := addr(as, i)
		if err != nil {
			return err
		}
		b, err := addr(bs, i)
		if err != nil {
			return err
		}
		c, err := addr(cs, i)
		if err != nil {
			return err
		}
		if err := s.gemm(ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc); err != nil {
			return fmt.Errorf("product %d of %d: %w", i, count, err)
		}
	}
	return nil
}

// gemm is cublasGemmEx's definition: C = alpha·op(A)·op(B) + beta·C,
// column-major, float64 sums of the decoded inputs, rounded once.
func (s *simDevice) gemm(ta, tb cublas.Op, m, n, k int, alpha float32, a ptr, at cublas.DataType, lda int,
	b ptr, bt cublas.DataType, ldb int, beta float32, c ptr, ct cublas.DataType, ldc int) error {
	// cublasGemmEx with CUBLAS_COMPUTE_32F takes half inputs of one type
	// and writes float32 or that type, or float32 inputs and output (SGEMM).
	if at != bt || (at != cublas.R16BF && at != cublas.R16F && at != cublas.R32F) || (ct != cublas.R32F && ct != at) {
		return fmt.Errorf("sim gemm: types %d, %d, %d: not a combination cuBLAS supports", at, bt, ct)
	}
	rowsA, rowsB := k, n // rows of the stored A and B (column-major)
	if ta == cublas.OpN {
		rowsA = m
	}
	if tb == cublas.OpN {
		rowsB = k
	}
	if lda < max(1, rowsA) || ldb < max(1, rowsB) || ldc < max(1, m) {
		return fmt.Errorf("sim gemm: leading dimensions %d, %d, %d too small for %d×%d×%d", lda, ldb, ldc, m, n, k)
	}
	A, B, C := s.view(a), s.view(b), s.view(c)
	f16 := b2i(at == cublas.R16F)
	elem := func(x []byte, i int) float64 {
		if at == cublas.R32F {
			return float64(f32s(x)[i])
		}
		return float64(halfToF32(u16s(x)[i], f16))
	}
	// op(A) row i and op(B) column j as contiguous float64 vectors of k.
	decode := func(x []byte, t cublas.Op, ld, cols int, transposedIsRow bool) [][]float64 {
		out := make([][]float64, cols)
		for c := range cols {
			v := make([]float64, k)
			for l := range k {
				if (t == cublas.OpT) == transposedIsRow {
					v[l] = elem(x, l+c*ld)
				} else {
					v[l] = elem(x, c+l*ld)
				}
			}
			out[c] = v
		}
		return out
	}
	rowsOfA := decode(A, ta, lda, m, true)  // op(A)(i, l): A[l + i*lda] when transposed
	colsOfB := decode(B, tb, ldb, n, false) // op(B)(l, j): B[l + j*ldb] when not transposed
	store := func(i, j int, acc float64) {
		idx := i + j*ldc
		if ct == cublas.R32F {
			cf := f32s(C)
			old := float64(0)
			if beta != 0 {
				old = float64(beta) * float64(cf[idx])
			}
			cf[idx] = float32(float64(alpha)*acc + old)
			return
		}
		cb := u16s(C)
		old := float64(0)
		if beta != 0 {
			old = float64(beta) * float64(halfToF32(cb[idx], f16))
		}
		cb[idx] = f32ToHalf(float32(float64(alpha)*acc+old), f16)
	}
	// Four columns of C at a time: four independent chains, each summing
	// its products in order from l = 0 (the same bits as one at a time).
	const cols = 4
	var wg sync.WaitGroup
	workers := 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j0 := w * cols; j0 < n; j0 += workers * cols {
				if j0+cols > n {
					for j := j0; j < n; j++ {
						bj := colsOfB[j]
						for i := range m {
							var acc float64
							for l, av := range rowsOfA[i] {
								acc += av * bj[l]
							}
							store(i, j, acc)
						}
					}
					continue
				}
				b0, b1, b2, b3 := colsOfB[j0][:k], colsOfB[j0+1][:k], colsOfB[j0+2][:k], colsOfB[j0+3][:k]
				for i := range m {
					ai := rowsOfA[i][:k]
					var a0, a1, a2, a3 float64
					for l, av := range ai {
						a0 += av * b0[l]
						a1 += av * b1[l]
						a2 += av * b2[l]
						a3 += av * b3[l]
					}
					store(i, j0, a0)
					store(i, j0+1, a1)
					store(i, j0+2, a2)
					store(i, j0+3, a3)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}
