// Host harness of kernels/dequant.cu for TestDequantHostHarness: the CUDA
// C compiled by a host C++ compiler (the device intrinsics defined as the
// host's float32 operations, -ffp-contract=off as nvcc's __*_rn), each
// kernel run over its whole grid by loops, so that its arithmetic can be
// checked against ppl.dev/quant without a GPU.
//
// stdin: kernel name, rows, in, otype, rowbytes, nidx and a newline, then
// the i-quants' grids (33792 bytes), nidx int32 row indices (none: rows
// from row 0), then the matrix bytes; stdout: the halves (otype 0 bf16, 1
// fp16) or floats (2). Exit status 2
// on bad input.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

struct uint3_ { unsigned x, y, z; };
static uint3_ blockIdx, blockDim, threadIdx, gridDim;
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

#define __device__
#define __global__
#define __constant__
#define __forceinline__ inline
#define __restrict__ __restrict
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
#define __shfl_xor_sync(m, v, o) (v)
#define __syncthreads()
using std::max;
using std::signbit;
using std::min;

#include "../../../kernels/dequant.cu"

typedef void (*kernel)(void*, const u8*, const int*, i64, int, int, i64, int, const u8*);
static const struct { const char* name; kernel k; } kernels_[] = {
	{"dequant_f32", dequant_f32}, {"dequant_f16", dequant_f16}, {"dequant_bf16", dequant_bf16},
	{"dequant_q4_0", dequant_q4_0}, {"dequant_q4_1", dequant_q4_1}, {"dequant_q5_0", dequant_q5_0},
	{"dequant_q5_1", dequant_q5_1}, {"dequant_q8_0", dequant_q8_0}, {"dequant_q2_k", dequant_q2_k},
	{"dequant_q3_k", dequant_q3_k}, {"dequant_q4_k", dequant_q4_k}, {"dequant_q5_k", dequant_q5_k},
	{"dequant_q6_k", dequant_q6_k}, {"dequant_iq4_nl", dequant_iq4_nl}, {"dequant_iq4_xs", dequant_iq4_xs},
	{"dequant_mxfp4", dequant_mxfp4}, {"dequant_nvfp4", dequant_nvfp4}, {"dequant_tq1_0", dequant_tq1_0},
	{"dequant_tq2_0", dequant_tq2_0}, {"dequant_iq2_xxs", dequant_iq2_xxs}, {"dequant_iq2_xs", dequant_iq2_xs},
	{"dequant_iq2_s", dequant_iq2_s}, {"dequant_iq3_xxs", dequant_iq3_xxs}, {"dequant_iq3_s", dequant_iq3_s},
	{"dequant_iq1_s", dequant_iq1_s}, {"dequant_iq1_m", dequant_iq1_m},
};

int main() {
	char name[64];
	int rows, in, otype, nidx;
	long long rowbytes;
	if (scanf("%63s %d %d %d %lld %d", name, &rows, &in, &otype, &rowbytes, &nidx) != 6) return 2;
	getchar(); // the newline before the binary part
	kernel k = nullptr;
	for (auto& e : kernels_)
		if (std::string(e.name) == name) k = e.k;
	if (!k) { fprintf(stderr, "no kernel %s\n", name); return 2; }
	std::vector<u8> grid(33792);
	if (fread(grid.data(), 1, grid.size(), stdin) != grid.size()) return 2;
	std::vector<int> idx(nidx);
	if (nidx && fread(idx.data(), 4, nidx, stdin) != (size_t)nidx) return 2;
	std::vector<u8> w;
	int c;
	while ((c = getchar()) != EOF) w.push_back((u8)c);
	int n = nidx ? nidx : rows;
	size_t size = otype == 2 ? 4 : 2;
	std::vector<u8> out((size_t)n * in * size);
	gridDim = {7, 1, 1}; // any grid: the kernels stride over the work
	blockDim = {64, 1, 1};
	for (unsigned b = 0; b < gridDim.x; b++)
		for (unsigned t = 0; t < blockDim.x; t++) {
			blockIdx = {b, 0, 0};
			threadIdx = {t, 0, 0};
			k(out.data(), w.data(), nidx ? idx.data() : nullptr, 0, n, in, rowbytes, otype, grid.data());
		}
	fwrite(out.data(), 1, out.size(), stdout);
	return 0;
}
