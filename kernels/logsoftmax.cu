// Log-softmax over the vocabulary, reduced on the GPU to what a scores
// record needs per target: the target's log-probability, the argmax, and
// with a reference model the reference's log-probability, argmax and
// KL(reference || model). Full logits never leave the device.
//
// CPU reference: model.score, logSumExp and kld (score/model/score.go):
// max and argmax (the first index on ties) over the float32 logits, then
// lse = max + log Σ exp(z - max) in float64, log p = z[target] - lse, and
// KL = Σ p_ref (log p_ref - log p). The sums here are trees, not left to
// right: a few float64 ulps.
//
// A NaN or infinite logit makes the CPU fail naming the first such token;
// here bad[row] receives the smallest such token index (-1 when none) and
// logprob[row] its value (NaN or ±Inf), and the host reports them the same
// way.
#include "common.cuh"

#define LSM_THREADS 512

struct MaxArg {
	float v;
	int i;
};

// better reports whether (v1, i1) wins over (v2, i2): larger value, then smaller index.
__device__ __forceinline__ bool better(float v1, int i1, float v2, int i2) {
	return v1 > v2 || (v1 == v2 && i1 < i2);
}

// row_max scans row z (vocab values): block-wide max/argmax and the first
// non-finite index (INT_MAX when none), to every thread.
__device__ void row_max(const float* __restrict__ z, int vocab, float* mx, int* arg, int* bad) {
	__shared__ float sv[32];
	__shared__ int si[32], sb[32];
	float bv = -INFINITY;
	int bi = 0x7fffffff, bb = 0x7fffffff;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
		float v = z[i];
		if (v - v != 0.0f) { // NaN or ±Inf, as logSumExp tests it
			if (i < bb) bb = i;
			continue;
		}
		if (better(v, i, bv, bi)) {
			bv = v;
			bi = i;
		}
	}
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, bv, o);
		int oi = __shfl_xor_sync(0xffffffffu, bi, o);
		int ob = __shfl_xor_sync(0xffffffffu, bb, o);
		if (better(ov, oi, bv, bi)) {
			bv = ov;
			bi = oi;
		}
		bb = min(bb, ob);
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	__syncthreads();
	if (lane == 0) {
		sv[w] = bv;
		si[w] = bi;
		sb[w] = bb;
	}
	__syncthreads();
	bv = lane < nw ? sv[lane] : -INFINITY;
	bi = lane < nw ? si[lane] : 0x7fffffff;
	bb = lane < nw ? sb[lane] : 0x7fffffff;
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, bv, o);
		int oi = __shfl_xor_sync(0xffffffffu, bi, o);
		int ob = __shfl_xor_sync(0xffffffffu, bb, o);
		if (better(ov, oi, bv, bi)) {
			bv = ov;
			bi = oi;
		}
		bb = min(bb, ob);
	}
	*mx = bv;
	*arg = bi;
	*bad = bb;
}

// row_lse returns max + log Σ exp(z - max) in float64 to every thread.
__device__ double row_lse(const float* __restrict__ z, int vocab, float mx, double* sh) {
	double m = (double)mx, s = 0;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) s += exp((double)z[i] - m);
	s = block_sum_d(s, sh);
	return m + log(s);
}

// logsoftmax_target: for each row r of logits (rows, vocab) f32:
// logprob[r] = z[targets[r]] - lse, argmax[r], bad[r]. grid.x = rows, block = LSM_THREADS.
extern "C" __global__ void __launch_bounds__(LSM_THREADS) logsoftmax_target(
    const float* __restrict__ logits, int rows, int vocab, const int* __restrict__ targets,
    double* __restrict__ logprob, int* __restrict__ argmax, int* __restrict__ bad) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	const float* z = logits + r * vocab;
	float mx;
	int arg, b;
	row_max(z, vocab, &mx, &arg, &b);
	if (b != 0x7fffffff) {
		if (threadIdx.x == 0) {
			bad[r] = b;
			argmax[r] = 0;
			logprob[r] = (double)z[b]; // the offending value, for the host's error
		}
		return; // uniform: every thread saw the same b
	}
	double lse = row_lse(z, vocab, mx, sh);
	if (threadIdx.x == 0) {
		bad[r] = -1;
		argmax[r] = arg;
		logprob[r] = (double)z[targets[r]] - lse;
	}
}

// logsoftmax_kld: logsoftmax_target for the model (logits) and the
// reference (rlogits) rows r, plus kld[r] = KL(ref || model) over the whole
// vocabulary. rbad flags the reference's non-finite logits.
extern "C" __global__ void __launch_bounds__(LSM_THREADS) logsoftmax_kld(
    const float* __restrict__ logits, const float* __restrict__ rlogits, int rows, int vocab,
    const int* __restrict__ targets, double* __restrict__ logprob, int* __restrict__ argmax, int* __restrict__ bad,
    double* __restrict__ rlogprob, int* __restrict__ rargmax, int* __restrict__ rbad, double* __restrict__ kld) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	const float* z = logits + r * vocab;
	const float* rz = rlogits + r * vocab;
	float mx, rmx;
	int arg, b, rarg, rb;
	row_max(z, vocab, &mx, &arg, &b);
	row_max(rz, vocab, &rmx, &rarg, &rb);
	if (b != 0x7fffffff || rb != 0x7fffffff) {
		if (threadIdx.x == 0) {
			bad[r] = b != 0x7fffffff ? b : -1;
			rbad[r] = rb != 0x7fffffff ? rb : -1;
			argmax[r] = rargmax[r] = 0;
			// the offending values, for the host's error
			logprob[r] = b != 0x7fffffff ? (double)z[b] : 0.0;
			rlogprob[r] = rb != 0x7fffffff ? (double)rz[rb] : 0.0;
			kld[r] = 0;
		}
		return;
	}
	double lse = row_lse(z, vocab, mx, sh);
	double rlse = row_lse(rz, vocab, rmx, sh);
	double s = 0;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
		double lp = (double)rz[i] - rlse;
		s += exp(lp) * (lp - ((double)z[i] - lse));
	}
	s = block_sum_d(s, sh);
	if (threadIdx.x == 0) {
		int t = targets[r];
		bad[r] = rbad[r] = -1;
		argmax[r] = arg;
		rargmax[r] = rarg;
		logprob[r] = (double)z[t] - lse;
		rlogprob[r] = (double)rz[t] - rlse;
		kld[r] = s;
	}
}
