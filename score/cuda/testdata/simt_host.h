// simt_host.h: a SIMT runtime on the host, so that the CUDA C of kernels
// whose threads cooperate (__syncthreads, warp shuffles, mma.sync) can be
// compiled by a host C++ compiler (C++17, g++ or clang++, Linux; no other
// dependency) and run with real per-thread semantics on machines without a
// GPU. A harness includes this header, then the kernel's .cu file, and
// launches with simt::launch(grid, block, [&] { kernel(args...); }).
//
// How a launch runs: the blocks of the grid one after another; within a
// block every CUDA thread is a fiber (its own stack and threadIdx), all on
// one OS thread. A scheduler resumes the fibers in turn (see Schedule
// below); a fiber runs until it waits at a barrier or returns. So plain
// loads and stores and atomics need nothing, and __shared__ variables are
// function-local statics (`#define __shared__ static`): one copy, which
// every thread of the running block sees. Before each block they are
// poisoned with 0xff bytes (NaN as floats and halves), so that reading
// shared memory no thread of the block wrote shows; the runtime finds them
// in the executable's symbol table (the _ZZ objects in .bss: it declares
// none itself).
//
// Barriers and warp collectives:
//   __syncthreads       waits for every thread of the block.
//   __shfl*_sync,       deposit the lane's value in its warp's slots, wait
//   __reduce_*_sync,    for the 32 lanes, read, wait again (the slots are
//   __any_sync          reused by the next collective).
//   simt_mma_m16n8k16_f16
//                       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32:
//                       the lanes deposit their A and B fragments (PTX ISA
//                       fragment layouts), wait, and each lane computes its
//                       four C elements: the 16 products of fp16 operands
//                       are exact, summed with C in float64 in k order and
//                       rounded once to float32 (the tensor cores' internal
//                       order and precision are unspecified; this is
//                       flashLanes' choice, so that the two agree), then a
//                       second wait.
//   simt_mma_m16n8k{32,16}_s8
//                       the integer ones (s32 += s8·s8), likewise; their
//                       sums are exact.
// Inline PTX cannot compile on the host: a kernel's helper that holds some
// keeps it under #ifdef __CUDA_ARCH__ and, in the #else branch, the host's
// equivalent (for mma.sync, a call of simt_mma_m16n8k16_f16); nvcc's
// output does not change.
//
// Checks. Only full-warp masks are supported. Every lane of a warp must be
// at the same collective, every thread of a block at the barrier: a thread
// that returned while others wait, or collectives that do not match, are
// reported (block, threads, what each waits at) and the process exits with
// status 3 instead of hanging. simt::alloc places each buffer so that it
// ends at an unmapped page (reading past it faults), 16-byte aligned; a
// fault is reported with the block and thread that made it (status 4).
// The vector types have CUDA's alignments, so that the undefined behaviour
// sanitizer (-fsanitize=alignment,bounds) reports the misaligned vector
// loads and stores that fault on a GPU, and indices past fixed-size arrays
// (__shared__ ones included). Schedule varies the order of the threads: a
// kernel whose output changes with it has a race.
//
// Arithmetic: the intrinsics are the host's float32 operations; compile
// with -ffp-contract=off (nvcc contracts a*b+c into fma by default, the
// __*_rn intrinsics excepted: results of plain expressions may differ from
// a GPU's in the last place) and -fno-strict-aliasing (the kernels' vector
// loads through pointer casts).
#pragma once

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <functional>
#include <link.h>
#include <string>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

// ---- CUDA's vocabulary.

struct dim3 {
	unsigned x = 1, y = 1, z = 1;
};
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

#define __device__
#define __host__
#define __global__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define __shared__ static

static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
// The rounded float32 operations give the GPU's canonical NaN (0x7fffffff),
// whatever NaN x86 would give (the first NaN operand quieted, or
// 0xffc00000 for an invalid operation): an H200 writes that NaN, so the
// host run sees the kernels' NaN bytes as the device does.
static inline float gpu_nan(float r) { return r != r ? __uint_as_float(0x7fffffffu) : r; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return gpu_nan(r); }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return gpu_nan(r); }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return gpu_nan(r); }
static inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return gpu_nan(r); }
static inline float __fmaf_rn(float a, float b, float c) { return gpu_nan(fmaf(a, b, c)); }
static inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
static inline double __dsub_rn(double a, double b) { volatile double r = a - b; return r; }
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
static inline double __ddiv_rn(double a, double b) { volatile double r = a / b; return r; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __fsqrt_rn(float x) { return gpu_nan(sqrtf(x)); }
static inline double __dsqrt_rn(double x) { return sqrt(x); }
static inline float __frcp_rn(float x) { volatile float r = 1.0f / x; return gpu_nan(r); }
static inline float __double2float_rn(double x) { volatile float r = (float)x; return gpu_nan(r); }
static inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
static inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }
// __expf and __logf: glibc declares them (its expf and logf).
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x != x ? 0.0f : x; }
// __float2int_rn: nearest, ties to even (the default rounding mode) for
// values in int's range, which is all the kernels convert.
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
using std::isinf;
using std::max;
using std::min;
using std::signbit;

namespace simt {

// Context switches: on x86-64 a few instructions that swap the callee-saved
// registers and the stack pointer (swapcontext also saves the signal mask,
// a system call each time, which made the harness several times slower);
// elsewhere, or with SIMT_UCONTEXT defined, ucontext.
#if defined(__x86_64__) && !defined(SIMT_UCONTEXT)
extern "C" void simt_switch(void** from, void* to);
asm(R"(
	.text
	.weak simt_switch
	.type simt_switch, @function
simt_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size simt_switch, .-simt_switch
)");
struct Context {
	void* sp;
};
inline void jump(Context& from, Context& to) { simt_switch(&from.sp, to.sp); }
// start makes c run fn (which never returns) on the stack [lo, lo+size).
inline void start(Context& c, char* lo, size_t size, void (*fn)()) {
	void** sp = (void**)(((uintptr_t)(lo + size)) & ~(uintptr_t)15);
	*--sp = nullptr;     // fn's return address: none
	*--sp = (void*)fn;   // simt_switch's
	for (int i = 0; i < 6; i++) *--sp = nullptr; // rbp rbx r12..r15
	c.sp = sp;
}
#else
struct Context {
	ucontext_t uc;
};
inline void jump(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
inline void start(Context& c, char* lo, size_t size, void (*fn)()) {
	getcontext(&c.uc);
	c.uc.uc_stack.ss_sp = lo;
	c.uc.uc_stack.ss_size = size;
	c.uc.uc_link = nullptr;
	makecontext(&c.uc, fn, 0);
}
#endif

enum State { ready, atBlock, atWarp, done };

struct Fiber {
	Context ctx;
	char* stack = nullptr;
	dim3 tid;
	int linear = 0;
	State state = ready;
	unsigned gen = 0; // the barrier generation the fiber waits to end
};

// Warp: the slots of the collectives and the warp barrier.
struct Warp {
	int size = 0, arrived = 0;
	unsigned gen = 0;
	const char* op = nullptr; // the collective the arrived lanes are at
	unsigned long long slot[32];
	unsigned a[32][4], b[32][2];
};

constexpr size_t stackBytes = 256 << 10;

inline dim3 gridDim_, blockDim_, blockIdx_;
inline Fiber* cur = nullptr;
inline std::vector<Fiber> fibers;
inline std::vector<Warp> warps;
inline Context sched;
inline int blockArrived = 0;
inline unsigned blockGen = 0;
inline std::function<void()> body;
inline std::vector<std::pair<char*, size_t>> sharedVars;
inline bool sharedFound = false;

[[noreturn]] inline void fail(int status, const char* what) {
	fprintf(stderr, "simt: block (%u,%u,%u): %s\n", blockIdx_.x, blockIdx_.y, blockIdx_.z, what);
	fflush(stderr);
	_exit(status);
}

// findShared lists the function-local statics of this executable (the
// kernels' __shared__ variables: _ZZ symbols in .bss) from its symbol
// table; the runtime itself declares none.
inline void findShared() {
	sharedFound = true;
	uintptr_t bias = 0;
	dl_iterate_phdr(
	    [](dl_phdr_info* info, size_t, void* p) {
		    *(uintptr_t*)p = info->dlpi_addr;
		    return 1; // the executable comes first
	    },
	    &bias);
	FILE* f = fopen("/proc/self/exe", "rb");
	if (!f) fail(5, "cannot read /proc/self/exe for the __shared__ variables");
	std::vector<char> img;
	char buf[1 << 16];
	size_t k;
	while ((k = fread(buf, 1, sizeof buf, f)) > 0) img.insert(img.end(), buf, buf + k);
	fclose(f);
	auto eh = (const Elf64_Ehdr*)img.data();
	auto sh = (const Elf64_Shdr*)(img.data() + eh->e_shoff);
	const char* shstr = img.data() + sh[eh->e_shstrndx].sh_offset;
	bool symtab = false;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_SYMTAB) continue;
		symtab = true;
		auto sym = (const Elf64_Sym*)(img.data() + sh[i].sh_offset);
		const char* str = img.data() + sh[sh[i].sh_link].sh_offset;
		for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); j++) {
			const Elf64_Sym& s = sym[j];
			if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || s.st_shndx == SHN_UNDEF || s.st_shndx >= eh->e_shnum) continue;
			if (strncmp(str + s.st_name, "_ZZ", 3) != 0) continue;
			if (strncmp(shstr + sh[s.st_shndx].sh_name, ".bss", 4) != 0) continue;
			sharedVars.push_back({(char*)(bias + s.st_value), (size_t)s.st_size});
		}
	}
	if (!symtab) fail(5, "no symbol table to find the __shared__ variables in (a stripped binary?)");
}

inline void poisonShared() {
	if (!sharedFound) findShared();
	for (auto& v : sharedVars) memset(v.first, 0xff, v.second);
}

inline void yield() { jump(cur->ctx, sched); }

// syncthreads: the block barrier.
inline void syncthreads() {
	if (++blockArrived == (int)fibers.size()) {
		blockArrived = 0;
		blockGen++;
		return;
	}
	cur->state = atBlock;
	cur->gen = blockGen;
	yield();
}

inline Warp& warpOf() { return warps[cur->linear / 32]; }
inline int lane() { return cur->linear % 32; }

// warpSync: the warp barrier of the collective op.
inline void warpSync(const char* op, unsigned mask) {
	Warp& w = warpOf();
	unsigned full = w.size == 32 ? 0xffffffffu : (1u << w.size) - 1;
	if ((mask & full) != full) {
		char msg[160];
		snprintf(msg, sizeof msg, "thread %d: %s with mask %#x: only full warps are supported", cur->linear, op, mask);
		fail(3, msg);
	}
	if (w.arrived == 0) {
		w.op = op;
	} else if (strcmp(w.op, op) != 0) {
		char msg[200];
		snprintf(msg, sizeof msg, "thread %d at %s while lanes of its warp wait at %s", cur->linear, op, w.op);
		fail(3, msg);
	}
	if (++w.arrived == w.size) {
		w.arrived = 0;
		w.gen++;
		return;
	}
	cur->state = atWarp;
	cur->gen = w.gen;
	yield();
}

template <class T> T exchange(const char* op, unsigned mask, T v, int src) {
	static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
	Warp& w = warpOf();
	memcpy(&w.slot[lane()], &v, sizeof v);
	warpSync(op, mask);
	T r;
	memcpy(&r, &w.slot[src], sizeof r);
	warpSync(op, mask);
	return r;
}

inline void report(const char* what) {
	std::string msg = what;
	msg += ":";
	// threads in runs of one state
	auto what_ = [](const Fiber& f) -> std::string {
		if (f.state == done) return "returned";
		if (f.state == atBlock) return "wait at __syncthreads";
		return std::string("wait at ") + warps[f.linear / 32].op;
	};
	for (size_t i = 0; i < fibers.size();) {
		size_t j = i;
		while (j + 1 < fibers.size() && what_(fibers[j + 1]) == what_(fibers[i])) j++;
		msg += " threads " + std::to_string(i) + ".." + std::to_string(j) + " " + what_(fibers[i]) + ";";
		i = j + 1;
	}
	fail(3, msg.c_str());
}

inline void entry() {
	body();
	cur->state = done;
	jump(cur->ctx, sched); // never resumed
	abort();
}

inline char altstack[1 << 16];

inline void onFault(int sig, siginfo_t* si, void*) {
	char msg[200];
	snprintf(msg, sizeof msg, "simt: block (%u,%u,%u) thread (%u,%u,%u): signal %d at address %p\n", blockIdx_.x, blockIdx_.y,
	         blockIdx_.z, cur ? cur->tid.x : 0, cur ? cur->tid.y : 0, cur ? cur->tid.z : 0, sig, si->si_addr);
	if (write(2, msg, strlen(msg)) < 0) {}
	_exit(4);
}

inline bool handlerInstalled = false;

inline void installFaultHandler() {
	if (handlerInstalled) return;
	handlerInstalled = true;
	stack_t ss = {};
	ss.ss_sp = altstack;
	ss.ss_size = sizeof altstack;
	sigaltstack(&ss, nullptr);
	struct sigaction sa = {};
	sa.sa_sigaction = onFault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigaction(SIGSEGV, &sa, nullptr);
	sigaction(SIGBUS, &sa, nullptr);
	sigaction(SIGFPE, &sa, nullptr);
}

// The schedule: the order in which the scheduler resumes the threads, by
// threadIdx or, reverse, from the last; greedy, it always resumes the
// first thread of that order that can run, so that a warp runs ahead of
// the others as far as the barriers let it (otherwise the warps advance
// about one collective a pass, in step). A kernel whose output depends on
// the schedule has a race: some thread reads shared memory that another
// writes with no barrier between.
struct Schedule {
	bool reverse = false, greedy = false;
};
inline Schedule schedule;
inline std::vector<int> order;

// launch runs kernel() (a call of the kernel with its arguments) over the
// grid with blocks of block threads.
inline void launch(dim3 grid, dim3 block, std::function<void()> kernel) {
	installFaultHandler();
	int nt = (int)(block.x * block.y * block.z);
	if (nt <= 0 || nt > 1024) fail(3, "block size out of range");
	gridDim_ = grid;
	blockDim_ = block;
	body = std::move(kernel);
	fibers.resize(nt);
	order.resize(nt);
	for (int i = 0; i < nt; i++) order[i] = schedule.reverse ? nt - 1 - i : i;
	warps.assign((nt + 31) / 32, Warp{});
	for (int i = 0; i < (int)warps.size(); i++) warps[i].size = std::min(32, nt - 32 * i);
	for (int i = 0; i < nt; i++) {
		Fiber& f = fibers[i];
		if (!f.stack) {
			// a guard page below each stack
			char* p = (char*)mmap(nullptr, stackBytes + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED) fail(5, "mmap of a fiber stack");
			mprotect(p, 4096, PROT_NONE);
			f.stack = p + 4096;
		}
		f.linear = i;
		f.tid = {(unsigned)(i % block.x), (unsigned)(i / block.x % block.y), (unsigned)(i / (block.x * block.y))};
	}
	for (unsigned bz = 0; bz < grid.z; bz++)
		for (unsigned by = 0; by < grid.y; by++)
			for (unsigned bx = 0; bx < grid.x; bx++) {
				blockIdx_ = {bx, by, bz};
				poisonShared();
				blockArrived = 0;
				for (auto& w : warps) w.arrived = 0, w.op = nullptr;
				for (auto& f : fibers) {
					start(f.ctx, f.stack, stackBytes, entry);
					f.state = ready;
				}
				for (;;) {
					bool progress = false, all = true;
					for (int i : order) {
						Fiber& f = fibers[i];
						if (f.state == done) continue;
						all = false;
						if (f.state == atBlock && f.gen == blockGen) continue;
						if (f.state == atWarp && f.gen == warps[f.linear / 32].gen) continue;
						f.state = ready;
						cur = &f;
						jump(sched, f.ctx);
						progress = true;
						if (schedule.greedy) break;
					}
					cur = nullptr;
					if (all) break;
					if (!progress) report("deadlock");
				}
			}
}

// alloc returns bytes of zeroed memory that end at an unmapped page (the
// start 16-byte aligned, so up to 15 bytes past the end go unnoticed);
// never freed.
inline void* alloc(size_t bytes) {
	size_t b = (bytes + 15) & ~(size_t)15, pages = (b + 4095) / 4096;
	char* p = (char*)mmap(nullptr, (pages + 1) * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) fail(5, "mmap of a buffer");
	mprotect(p + pages * 4096, 4096, PROT_NONE);
	return p + pages * 4096 - b;
}

} // namespace simt

#define threadIdx (simt::cur->tid)
#define blockIdx (simt::blockIdx_)
#define blockDim (simt::blockDim_)
#define gridDim (simt::gridDim_)
#define warpSize 32

static inline void __syncthreads() { simt::syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { simt::warpSync("__syncwarp", mask); }

template <class T> T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
	int l = simt::lane();
	return simt::exchange("__shfl_sync", mask, v, (l & ~(width - 1)) + (src & (width - 1)));
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
	int l = simt::lane(), s = l ^ m;
	if (s >= ((l / width) + 1) * width) s = l; // a later group: the lane's own value
	return simt::exchange("__shfl_xor_sync", mask, v, s);
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
	int l = simt::lane(), s = l + (int)d;
	if (s >= ((l / width) + 1) * width) s = l;
	return simt::exchange("__shfl_down_sync", mask, v, s);
}
template <class T> T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
	int l = simt::lane(), s = l - (int)d;
	if (s < (l / width) * width) s = l;
	return simt::exchange("__shfl_up_sync", mask, v, s);
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
	simt::Warp& w = simt::warpOf();
	w.slot[simt::lane()] = v;
	simt::warpSync("__reduce_max_sync", mask);
	unsigned r = 0;
	for (int i = 0; i < w.size; i++) r = std::max(r, (unsigned)w.slot[i]);
	simt::warpSync("__reduce_max_sync", mask);
	return r;
}
static inline int __any_sync(unsigned mask, int pred) {
	simt::Warp& w = simt::warpOf();
	w.slot[simt::lane()] = pred != 0;
	simt::warpSync("__any_sync", mask);
	int r = 0;
	for (int i = 0; i < w.size; i++) r |= w.slot[i] != 0;
	simt::warpSync("__any_sync", mask);
	return r;
}
static inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; *p = std::max(o, v); return o; }
static inline int atomicMax(int* p, int v) { int o = *p; *p = std::max(o, v); return o; }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p = o + v; return o; }
static inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }

// simt_mma_m16n8k16_f16: c (16×8 f32) += a (16×16 fp16, row) · b (16×8
// fp16, col), the warp's mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// with the PTX ISA's fragment layouts (gid = lane/4, tig = lane%4):
//   A regs 0..3: (row gid, cols 2tig..+1), (gid+8, 2tig..), (gid, 2tig+8..), (gid+8, 2tig+8..)
//   B regs 0..1: (rows 2tig..+1, col gid), (rows 2tig+8..+9, col gid)
//   C 0..3:      (gid, 2tig), (gid, 2tig+1), (gid+8, 2tig), (gid+8, 2tig+1)
// the low half of a register holding the lower column (A) or row (B).
static inline float simt_f16(unsigned short h);
static inline void simt_mma_m16n8k16_f16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
	simt::Warp& w = simt::warpOf();
	int l = simt::lane();
	memcpy(w.a[l], a, sizeof w.a[l]);
	w.b[l][0] = b0, w.b[l][1] = b1;
	simt::warpSync("mma.sync.m16n8k16", 0xffffffffu);
	if (w.size != 32) simt::fail(3, "mma.sync in a partial warp");
	auto A = [&](int r, int k) {
		unsigned reg = w.a[(r & 7) * 4 + (k & 7) / 2][(r >= 8) + 2 * (k >= 8)];
		return (double)simt_f16((unsigned short)(k & 1 ? reg >> 16 : reg & 0xffffu));
	};
	auto B = [&](int k, int col) {
		unsigned reg = w.b[col * 4 + (k & 7) / 2][k >= 8];
		return (double)simt_f16((unsigned short)(k & 1 ? reg >> 16 : reg & 0xffffu));
	};
	const int gid = l >> 2, tig = l & 3;
	float r[4];
	for (int e = 0; e < 4; e++) {
		int row = gid + (e >= 2 ? 8 : 0), col = 2 * tig + (e & 1);
		double s = c[e];
		for (int k = 0; k < 16; k++) s += A(row, k) * B(k, col);
		r[e] = (float)s;
	}
	simt::warpSync("mma.sync.m16n8k16", 0xffffffffu);
	memcpy(c, r, sizeof r);
}

// simt_mma_m16n8k32_s8, simt_mma_m16n8k16_s8: c (16×8 s32) += a · b, the
// warp's mma.sync.aligned.m16n8k{32,16}.row.col.s32.s8.s8.s32 (wrapping
// int32 sums, exact: the integer tensor cores' result is defined), four
// signed bytes per register, the lowest byte the lowest column (A) or row
// (B):
//   k32 A regs 0..3: (row gid, cols 4tig..+3), (gid+8, 4tig..), (gid, 4tig+16..), (gid+8, 4tig+16..)
//       B regs 0..1: (rows 4tig..+3, col gid), (rows 4tig+16..+19, col gid)
//   k16 A regs 0..1 and B reg 0 as k32's first ones
//   C 0..3 as simt_mma_m16n8k16_f16's.
static inline void simt_mma_s8(const char* what, int kdim, int* c, const unsigned* a, unsigned b0, unsigned b1) {
	simt::Warp& w = simt::warpOf();
	int l = simt::lane();
	memcpy(w.a[l], a, (kdim / 8) * sizeof(unsigned));
	w.b[l][0] = b0, w.b[l][1] = b1;
	simt::warpSync(what, 0xffffffffu);
	if (w.size != 32) simt::fail(3, "mma.sync in a partial warp");
	auto byte = [](unsigned reg, int k) { return (int)(signed char)(reg >> (8 * (k & 3))); };
	auto A = [&](int r, int k) { return byte(w.a[(r & 7) * 4 + (k & 15) / 4][(r >= 8) + 2 * (k >= 16)], k); };
	auto B = [&](int k, int col) { return byte(w.b[col * 4 + (k & 15) / 4][k >= 16], k); };
	const int gid = l >> 2, tig = l & 3;
	int r[4];
	for (int e = 0; e < 4; e++) {
		int row = gid + (e >= 2 ? 8 : 0), col = 2 * tig + (e & 1);
		unsigned s = (unsigned)c[e];
		for (int k = 0; k < kdim; k++) s += (unsigned)(A(row, k) * B(k, col));
		r[e] = (int)s;
	}
	simt::warpSync(what, 0xffffffffu);
	memcpy(c, r, sizeof r);
}
static inline void simt_mma_m16n8k32_s8(int* c, const unsigned* a, unsigned b0, unsigned b1) {
	simt_mma_s8("mma.sync.m16n8k32.s8", 32, c, a, b0, b1);
}
static inline void simt_mma_m16n8k16_s8(int* c, const unsigned* a, unsigned b0) {
	simt_mma_s8("mma.sync.m16n8k16.s8", 16, c, a, b0, 0);
}

// simt_f16: binary16 -> float32, exact.
static inline float simt_f16(unsigned short h) {
	unsigned sign = (unsigned)(h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
	if (e == 0) {
		float v = (float)m * 5.9604644775390625e-08f;
		return __uint_as_float(sign | __float_as_uint(v));
	}
	if (e == 0x7c00u) return __uint_as_float(sign | 0x7f800000u | (m << 13));
	return __uint_as_float(sign | (((unsigned)(h & 0x7fffu) << 13) + ((127u - 15u) << 23)));
}
