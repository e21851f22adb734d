// Host harness of kernels/recurrent.cu's cooperative kernels for
// TestRecurrentHostHarness: the CUDA C on the SIMT runtime of simt_host.h
// (see attention_host.cc), with the launch shapes of the CUDA backend
// (recurrent.go).
//
// stdin: one line of text, then float32 arrays:
//   delta_net n hk hv d tiled sdt       q, k (n, hk·d), v (n, hv·d), g, beta (n, hv), state (hv·d, d)
//   l2norm_f32 rows d block epsbits     x (rows, d)
//   gated_rmsnorm rows d block epsbits  x, z (rows, d), w (d)
// (epsbits: the float64 bits of eps). stdout: delta_net's out then the
// state; the norms' out (poisoned with NaNs before the launch). Exit status
// 2 on bad input, 3 and 4 as simt_host.h.
#include "simt_host.h"

// RECURRENT_CU: another version of the file to run (-DRECURRENT_CU='"path"').
#ifndef RECURRENT_CU
#define RECURRENT_CU "../../../kernels/recurrent.cu"
#endif
#include RECURRENT_CU

// floats reads count float32 into device memory.
static float* floats(long long count) {
	float* p = (float*)simt::alloc(4 * (size_t)count);
	if (fread(p, 4, (size_t)count, stdin) != (size_t)count) exit(2);
	return p;
}

static float* output(long long count) {
	float* p = (float*)simt::alloc(4 * (size_t)count);
	memset(p, 0xff, 4 * (size_t)count);
	return p;
}

int main() {
	char name[64];
	if (scanf("%63s", name) != 1) return 2;
	dim3 grid, block;
	if (strcmp(name, "delta_net") == 0) {
		int n, hk, hv, d, tiled, sdt;
		if (scanf("%d %d %d %d %d %d", &n, &hk, &hv, &d, &tiled, &sdt) != 6 || getchar() != '\n') return 2;
		float *q = floats((long long)n * hk * d), *k = floats((long long)n * hk * d), *v = floats((long long)n * hv * d);
		float *g = floats((long long)n * hv), *beta = floats((long long)n * hv), *state = floats((long long)hv * d * d);
		float* out = output((long long)n * hv * d);
		grid.x = hv, grid.y = (d + DN_COLS - 1) / DN_COLS, block.x = 128;
		simt::launch(grid, block, [&] { delta_net(out, q, k, v, g, beta, state, n, hk, hv, d, tiled, sdt); });
		fwrite(out, 4, (size_t)n * hv * d, stdout);
		fwrite(state, 4, (size_t)hv * d * d, stdout);
		return 0;
	}
	int rows, d;
	unsigned bx;
	unsigned long long epsbits;
	if (scanf("%d %d %u %llu", &rows, &d, &bx, &epsbits) != 4 || getchar() != '\n') return 2;
	double eps;
	memcpy(&eps, &epsbits, 8);
	grid.x = rows, block.x = bx;
	float* x = floats((long long)rows * d);
	float* out = output((long long)rows * d);
	if (strcmp(name, "l2norm_f32") == 0) {
		simt::launch(grid, block, [&] { l2norm_f32(out, x, rows, d, eps); });
	} else if (strcmp(name, "gated_rmsnorm") == 0) {
		float *z = floats((long long)rows * d), *w = floats(d);
		simt::launch(grid, block, [&] { gated_rmsnorm(out, x, z, w, rows, d, eps); });
	} else {
		fprintf(stderr, "no kernel %s\n", name);
		return 2;
	}
	fwrite(out, 4, (size_t)rows * d, stdout);
	return 0;
}
