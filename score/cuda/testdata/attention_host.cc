// Host harness of kernels/attention.cu for TestAttentionHostHarness: the
// CUDA C compiled by a host C++ compiler on the SIMT runtime of
// simt_host.h (a fiber per CUDA thread, real barriers, shuffles and
// mma.sync), so that attn_simple and the tensor-core attn_faHD kernels run
// as written, cooperation included, on machines without a GPU.
//
// stdin: one line of text
//   kernel gridx gridy block n heads kvheads hd scalebits window nsinks
//   kfmt kdata kscales ktscale vfmt vdata vscales vtscale outf16
// (scalebits: the float32 bits of attn_simple's scale or attn_faHD's
// scale_log2; hd is attn_simple's, the attn_faHD kernels have theirs in
// the name; nsinks 0 or heads; kdata..vtscale are the byte counts of the
// cache planes, 0 for a null pointer), then the binary parts: q (n, heads,
// hd) float32, the sinks, and the planes in the order of the line. stdout:
// out, n·heads·hd halves (poisoned with 0xffff before the launch, so
// elements no thread wrote read as NaN). Exit status 2 on bad input, 3 on
// a deadlock or a mismatched collective, 4 on a fault (see simt_host.h).
#include "simt_host.h"

// ATTENTION_CU: another version of the file to run (-DATTENTION_CU='"path"').
#ifndef ATTENTION_CU
#define ATTENTION_CU "../../../kernels/attention.cu"
#endif
#include ATTENTION_CU

typedef void (*faKernel)(u16*, const float*, int, int, int, float, int, const void*, const void*, const float*, int,
                         const void*, const void*, const float*, int);
static const struct {
	const char* name;
	faKernel k;
} flash[] = {{"attn_fa16", attn_fa16}, {"attn_fa32", attn_fa32}, {"attn_fa64", attn_fa64}, {"attn_fa128", attn_fa128},
             {"attn_fa256", attn_fa256}};

// part reads bytes from stdin into device memory; nullptr for none.
static void* part(long long bytes) {
	if (bytes == 0) return nullptr;
	void* p = simt::alloc((size_t)bytes);
	if (fread(p, 1, (size_t)bytes, stdin) != (size_t)bytes) exit(2);
	return p;
}

int main() {
	char name[64];
	unsigned gx, gy, bx, scalebits;
	int n, heads, kvheads, hd, window, nsinks, kfmt, vfmt, outf16;
	long long kd, ksc, kts, vd, vsc, vts;
	if (scanf("%63s %u %u %u %d %d %d %d %u %d %d %d %lld %lld %lld %d %lld %lld %lld %d", name, &gx, &gy, &bx, &n, &heads,
	          &kvheads, &hd, &scalebits, &window, &nsinks, &kfmt, &kd, &ksc, &kts, &vfmt, &vd, &vsc, &vts, &outf16) != 20)
		return 2;
	if (getchar() != '\n') return 2;
	faKernel fk = nullptr;
	bool simple = strcmp(name, "attn_simple") == 0;
	for (auto& e : flash)
		if (strcmp(e.name, name) == 0) fk = e.k;
	if (!simple && !fk) {
		fprintf(stderr, "no kernel %s\n", name);
		return 2;
	}
	const float scale = __uint_as_float(scalebits);
	const long long elems = (long long)n * heads * hd;
	const float* q = (const float*)part(4 * elems);
	const float* sinks = (const float*)part(4LL * nsinks);
	const void *kdata = part(kd), *kscales = part(ksc);
	const float* ktscale = (const float*)part(kts);
	const void *vdata = part(vd), *vscales = part(vsc);
	const float* vtscale = (const float*)part(vts);
	if (getchar() != EOF) return 2;
	u16* out = (u16*)simt::alloc(2 * elems);
	memset(out, 0xff, 2 * elems);
	dim3 grid, block;
	grid.x = gx, grid.y = gy, block.x = bx;
	if (simple)
		simt::launch(grid, block, [&] {
			attn_simple(out, q, n, heads, kvheads, hd, scale, window, sinks, kfmt, kdata, kscales, ktscale, vfmt, vdata,
			            vscales, vtscale, outf16);
		});
	else
		simt::launch(grid, block, [&] {
			fk(out, q, n, heads, kvheads, scale, kfmt, kdata, kscales, ktscale, vfmt, vdata, vscales, vtscale, outf16);
		});
	fwrite(out, 2, elems, stdout);
	return 0;
}
