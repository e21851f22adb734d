package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"ppl.dev/kernels"
)

// hostDevice is the simulated device (copies, GEMM) whose kernel launches
// run the real CUDA C: each kernels/*.cu file compiled by a host C++
// compiler on the SIMT runtime of testdata/simt_host.h
// (testdata/kernel_host.cc, one binary per file, built on first use) and
// launched by testdata/simt_driver.h with the launch's grid, block and
// arguments. Device memory is files mapped shared, which the harness maps
// too: it runs the launch in threadIdx order and with one warp running
// ahead (the last, greedily), each on a private copy, fails when the two
// differ (a race on shared memory) and writes the first back. The engine's
// code runs unchanged on it, so a parity test that takes the "host" device
// (onDevicesAndHost) checks the kernels with the launch shapes and
// arguments of the CUDA backend against their CPU references, on machines
// without a GPU; a read past an allocation, a deadlock or (with the
// sanitizer) a misaligned vector access fails the launch.
type hostDevice struct {
	*simDevice
	cxx string

	mu     sync.Mutex
	ran    map[string]int // launches by kernel
	module map[string]string
	builds map[string]*hostBuild // by module
	mems   map[uint64]hostMem    // by address
}

var (
	hostOnce sync.Once
	hostEng  *Engine
	hostDir  string // the binaries and the memory's files, removed by TestMain
	hostErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if hostDir != "" {
		os.RemoveAll(hostDir)
	}
	os.Exit(code)
}

// hostEngine returns the engine on hostDevice, skipping the test when
// there is no host C++ compiler (failing with PPL_REQUIRE_CXX=1).
func hostEngine(t *testing.T) *Engine {
	t.Helper()
	cxx := hostCXX(t, "the kernels on the host")
	hostOnce.Do(func() {
		if hostDir, hostErr = os.MkdirTemp("", "ppl-simt-"); hostErr != nil {
			return
		}
		sim := &simDevice{mem: map[uint64][]byte{}, launches: map[string]int{}, laneFlash: true, roundAttention: true}
		hostEng = &Engine{Ordinal: -1, Name: "host SIMT", CC: [2]int{9, 0}, SMs: 1, Memory: 1 << 34, Driver: "simt",
			work: make(chan func()), SyncEach: true,
			dev: &hostDevice{simDevice: sim, cxx: cxx, ran: map[string]int{}, mems: map[uint64]hostMem{}}}
		ready := make(chan error)
		go hostEng.loop(func() error { return nil }, ready)
		<-ready
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return hostEng
}

// onDevicesAndHost runs f as onDevices does, and on the host device.
func onDevicesAndHost(t *testing.T, f func(t *testing.T, e *Engine)) {
	onDevices(t, f)
	t.Run("host", func(t *testing.T) { f(t, hostEngine(t)) })
}

// hostRan returns how many times the host device has launched kernel.
func hostRan(e *Engine, kernel string) int {
	h := e.dev.(*hostDevice)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ran[kernel]
}

// harness returns the binary that holds kernel. The first call starts
// building every module's (kernel's first), on as many goroutines as
// there are CPUs, so that later tests find theirs built.
func (h *hostDevice) harness(kernel string) (string, error) {
	h.mu.Lock()
	if h.builds == nil {
		h.module, h.builds = map[string]string{}, map[string]*hostBuild{}
		for _, mod := range kernels.Modules() {
			src, err := kernels.PTX(mod)
			if err != nil {
				h.mu.Unlock()
				return "", err
			}
			for _, m := range entryRe.FindAllStringSubmatch(string(src), -1) {
				h.module[m[1]] = mod
			}
			h.builds[mod] = &hostBuild{done: make(chan struct{})}
		}
		queue := make(chan string, len(h.builds))
		if mod, ok := h.module[kernel]; ok {
			queue <- mod
		}
		for _, mod := range kernels.Modules() {
			if mod != h.module[kernel] {
				queue <- mod
			}
		}
		close(queue)
		for range runtime.NumCPU() {
			go func() {
				for mod := range queue {
					h.build(mod)
				}
			}()
		}
	}
	mod, ok := h.module[kernel]
	b := h.builds[mod]
	h.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no kernel %s in the embedded PTX", kernel)
	}
	<-b.done
	return b.bin, b.err
}

// hostBuild is a module's harness binary, built when done is closed.
type hostBuild struct {
	done chan struct{}
	bin  string
	err  error
}

func (h *hostDevice) build(mod string) {
	h.mu.Lock()
	b := h.builds[mod]
	var list strings.Builder
	for k, m := range h.module {
		if m == mod {
			fmt.Fprintf(&list, "SIMT_KERNEL(%s) ", k)
		}
	}
	h.mu.Unlock()
	defer close(b.done)
	cu, err := filepath.Abs(filepath.Join("..", "..", "kernels", mod+".cu"))
	if err != nil {
		b.err = err
		return
	}
	b.bin = filepath.Join(hostDir, mod+".bin")
	_, b.err = compileSIMT(h.cxx, "testdata/kernel_host.cc", b.bin, `-DKERNEL_CU="`+cu+`"`, "-DKERNELS="+list.String())
}

// hostArg is an argument as testdata/simt_driver.h reads it.
type hostArg struct {
	Kind, Buf int32
	Bits      int64
}

// hostMem is an allocation: a file in hostDir mapped shared, the
// allocation its last bytes (rounded up to 16) so that the harness can map
// it ending at a page boundary.
type hostMem struct {
	path       string
	mapped     []byte
	bytes, pad int
}

func (h *hostDevice) alloc(n int64) (ptr, error) {
	if n >= simSpan {
		return 0, errors.New("simulated out of memory")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.simDevice
	s.mu.Lock()
	defer s.mu.Unlock()
	id := simNext.Add(1)
	base := id * simSpan
	m := hostMem{path: filepath.Join(hostDir, fmt.Sprint(id)), bytes: (int(n) + 15) &^ 15}
	size := (m.bytes + 4095) &^ 4095
	m.pad = size - m.bytes
	f, err := os.Create(m.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(int64(max(size, 1))); err != nil {
		return 0, err
	}
	if m.mapped, err = syscall.Mmap(int(f.Fd()), 0, max(size, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err != nil {
		return 0, err
	}
	b := m.mapped[m.pad : m.pad+int(n)]
	for i := range b {
		b[i] = 0xff // poison, as simDevice's
	}
	s.mem[base] = b
	s.used += n
	h.mems[base] = m
	return ptr(base), nil
}

func (h *hostDevice) free(p ptr) error {
	if err := h.simDevice.free(p); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.mems[uint64(p)]
	delete(h.mems, uint64(p))
	syscall.Munmap(m.mapped)
	return os.Remove(m.path)
}

func (h *hostDevice) launch(kernel string, grid, block dim3, args []any) error {
	if err := checkSignature(kernel, args); err != nil {
		return err
	}
	if block[0]*block[1]*block[2] > 1024 || block[0]%32 != 0 {
		return fmt.Errorf("bad block %v", block)
	}
	bin, err := h.harness(kernel)
	if err != nil {
		return err
	}
	// the allocations the pointers point into, each once
	var bufs strings.Builder
	index := map[uint64]int{}
	in := make([]hostArg, len(args))
	for i, a := range args {
		bits, err := argBits(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
		switch a.(type) {
		case ptr, buf:
			in[i] = hostArg{Kind: 0, Buf: -1}
			if bits == 0 {
				continue
			}
			base := bits / simSpan * simSpan
			h.simDevice.view(ptr(bits)) // panics outside an allocation
			j, ok := index[base]
			if !ok {
				j = len(index)
				index[base] = j
				h.mu.Lock()
				m := h.mems[base]
				h.mu.Unlock()
				fmt.Fprintf(&bufs, "%s %d %d\n", m.path, m.bytes, m.pad)
			}
			in[i] = hostArg{Kind: 0, Buf: int32(j), Bits: int64(bits - base)}
		case int, int32:
			in[i] = hostArg{Kind: 1, Bits: int64(bits)}
		case int64, uint64:
			in[i] = hostArg{Kind: 2, Bits: int64(bits)}
		case float32:
			in[i] = hostArg{Kind: 3, Bits: int64(bits)}
		case float64:
			in[i] = hostArg{Kind: 4, Bits: int64(bits)}
		}
	}
	var stdin bytes.Buffer
	fmt.Fprintf(&stdin, "%s %d %d %d %d %d %d %d %d\n%s", kernel, grid[0], grid[1], grid[2], block[0], block[1], block[2], len(index), len(in), bufs.String())
	binary.Write(&stdin, binary.LittleEndian, in)
	cmd := exec.Command(bin)
	cmd.Stdin = &stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s on the host: %v: %s", kernel, err, out)
	}
	h.mu.Lock()
	h.ran[kernel]++
	h.mu.Unlock()
	return nil
}

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

// compileSIMT compiles src, CUDA C on the SIMT runtime of
// testdata/simt_host.h, to bin with the further arguments more (-D
// definitions): -ffp-contract=off for the __*_rn intrinsics,
// -fno-strict-aliasing for the kernels' vector loads through pointer
// casts, and where the compiler has it the undefined behaviour sanitizer
// for what faults on a GPU: a misaligned vector load or store (the vector
// types have CUDA's alignments) and an index past a fixed-size array
// (__shared__ ones included). note says when it had to do without the
// sanitizer.
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
