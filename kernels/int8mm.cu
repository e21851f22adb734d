// Products in the int8 mode (--activations int8): activations quantized to
// 8 bits per block as llama.cpp quantizes them on the CPU, multiplied with
// the weights' integer form (i8dec_* in dequant.cu) on the integer tensor
// cores, exact in int32, and combined per group in float32 in the CPU int8
// kernel's order.
//
// CPU reference: package nn's int8 mode (score/nn/int8.go): quantQ80Generic
// and quantQ8KGeneric for quant_acts, int8Generic for i8mm_g32 and
// i8mm_g16. Every float32 operation is the reference's, in its order and
// each rounded once (__fdiv_rn, __fmul_rn, __fmaf_rn), and every integer
// sum is exact, so the codes, the scales and each output are the
// reference's bits: the order over groups is the only one there is here,
// one fused multiply-add per group from the first.
#include "common.cuh"

// rne32: v rounded to the nearest integer, ties to even, clamped to
// [-127, 127]; NaN and values outside int32 give -127 (nn's rne32: x86's
// "integer indefinite", then the clamp).
__device__ __forceinline__ int rne32(float v) {
	if (v != v || v < -2147483648.0f || v >= 2147483648.0f) return -127;
	return min(127, max(-127, __float2int_rn(v)));
}

// quant_acts: rows n of x (k floats each, row t at x + t·ldx) quantized in
// blocks of ab values, 32 (Q8_0) or 256 (Q8_K):
//   q  (n × k int8)         the codes
//   d  (n × k/32 floats)    each block of 32's scale (the 8 of a Q8_K block
//                           share theirs)
//   xs (n × k/16 int32)     Σ q over each 16
// Q8_0: amax = max |x|, d = f16(amax/127) (amax/127 if that overflows
// f16), q = rne(x·(127/amax)). Q8_K: xm = the first x of largest
// magnitude, iscale = -127/xm, q = rne(iscale·x), d = 1/iscale. A block
// with a NaN gets d = NaN (0x7fc00000) and q = 0; one whose amax is below
// 1e-30 d = 0 and q = 0. One thread per block, grid-stride.
extern "C" __global__ void quant_acts(signed char* __restrict__ q, float* __restrict__ d, int* __restrict__ xs,
                                      const float* __restrict__ x, int n, int k, i64 ldx, int ab) {
	const int per = k / ab;
	for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < (i64)n * per; u += (i64)gridDim.x * blockDim.x) {
		const i64 t = u / per;
		const int c0 = (int)(u % per) * ab;
		const float* xb = x + t * ldx + c0;
		signed char* qb = q + t * k + c0;
		float* db = d + t * (k / 32) + c0 / 32;
		int* sb = xs + t * (k / 16) + c0 / 16;
		bool nan = false;
		float amax = 0, scale = 0, dv;
		if (ab == 32) {
			for (int i = 0; i < 32; i++) {
				amax = fmaxf(amax, fabsf(xb[i]));
				nan = nan || xb[i] != xb[i];
			}
			if (nan) {
				dv = __uint_as_float(0x7fc00000u);
			} else if (amax < 1e-30f) {
				dv = 0;
			} else {
				float df = __fdiv_rn(amax, 127.0f);
				dv = f16_to_f32(f32_to_f16(df));
				if (isinf(dv)) dv = df;
				scale = __fdiv_rn(127.0f, amax);
			}
		} else {
			float xm = 0;
			for (int i = 0; i < 256; i++) {
				float a = fabsf(xb[i]);
				if (a > amax) amax = a, xm = xb[i];
				nan = nan || xb[i] != xb[i];
			}
			dv = 0;
			if (nan) {
				dv = __uint_as_float(0x7fc00000u);
			} else if (amax >= 1e-30f) {
				scale = __fdiv_rn(-127.0f, xm);
				dv = __fdiv_rn(1.0f, scale);
			}
		}
		for (int b = 0; b < ab / 32; b++) db[b] = dv;
		for (int j = 0; j < ab / 16; j++) {
			int s = 0;
			for (int i = 16 * j; i < 16 * j + 16; i++) {
				int v = nan ? 0 : rne32(__fmul_rn(xb[i], scale));
				qb[i] = (signed char)v;
				s += v;
			}
			sb[j] = s;
		}
	}
}

// The integer tensor-core products, c (16×8 s32) += a · b:
//   mma_s8_k32: a 16×32 s8 (row), b 32×8 s8 (col); 4 bytes per register:
//     A regs 0..3: (row gid, cols 4tig..+3), (gid+8, 4tig..), (gid, 4tig+16..), (gid+8, 4tig+16..)
//     B regs 0..1: (rows 4tig..+3, col gid), (rows 4tig+16..+19, col gid)
//   mma_s8_k16: a 16×16 (regs 0..1 as k32's 0..1), b 16×8 (reg 0 as k32's)
//   C 0..3: (gid, 2tig), (gid, 2tig+1), (gid+8, 2tig), (gid+8, 2tig+1)
// gid = lane/4, tig = lane%4, the lowest byte holding the lowest column
// (A) or row (B) (PTX ISA, "Matrix Fragments for mma.m16n8k32").
__device__ __forceinline__ void mma_s8_k32(int* c, const u32* a, u32 b0, u32 b1) {
#ifdef __CUDA_ARCH__
	asm volatile(
	    "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
	simt_mma_m16n8k32_s8(c, a, b0, b1); // the host harness (score/cuda/testdata/simt_host.h)
#endif
}

__device__ __forceinline__ void mma_s8_k16(int* c, const u32* a, u32 b0) {
#ifdef __CUDA_ARCH__
	asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
	             : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(b0));
#else
	simt_mma_m16n8k16_s8(c, a, b0);
#endif
}

// cp_async<N> copies N bytes (16 or 4) from global src to shared dst
// without going through registers (cp.async, sm_80), or writes zeros there
// when !ok (src is then not read); the bytes are there once
// cp_async_wait<W> leaves at most W later commit groups pending and a
// barrier has passed. On the host (simt_host.h) it copies at once.
template <int N>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool ok) {
#ifdef __CUDA_ARCH__
	const u32 d = (u32)__cvta_generic_to_shared(dst);
	if (N == 16) // .cg (through L2 only) takes 16 bytes only
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
	else
		asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(N), "r"(ok ? N : 0));
#else
	if (ok)
		memcpy(dst, src, N);
	else
		memset(dst, 0, N);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int W>
__device__ __forceinline__ void cp_async_wait() {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.wait_group %0;\n" ::"n"(W));
#endif
}

// i8_float is t as a float32, exactly, for |t| < 2^22 (a group's integer
// products: |T| <= 32·128·127): t added to the bits of 1.5·2^23, whose
// float's last place is 1, less 1.5·2^23. An integer add and a float
// subtract instead of a conversion, which the SMs issue at a quarter of
// the rate of float32 operations.
__device__ __forceinline__ float i8_float(int t) { return __fsub_rn(__int_as_float(t + 0x4B400000), 12582912.0f); }

// i8mm: y (n × rows, row t at y + t·ldy) = x · Wᵀ in the int8 mode, with
//   x: activations from quant_acts (qa, da, xsa; row t of them being
//      idx[t] when idx is not null: an expert's tokens), k values each;
//   W: rows weight rows in integer form (qw: rows × k int8, the weight's
//      integer minus its offset; sw and, for types with a minimum, mw:
//      rows × k/G floats; mw null otherwise), groups of G = 32 or 16.
// Per output, over the groups j in order from f = 0 (nn's int8Generic):
//   T = Σ_{i in j} qw·qa (exact in int32)
//   f = fma(float(T), S_j·d_b, f),   b the block of 32 holding group j
//   f = fma(M_j, d_b·float(Σ_{i in j} qa), f)   with a minimum
//
// Tiles: a block of 4 warps computes 64 tokens × 64 weight rows, each warp
// 32 × 32 (2 × 4 mma tiles); k goes through shared memory KC bytes at a
// time (128 for G = 32, 64 for G = 16; a multiple of 32 at the end of a
// row), with the chunk's scales, minima, activation scales and sums,
// in two buffers: cp.async fetches the next chunk while the tensor cores
// work on this one. Rows are padded by 16 bytes so that a warp's fragment
// loads hit 32 banks. Tokens past n and rows past rows read as zeros and
// are not stored. Grid: (⌈rows/64⌉, ⌈n/64⌉), 128 threads.
#define I8_TILE 64

// The block's tokens are t0 .. t0+63 (row t of the activations idx[t],
// or rbase + t without idx).
template <int G>
__device__ __forceinline__ void i8mm_body(float* __restrict__ y, int ldy, const signed char* __restrict__ qa,
                                          const float* __restrict__ da, const int* __restrict__ xsa,
                                          const int* __restrict__ idx, i64 rbase, int n, int t0, int k,
                                          const signed char* __restrict__ qw, const float* __restrict__ sw,
                                          const float* __restrict__ mw, int rows) {
	constexpr int KC = G == 32 ? 128 : 64; // bytes of a row per chunk
	constexpr int STR = KC + 16;           // a tile row in shared memory
	constexpr int NG = KC / G, NB = KC / 32, NX = KC / 16 + 1; // groups, blocks of 32, sums of 16 (padded) per chunk
	__shared__ __align__(16) signed char as[2][I8_TILE * STR];
	__shared__ __align__(16) signed char bs[2][I8_TILE * STR];
	__shared__ float ss[2][I8_TILE * NG], ms[2][I8_TILE * NG], dss[2][I8_TILE * NB];
	__shared__ int xss[2][I8_TILE * NX];
	__shared__ i64 tsrc[I8_TILE]; // each token's row of the activations, -1 past n
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
	const int r0 = blockIdx.x * I8_TILE;
	const int wt = (warp >> 1) * 32, wr = (warp & 1) * 32;
	const int nb = k / 32, ng = k / G;
	for (int i = tid; i < I8_TILE; i += blockDim.x) {
		int t = t0 + i;
		tsrc[i] = t < n ? (idx ? (i64)idx[t] : rbase + t) : -1;
	}
	__syncthreads();

	// fetch issues the copies of the chunk at k0 into buffer c.
	auto fetch = [&](int c, int k0) {
		const int cw = min(KC, k - k0), vec = cw / 16;
		for (int i = tid; i < I8_TILE * vec; i += blockDim.x) {
			int rr = i / vec, v = i - rr * vec;
			i64 ts = tsrc[rr];
			int r = r0 + rr;
			cp_async<16>(as[c] + rr * STR + 16 * v, ts >= 0 ? qa + ts * k + k0 + 16 * v : qa, ts >= 0);
			cp_async<16>(bs[c] + rr * STR + 16 * v, r < rows ? qw + (i64)r * k + k0 + 16 * v : qw, r < rows);
		}
		const int gc = cw / G, j0 = k0 / G;
		for (int i = tid; i < I8_TILE * gc; i += blockDim.x) {
			int rr = i / gc, jj = i - rr * gc, r = r0 + rr;
			const i64 o = (i64)r * ng + j0 + jj;
			cp_async<4>(&ss[c][rr * NG + jj], r < rows ? sw + o : sw, r < rows);
			if (mw) cp_async<4>(&ms[c][rr * NG + jj], r < rows ? mw + o : mw, r < rows);
		}
		const int bc = cw / 32;
		for (int i = tid; i < I8_TILE * bc; i += blockDim.x) {
			int tt = i / bc, bb = i - tt * bc;
			i64 ts = tsrc[tt];
			cp_async<4>(&dss[c][tt * NB + bb], ts >= 0 ? da + ts * nb + k0 / 32 + bb : da, ts >= 0);
		}
		if (mw)
			for (int i = tid; i < I8_TILE * vec; i += blockDim.x) {
				int tt = i / vec, xx = i - tt * vec;
				i64 ts = tsrc[tt];
				cp_async<4>(&xss[c][tt * NX + xx], ts >= 0 ? xsa + ts * (k / 16) + k0 / 16 + xx : xsa, ts >= 0);
			}
	};

	float f[2][4][4];
	for (int mt = 0; mt < 2; mt++)
		for (int nt = 0; nt < 4; nt++)
			for (int e = 0; e < 4; e++) f[mt][nt][e] = 0;

	fetch(0, 0);
	cp_async_commit();
	for (int k0 = 0, c = 0; k0 < k; k0 += KC, c ^= 1) {
		if (k0 + KC < k) fetch(c ^ 1, k0 + KC);
		cp_async_commit();
		cp_async_wait<1>(); // this chunk's copies are done, the next one's may not be
		__syncthreads();
		const int cw = min(KC, k - k0);
		const signed char *A = as[c], *B = bs[c];
		for (int kk = 0; kk < cw; kk += 32) {
			float dv[2][2];
			for (int mt = 0; mt < 2; mt++)
				for (int h = 0; h < 2; h++) dv[mt][h] = dss[c][(wt + 16 * mt + gid + 8 * h) * NB + kk / 32];
			for (int s = 0; s < 32 / G; s++) {
				const int jj = kk / G + s, ko = kk + 16 * s;
				u32 a[2][4], bw[4][2];
				for (int mt = 0; mt < 2; mt++) {
					const signed char* lo = A + (wt + 16 * mt + gid) * STR + ko + 4 * tig;
					a[mt][0] = *(const u32*)lo;
					a[mt][1] = *(const u32*)(lo + 8 * STR);
					if (G == 32) {
						a[mt][2] = *(const u32*)(lo + 16);
						a[mt][3] = *(const u32*)(lo + 8 * STR + 16);
					}
				}
				for (int nt = 0; nt < 4; nt++) {
					const signed char* p = B + (wr + 8 * nt + gid) * STR + ko + 4 * tig;
					bw[nt][0] = *(const u32*)p;
					if (G == 32) bw[nt][1] = *(const u32*)(p + 16);
				}
				float sv[4][2], mv[4][2], ds[2][2];
				for (int nt = 0; nt < 4; nt++)
					for (int cc = 0; cc < 2; cc++) {
						const int rr = wr + 8 * nt + 2 * tig + cc;
						sv[nt][cc] = ss[c][rr * NG + jj];
						mv[nt][cc] = mw ? ms[c][rr * NG + jj] : 0.0f;
					}
				if (mw)
					for (int mt = 0; mt < 2; mt++)
						for (int h = 0; h < 2; h++) {
							const int* xs = &xss[c][(wt + 16 * mt + gid + 8 * h) * NX + ko / 16];
							ds[mt][h] = __fmul_rn(dv[mt][h], i8_float(G == 32 ? xs[0] + xs[1] : xs[0]));
						}
				for (int mt = 0; mt < 2; mt++)
					for (int nt = 0; nt < 4; nt++) {
						int acc[4] = {0, 0, 0, 0};
						if (G == 32)
							mma_s8_k32(acc, a[mt], bw[nt][0], bw[nt][1]);
						else
							mma_s8_k16(acc, a[mt], bw[nt][0]);
						for (int e = 0; e < 4; e++) {
							const int h = e >> 1, cc = e & 1;
							float v = __fmaf_rn(i8_float(acc[e]), __fmul_rn(sv[nt][cc], dv[mt][h]), f[mt][nt][e]);
							if (mw) v = __fmaf_rn(mv[nt][cc], ds[mt][h], v);
							f[mt][nt][e] = v;
						}
					}
			}
		}
		__syncthreads(); // this buffer is read: the next iteration fetches into it
	}
	for (int mt = 0; mt < 2; mt++)
		for (int h = 0; h < 2; h++) {
			int t = t0 + wt + 16 * mt + gid + 8 * h;
			if (t >= n) continue;
			for (int nt = 0; nt < 4; nt++)
				for (int cc = 0; cc < 2; cc++) {
					int r = r0 + wr + 8 * nt + 2 * tig + cc;
					if (r < rows) y[(i64)t * ldy + r] = f[mt][nt][2 * h + cc];
				}
		}
}

extern "C" __global__ void __launch_bounds__(128)
    i8mm_g32(float* y, int ldy, const signed char* qa, const float* da, const int* xsa, const int* idx, int n, int k,
             const signed char* qw, const float* sw, const float* mw, int rows) {
	i8mm_body<32>(y, ldy, qa, da, xsa, idx, 0, n, blockIdx.y * I8_TILE, k, qw, sw, mw, rows);
}

extern "C" __global__ void __launch_bounds__(128)
    i8mm_g16(float* y, int ldy, const signed char* qa, const float* da, const int* xsa, const int* idx, int n, int k,
             const signed char* qw, const float* sw, const float* mw, int rows) {
	i8mm_body<16>(y, ldy, qa, da, xsa, idx, 0, n, blockIdx.y * I8_TILE, k, qw, sw, mw, rows);
}

// i8mm_tiles: i8mm for several experts at once (a mixture's block), each
// block of the grid's y one tile of at most 64 of an expert's tokens:
// tiles[blockIdx.y] = {the tile's first token's place in idx (without
// idx, its row of the activations), its tokens, its first output row of y,
// its expert's first row of qw, sw and mw}. The weight rows are rows per
// expert.
template <int G>
__device__ __forceinline__ void i8mm_tiles(float* y, int ldy, const signed char* qa, const float* da, const int* xsa,
                                           const int* idx, const int4* tiles, int k, const signed char* qw,
                                           const float* sw, const float* mw, int rows) {
	const int4 t = tiles[blockIdx.y];
	const i64 ng = k / G, w = t.w;
	i8mm_body<G>(y + (i64)t.z * ldy, ldy, qa, da, xsa, idx ? idx + t.x : nullptr, idx ? 0 : t.x, t.y, 0, k, qw + w * k,
	             sw + w * ng, mw ? mw + w * ng : nullptr, rows);
}

extern "C" __global__ void __launch_bounds__(128)
    i8mm_g32t(float* y, int ldy, const signed char* qa, const float* da, const int* xsa, const int* idx, const int4* tiles,
              int k, const signed char* qw, const float* sw, const float* mw, int rows) {
	i8mm_tiles<32>(y, ldy, qa, da, xsa, idx, tiles, k, qw, sw, mw, rows);
}

extern "C" __global__ void __launch_bounds__(128)
    i8mm_g16t(float* y, int ldy, const signed char* qa, const float* da, const int* xsa, const int* idx, const int4* tiles,
              int k, const signed char* qw, const float* sw, const float* mw, int rows) {
	i8mm_tiles<16>(y, ldy, qa, da, xsa, idx, tiles, k, qw, sw, mw, rows);
}
