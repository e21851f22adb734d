// Causal attention with grouped KV heads, reading the KV cache in its
// storage format.
//
// CPU reference: nn.Attention.Forward (score/nn/attention.go) over keys and
// values that went through kvcache.RoundTrip (model.kvStore): out[i,h] =
// Σ_{j<=i} softmax_j(q[i,h]·k[j,g]·scale) v[j,g], g = h / (heads/kvheads);
// both kernels also take a sliding window (keys i-window < j <= i),
// attention sinks (exp(sinks[h]) joins each softmax's denominator),
// ALiBi's slopes (slopes[h]·(j − i) added to each score) and a key set
// (sparse attention: the keys each row reads, nn.Attention.Keys).
//
// Two kernels:
//   attn_simple  one block per (query, head), float32 throughout, keys and
//                values decoded element by element: slow (it rereads the
//                cache for every query) but plainly right, for any head size
//                up to 512. The reference the fast kernel is checked against
//                when a model loads, and the fallback when that check fails.
//   attn_faHD    FlashAttention-2 style for head sizes 16, 32, 64, 128, 256
//                and 512 (Gemma 4's global layers): a block takes 64
//                queries of one head (4 warps of 16 rows) and 256 of its
//                output dims at most (heads of 512: two blocks, each
//                computing the scores), walks key tiles (64 keys, 32 for
//                heads of 256, 16 for 512) up
//                to the diagonal (tiles above it, and below a sliding
//                window, are skipped), decodes each
//                K and V tile into shared memory as fp16, and computes
//                S = QKᵀ and O += PV on the tensor cores (mma.sync
//                m16n8k16 fp16, float32 accumulation) with an
//                online softmax in registers. Memory is O(tokens × heads ×
//                head size); the tokens × tokens matrix never exists.
//   attn_fl576   the same body for DeepSeek's latent attention (keys of
//                576, values their first 512, read from the one key
//                cache), attn_flx576 attn_fx's; latent.cu's attn_latent is
//                their plain kernel.
//
// Precision: q, the decoded keys and values and the probabilities are
// rounded to fp16 for the tensor cores (exact for keys and values of a bf16
// or f16 cache within fp16's range, 2^-11 relative for q and the
// probabilities); scores, the softmax and the sums are float32. The CPU
// keeps q in float32 and the softmax in float64.
// Output: (n, heads·hd), the input of the output projection: fp16
// (out_f16 != 0) or bf16; attn_simple's also float32 (otype 2, the int8
// mode's, whose products quantize it: a half rounding there would move its
// codes).
#include "kvformat.cuh"

#define FULL 0xffffffffu

__device__ __forceinline__ u16 to_half(float v, int f16) { return f16 ? f32_to_f16(v) : f32_to_bf16(v); }

// ATTN_MAXD is the largest head size of both kernels.
#define ATTN_MAXD 512

// attn_simple: grid (n, heads), block 128. window > 0 limits query i to
// keys j > i - window; sinks, when not null, holds one logit per head that
// joins the softmax's denominator (the running maximum starts at it). out
// is bf16 (otype 0), fp16 (1) or float32 (2). cap > 0 soft-caps each scaled
// score s to cap·tanh(s/cap) (Gemma 2). chunk > 0 limits query i to the
// keys of its chunk, j >= i - i mod chunk (Llama 4). slopes, when not
// null, holds ALiBi's slope per head: the (capped) score of key j gets
// slopes[h]·(j − i), the product and the sum each rounded (Bloom, MPT).
// keys, when not null, is a key set of kgroups groups (common.cuh's
// key_row): query i of KV head g reads only the keys its row holds (sparse
// attention: DeepSeek's, MiniMax's, Qwen's), chunks of 128 keys it holds
// none of skipped whole (each row holds a key: the indexers' sets do).
extern "C" __global__ void __launch_bounds__(128)
    attn_simple(void* __restrict__ out, const float* __restrict__ q, int n, int heads, int kvheads, int hd, float scale,
                int window, const float* __restrict__ sinks, int kfmt, const void* kdata, const void* kscales,
                const float* ktscale, int vfmt, const void* vdata, const void* vscales, const float* vtscale,
                int otype, float cap, int chunk, const float* __restrict__ slopes, const u64* __restrict__ keys,
                int kgroups) {
	__shared__ float qs[ATTN_MAXD];
	__shared__ float ps[128];
	__shared__ float red[4];
	const int i = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
	if (i >= n) return;
	const int g = h / (heads / kvheads);
	KVPlanes K = {kfmt, kdata, kscales, ktscale, kvheads, hd};
	KVPlanes V = {vfmt, vdata, vscales, vtscale, kvheads, hd};
	const float* qi = q + ((i64)i * heads + h) * hd;
	const u64* krow = key_row(keys, kgroups, g, n, i);
	for (int d = tid; d < hd; d += 128) qs[d] = qi[d];
	__syncthreads();
	// With a sink, the sum starts at exp(sink - m) = 1 with m = sink.
	float m = sinks ? sinks[h] : -INFINITY, l = sinks ? 1.0f : 0.0f, acc[ATTN_MAXD / 128] = {};
	int lo = window > 0 ? max(0, i - window + 1) : 0;
	if (chunk > 0) lo = max(lo, i - i % chunk);
	for (int j0 = lo; j0 <= i; j0 += 128) {
		if (krow && !keys_any(krow, j0, min(j0 + 127, i))) continue; // the same for every thread
		const int j = j0 + tid;
		float s = -INFINITY;
		if (j <= i && (!krow || key_in(krow, j))) {
			float dot = 0.0f;
			for (int d = 0; d < hd; d++) dot += qs[d] * kv_decode1(K, j, g, d);
			s = dot * scale;
			if (cap > 0.0f) s = cap * tanhf(s / cap);
			if (slopes) s = __fadd_rn(s, __fmul_rn(slopes[h], (float)(j - i)));
		}
		float mx = warp_max_f(s);
		if ((tid & 31) == 0) red[tid >> 5] = mx;
		__syncthreads();
		mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
		const float mnew = fmaxf(m, mx); // finite: the chunk holds a key
		ps[tid] = j <= i ? expf(s - mnew) : 0.0f;
		__syncthreads();
		const float corr = expf(m - mnew); // 0 on the first chunk
#pragma unroll
		for (int c = 0; c < ATTN_MAXD / 128; c++) acc[c] *= corr;
		float lc = 0.0f;
		const int cnt = min(128, i - j0 + 1);
		for (int jj = 0; jj < cnt; jj++) {
			if (krow && !key_in(krow, j0 + jj)) continue; // p = 0
			const float p = ps[jj];
			lc += p;
#pragma unroll
			for (int c = 0; c < ATTN_MAXD / 128; c++)
				if (tid + 128 * c < hd) acc[c] += p * kv_decode1(V, j0 + jj, g, tid + 128 * c);
		}
		l = l * corr + lc;
		m = mnew;
		__syncthreads(); // ps and red are rewritten by the next chunk
	}
	const i64 at = ((i64)i * heads + h) * hd;
#pragma unroll
	for (int c = 0; c < ATTN_MAXD / 128; c++) {
		const int d = tid + 128 * c;
		if (d >= hd) break;
		if (otype == 2) {
			((float*)out)[at + d] = acc[c] / l;
		} else {
			((u16*)out)[at + d] = to_half(acc[c] / l, otype);
		}
	}
}

// pack_f16: two fp16 (round to nearest even; cvt.rn.f16x2.f32 puts its
// first source in the upper half), lo in the low 16 bits.
__device__ __forceinline__ u32 pack_f16(float lo, float hi) {
#ifdef __CUDA_ARCH__
	u32 r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
#else
	return (u32)f32_to_f16(lo) | ((u32)f32_to_f16(hi) << 16); // the host harness
#endif
}

__device__ __forceinline__ u16 one_f16(float v) {
#ifdef __CUDA_ARCH__
	unsigned short r;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
	return r;
#else
	return f32_to_f16(v);
#endif
}

__device__ __forceinline__ u32 pack_out(float lo, float hi, int f16) {
	return f16 ? pack_f16(lo, hi) : ((u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16));
}

// lo_f16: v less its fp16 rounding (exact in float32), whose own fp16
// rounding makes hi + lo = v to about 2^-22 relative.
__device__ __forceinline__ float lo_f16(float v) { return v - f16_to_f32(one_f16(v)); }

// mma_f16: c (16×8 f32) += a (16×16 fp16, row) · b (16×8 fp16, col).
__device__ __forceinline__ void mma_f16(float* c, const u32* a, u32 b0, u32 b1) {
#ifdef __CUDA_ARCH__
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
	    "{%0,%1,%2,%3};\n"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
	simt_mma_m16n8k16_f16(c, a, b0, b1); // the host harness (score/cuda/testdata/simt_host.h)
#endif
}

// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"), gid = lane/4, tig = lane%4:
//   A regs 0..3: (row gid, cols 2tig..+1), (gid+8, 2tig..), (gid, 2tig+8..), (gid+8, 2tig+8..)
//   B regs 0..1: (rows 2tig..+1, col gid), (rows 2tig+8..+9, col gid)
//   C 0..3:      (gid, 2tig), (gid, 2tig+1), (gid+8, 2tig), (gid+8, 2tig+1)
// K is kept in shared memory as [key][dim] (B for QKᵀ is then read as
// contiguous pairs) and V transposed as [dim][key] (likewise for PV); rows
// are padded by 8 halves so a warp's 32 word loads hit 32 banks. The C
// fragments of two adjacent S tiles are exactly the A fragment of P.
//
// Key tiles are BC = 64 keys for head sizes up to 128, 32 for 256 and 16
// for 512, so that the tiles fit the 48 KB of static shared memory (heads
// of 256: K 32×264 and Vᵀ 256×40 halves, 37 KB; of 512: K 16×520 and the
// block's 256 output dims of Vᵀ 256×24, 29 KB) and the S and P fragments
// leave registers for q (64) and o (128). A block writes DV = 256 output
// dims at most (o's 128 registers), so heads of 512 take two blocks
// (grid.z), each computing all the scores: the same scores, the same
// probabilities, half of the outputs each. With BC < BR a tile can lie
// wholly above a warp's 16 rows (the diagonal's second half for warps 0
// and 1): the warp skips it, which is what computing it would give (no
// probability, corrections 1).
__host__ __device__ constexpr int attn_fa_bc(int hd) { return hd > 256 ? 16 : hd > 128 ? 32 : 64; }
__host__ __device__ constexpr int attn_fa_dv(int hd) { return hd > 256 ? 256 : hd; }

// q_frag: the A fragments of q's rows r0 and r1 (zero past n), dims kc·16
// to kc·16+15 of head h: hi rounded to fp16 and, with X, lo the remainder.
template <bool X>
__device__ __forceinline__ void q_frag(const float* __restrict__ q, int r0, int r1, int n, i64 qstride, int col,
                                       u32 hi[4], u32 lo[4]) {
	float2 a = make_float2(0.0f, 0.0f), b = a, a8 = a, b8 = a;
	if (r0 < n) {
		a = *(const float2*)(q + r0 * qstride + col);
		a8 = *(const float2*)(q + r0 * qstride + col + 8);
	}
	if (r1 < n) {
		b = *(const float2*)(q + r1 * qstride + col);
		b8 = *(const float2*)(q + r1 * qstride + col + 8);
	}
	hi[0] = pack_f16(a.x, a.y);
	hi[1] = pack_f16(b.x, b.y);
	hi[2] = pack_f16(a8.x, a8.y);
	hi[3] = pack_f16(b8.x, b8.y);
	if (X) {
		lo[0] = pack_f16(lo_f16(a.x), lo_f16(a.y));
		lo[1] = pack_f16(lo_f16(b.x), lo_f16(b.y));
		lo[2] = pack_f16(lo_f16(a8.x), lo_f16(a8.y));
		lo[3] = pack_f16(lo_f16(b8.x), lo_f16(b8.y));
	}
}

// X (attn_fxHD): q and the probabilities as two fp16 halves each, hi and
// lo (two products each), and float32 output: with keys and values that
// fp16 holds exactly (an f16 cache, or bf16 within fp16's normal range)
// every product is then float32's to about 2^-22, the plain kernel's level,
// at twice the tensor-core work. The int8 mode's, whose next product
// quantizes the output. Where q's fragments do not fit beside o's 128
// registers (its two halves for heads of 256, q alone for 512) they are
// read again (from L1 and L2) for each key tile, kc by kc, which gives each
// score the same products in the same order.
template <int HD, int VD, bool X>
__device__ __forceinline__ void attn_fa_body(void* __restrict__ out, const float* __restrict__ q, int n, int heads,
                                             int kvheads, float scale_log2, int window, const float* __restrict__ sinks,
                                             const float* __restrict__ slopes, const KVPlanes& K, const KVPlanes& V,
                                             int out_f16, const u64* __restrict__ keys, int kgroups) {
	constexpr int BR = 64, BC = attn_fa_bc(HD), DV = attn_fa_dv(VD), KSTR = HD + 8, VSTR = BC + 8;
	__shared__ __align__(16) u16 ks[BC * KSTR];
	__shared__ __align__(16) u16 vt[DV * VSTR];
	const int dv0 = blockIdx.z * DV; // the block's first output dim
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
	const int qtile = gridDim.x - 1 - blockIdx.x; // the longest rows first
	const int h = blockIdx.y, g = h / (heads / kvheads);
	const float slope_log2 = slopes ? __fmul_rn(slopes[h], 1.44269504088896341f) : 0.0f; // ALiBi's, in log2 units
	const int r0 = qtile * BR + warp * 16 + gid, r1 = r0 + 8;
	const i64 qstride = (i64)heads * HD, ostride = (i64)heads * VD;
	// With a key set, rows r0 and r1's (null past the window: rows never written).
	const u64* kr0 = r0 < n ? key_row(keys, kgroups, g, n, r0) : nullptr;
	const u64* kr1 = r1 < n ? key_row(keys, kgroups, g, n, r1) : nullptr;
	__shared__ int tileKeys; // whether a row of the block holds a key of the tile

	constexpr bool QREG = HD <= 128 || (!X && HD <= 256); // q's fragments held in registers
	u32 qf[QREG ? HD / 16 : 1][4], ql[X && QREG ? HD / 16 : 1][4];
	if (QREG) {
#pragma unroll
		for (int kc = 0; kc < HD / 16; kc++) q_frag<X>(q, r0, r1, n, qstride, h * HD + kc * 16 + tig * 2, qf[kc], ql[X ? kc : 0]);
	}

	float o[DV / 8][4];
#pragma unroll
	for (int nd = 0; nd < DV / 8; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
	float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

	// With a sliding window, row i reads keys i-window < j <= i: the tiles
	// below the block's first row's window are not loaded, and a warp skips
	// those below its own first row's.
	const int kvEnd = min(n, (qtile + 1) * BR);
	const int kvStart = window > 0 ? max(0, qtile * BR - window + 1) / BC * BC : 0;
	const int warpLo = window > 0 ? qtile * BR + warp * 16 - window + 1 : 0;
	for (int k0 = kvStart; k0 < kvEnd; k0 += BC) {
		__syncthreads(); // the previous tile is consumed
		if (keys) { // a tile no row of the block reads is skipped whole: its scores would all be masked
			if (tid == 0) tileKeys = 0;
			__syncthreads();
			const int row = qtile * BR + tid;
			if (tid < BR && row < n && k0 <= row && keys_any(key_row(keys, kgroups, g, n, row), k0, min(k0 + BC - 1, row)))
				tileKeys = 1;
			__syncthreads();
			if (!tileKeys) continue; // block-uniform
		}
		// K: 8 dims per thread, dims fastest across the warp (coalesced
		// loads, one 16-byte store per thread into a row).
		for (int it = tid; it < BC * (HD / 8); it += 128) {
			const int t = it / (HD / 8), d0 = (it % (HD / 8)) * 8, tok = k0 + t;
			float kv[8];
			if (tok < n) {
				kv_decode8(K, tok, g, d0, kv);
			} else {
#pragma unroll
				for (int e = 0; e < 8; e++) kv[e] = 0.0f;
			}
			uint4 kp;
			kp.x = pack_f16(kv[0], kv[1]);
			kp.y = pack_f16(kv[2], kv[3]);
			kp.z = pack_f16(kv[4], kv[5]);
			kp.w = pack_f16(kv[6], kv[7]);
			*(uint4*)&ks[t * KSTR + d0] = kp;
		}
		// V, transposed: tokens fastest across the warp, so that the 2-byte
		// stores of a warp fall into consecutive words, not one bank.
		for (int it = tid; it < BC * (DV / 8); it += 128) {
			const int t = it % BC, d0 = (it / BC) * 8, tok = k0 + t;
			float vv[8];
			if (tok < n) {
				kv_decode8(V, tok, g, dv0 + d0, vv);
			} else {
#pragma unroll
				for (int e = 0; e < 8; e++) vv[e] = 0.0f;
			}
#pragma unroll
			for (int e = 0; e < 8; e++) vt[(d0 + e) * VSTR + t] = one_f16(vv[e]);
		}
		__syncthreads();
		if ((BC < BR && k0 > qtile * BR + warp * 16 + 15) || k0 + BC <= warpLo) continue; // warp-uniform; no barrier until the loop's top

		float s[BC / 8][4];
#pragma unroll
		for (int nt = 0; nt < BC / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
		if (QREG) {
#pragma unroll
			for (int nt = 0; nt < BC / 8; nt++) {
#pragma unroll
				for (int kc = 0; kc < HD / 16; kc++) {
					const u16* kp = &ks[(nt * 8 + gid) * KSTR + kc * 16 + tig * 2];
					mma_f16(s[nt], qf[QREG ? kc : 0], *(const u32*)kp, *(const u32*)(kp + 8));
					if (X) mma_f16(s[nt], ql[X && QREG ? kc : 0], *(const u32*)kp, *(const u32*)(kp + 8));
				}
			}
		} else {
#pragma unroll 1
			for (int kc = 0; kc < HD / 16; kc++) {
				u32 hi[4], lo[4];
				q_frag<X>(q, r0, r1, n, qstride, h * HD + kc * 16 + tig * 2, hi, lo);
#pragma unroll
				for (int nt = 0; nt < BC / 8; nt++) {
					const u16* kp = &ks[(nt * 8 + gid) * KSTR + kc * 16 + tig * 2];
					mma_f16(s[nt], hi, *(const u32*)kp, *(const u32*)(kp + 8));
					if (X) mma_f16(s[nt], lo, *(const u32*)kp, *(const u32*)(kp + 8));
				}
			}
		}

		float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
		for (int nt = 0; nt < BC / 8; nt++) {
			const int c = k0 + nt * 8 + tig * 2;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int col = c + (e & 1), row = e < 2 ? r0 : r1;
				float v = s[nt][e] * scale_log2;
				if (slopes) v = __fadd_rn(v, __fmul_rn(slope_log2, (float)(col - row)));
				const u64* kr = e < 2 ? kr0 : kr1;
				if (col > row || col >= n || (window > 0 && col <= row - window) || (kr && !key_in(kr, col))) v = -INFINITY;
				s[nt][e] = v;
			}
			mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
			mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
		}
		mx0 = fmaxf(mx0, __shfl_xor_sync(FULL, mx0, 1));
		mx0 = fmaxf(mx0, __shfl_xor_sync(FULL, mx0, 2));
		mx1 = fmaxf(mx1, __shfl_xor_sync(FULL, mx1, 1));
		mx1 = fmaxf(mx1, __shfl_xor_sync(FULL, mx1, 2));
		const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
		// A row with every key so far masked keeps max -inf; subtract 0 then.
		const float b0 = mn0 == -INFINITY ? 0.0f : mn0, b1 = mn1 == -INFINITY ? 0.0f : mn1;
		const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1);
		m0 = mn0;
		m1 = mn1;
		l0 *= c0;
		l1 *= c1;
#pragma unroll
		for (int nd = 0; nd < DV / 8; nd++) {
			o[nd][0] *= c0;
			o[nd][1] *= c0;
			o[nd][2] *= c1;
			o[nd][3] *= c1;
		}
		u32 pa[BC / 16][4], pl[X ? BC / 16 : 1][4];
#pragma unroll
		for (int nt = 0; nt < BC / 8; nt++) {
			const float p0 = exp2f(s[nt][0] - b0), p1 = exp2f(s[nt][1] - b0);
			const float p2 = exp2f(s[nt][2] - b1), p3 = exp2f(s[nt][3] - b1);
			l0 += p0 + p1;
			l1 += p2 + p3;
			pa[nt / 2][(nt & 1) * 2 + 0] = pack_f16(p0, p1);
			pa[nt / 2][(nt & 1) * 2 + 1] = pack_f16(p2, p3);
			if (X) {
				pl[X ? nt / 2 : 0][(nt & 1) * 2 + 0] = pack_f16(lo_f16(p0), lo_f16(p1));
				pl[X ? nt / 2 : 0][(nt & 1) * 2 + 1] = pack_f16(lo_f16(p2), lo_f16(p3));
			}
		}
#pragma unroll
		for (int kc = 0; kc < BC / 16; kc++) {
#pragma unroll
			for (int nd = 0; nd < DV / 8; nd++) {
				const u16* vp = &vt[(nd * 8 + gid) * VSTR + kc * 16 + tig * 2];
				mma_f16(o[nd], pa[kc], *(const u32*)vp, *(const u32*)(vp + 8));
				if (X) mma_f16(o[nd], pl[X ? kc : 0], *(const u32*)vp, *(const u32*)(vp + 8));
			}
		}
	}

	// A sink is a logit of every row that no value goes with: exp2 of it
	// (in log2 units) joins the row's sum once, in one lane of its four,
	// at the end. (Starting the running maximum at it would scale the
	// probabilities down by it, into fp16's subnormals when it is large.)
	if (sinks && tig == 0) {
		const float sk = __fmul_rn(sinks[h], 1.44269504088896341f);
		l0 += exp2f(sk - m0);
		l1 += exp2f(sk - m1);
	}
	l0 += __shfl_xor_sync(FULL, l0, 1);
	l0 += __shfl_xor_sync(FULL, l0, 2);
	l1 += __shfl_xor_sync(FULL, l1, 1);
	l1 += __shfl_xor_sync(FULL, l1, 2);
	const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
#pragma unroll
	for (int nd = 0; nd < DV / 8; nd++) {
		const int c = dv0 + nd * 8 + tig * 2;
		if (X) {
			float* of = (float*)out;
			if (r0 < n) *(float2*)(of + r0 * ostride + h * VD + c) = make_float2(o[nd][0] * inv0, o[nd][1] * inv0);
			if (r1 < n) *(float2*)(of + r1 * ostride + h * VD + c) = make_float2(o[nd][2] * inv1, o[nd][3] * inv1);
			continue;
		}
		u16* oh = (u16*)out;
		if (r0 < n) *(u32*)(oh + r0 * ostride + h * VD + c) = pack_out(o[nd][0] * inv0, o[nd][1] * inv0, out_f16);
		if (r1 < n) *(u32*)(oh + r1 * ostride + h * VD + c) = pack_out(o[nd][2] * inv1, o[nd][3] * inv1, out_f16);
	}
}

// attn_faHD: grid (ceil(n/64), heads, HD/attn_fa_dv(HD)), block 128,
// scale_log2 = scale·log2(e); window, sinks, slopes and a key set as
// attn_simple's (the slopes taken to log2 units, the bias's product and
// sum each rounded; the key tiles no row of the block reads skipped).
#define ATTN_FA(HD)                                                                                                  \
	extern "C" __global__ void __launch_bounds__(128)                                                                \
	    attn_fa##HD(u16* __restrict__ out, const float* __restrict__ q, int n, int heads, int kvheads,                 \
	                float scale_log2, int window, const float* __restrict__ sinks, const float* __restrict__ slopes,  \
	                int kfmt, const void* kdata, const void* kscales, const float* ktscale, int vfmt,                  \
	                const void* vdata, const void* vscales, const float* vtscale, int out_f16, const u64* keys,        \
	                int kgroups) {                                                                                     \
		KVPlanes K = {kfmt, kdata, kscales, ktscale, kvheads, HD};                                                   \
		KVPlanes V = {vfmt, vdata, vscales, vtscale, kvheads, HD};                                                   \
		attn_fa_body<HD, HD, false>(out, q, n, heads, kvheads, scale_log2, window, sinks, slopes, K, V, out_f16,     \
		                            keys, kgroups);                                                                  \
	}
ATTN_FA(16)
ATTN_FA(32)
ATTN_FA(64)
ATTN_FA(128)
ATTN_FA(256)
ATTN_FA(512)

// attn_fxHD: attn_faHD with q and the probabilities split in two fp16
// halves (attn_fa_body's X) and float32 output (n, heads·HD).
#define ATTN_FX(HD)                                                                                                  \
	extern "C" __global__ void __launch_bounds__(128)                                                                \
	    attn_fx##HD(float* __restrict__ out, const float* __restrict__ q, int n, int heads, int kvheads,               \
	                float scale_log2, int window, const float* __restrict__ sinks, const float* __restrict__ slopes,  \
	                int kfmt, const void* kdata, const void* kscales, const float* ktscale, int vfmt,                  \
	                const void* vdata, const void* vscales, const float* vtscale, const u64* keys, int kgroups) {      \
		KVPlanes K = {kfmt, kdata, kscales, ktscale, kvheads, HD};                                                   \
		KVPlanes V = {vfmt, vdata, vscales, vtscale, kvheads, HD};                                                   \
		attn_fa_body<HD, HD, true>(out, q, n, heads, kvheads, scale_log2, window, sinks, slopes, K, V, 0, keys,       \
		                           kgroups);                                                                         \
	}
ATTN_FX(16)
ATTN_FX(32)
ATTN_FX(64)
ATTN_FX(128)
ATTN_FX(256)
ATTN_FX(512)

// attn_flHD: multi-head latent attention (package ml's Latent: DeepSeek's
// MLA over a latent of HD, its values the keys' first VD elements) on
// attn_fa_body: keys and values read from the one key cache (kvheads
// latent heads, one for MLA), output (n, heads·VD) of the half type,
// grid (ceil(n/64), heads, VD/256); window, sinks and a key set (DSA's
// chosen keys) as attn_latent's, which it computes with fp16 products.
#define ATTN_FL(HD, VD)                                                                                              \
	extern "C" __global__ void __launch_bounds__(128)                                                                \
	    attn_fl##HD(u16* __restrict__ out, const float* __restrict__ q, int n, int heads, int kvheads,                 \
	                float scale_log2, int window, const float* __restrict__ sinks, int kfmt, const void* kdata,       \
	                const void* kscales, const float* ktscale, int out_f16, const u64* keys, int kgroups) {           \
		KVPlanes K = {kfmt, kdata, kscales, ktscale, kvheads, HD};                                                   \
		attn_fa_body<HD, VD, false>(out, q, n, heads, kvheads, scale_log2, window, sinks, nullptr, K, K, out_f16,    \
		                            keys, kgroups);                                                                  \
	}
ATTN_FL(576, 512)

// attn_flxHD: attn_flHD with q and the probabilities split in two fp16
// halves (attn_fa_body's X) and float32 output (n, heads·VD): the int8
// mode's, as attn_fxHD is for the other heads.
#define ATTN_FLX(HD, VD)                                                                                             \
	extern "C" __global__ void __launch_bounds__(128)                                                                \
	    attn_flx##HD(float* __restrict__ out, const float* __restrict__ q, int n, int heads, int kvheads,              \
	                 float scale_log2, int window, const float* __restrict__ sinks, int kfmt, const void* kdata,      \
	                 const void* kscales, const float* ktscale, const u64* keys, int kgroups) {                       \
		KVPlanes K = {kfmt, kdata, kscales, ktscale, kvheads, HD};                                                   \
		attn_fa_body<HD, VD, true>(out, q, n, heads, kvheads, scale_log2, window, sinks, nullptr, K, K, 0, keys,      \
		                           kgroups);                                                                         \
	}
ATTN_FLX(576, 512)
