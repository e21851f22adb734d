// Host harness of kernels/logsoftmax.cu for TestLogSoftmaxHostHarness: the
// CUDA C on the SIMT runtime of simt_host.h (see attention_host.cc), with
// the launch shape of Engine.logsoftmax (ops.go): grid rows, block
// LSM_THREADS.
//
// stdin: one line of text, then the arrays:
//   logsoftmax_target rows vocab   logits (rows, vocab) float32, targets int32
//   logsoftmax_kld rows vocab      logits, rlogits float32, targets int32
// stdout: logprob (float64), argmax, bad (int32), and for logsoftmax_kld
// then rlogprob (float64), rargmax, rbad (int32), kld (float64), rows each
// (poisoned before the launch: 0xff bytes). Exit status 2 on bad input,
// 3 and 4 as simt_host.h.
#include "simt_host.h"

#include "../../../kernels/logsoftmax.cu"

template <class T> static T* in(long long count) {
	T* p = (T*)simt::alloc(sizeof(T) * (size_t)count);
	if (fread(p, sizeof(T), (size_t)count, stdin) != (size_t)count) exit(2);
	return p;
}

template <class T> static T* out(long long count) {
	T* p = (T*)simt::alloc(sizeof(T) * (size_t)count);
	memset(p, 0xff, sizeof(T) * (size_t)count);
	return p;
}

int main() {
	char name[64];
	int rows, vocab;
	if (scanf("%63s %d %d", name, &rows, &vocab) != 3 || getchar() != '\n') return 2;
	bool kld = strcmp(name, "logsoftmax_kld") == 0;
	if (!kld && strcmp(name, "logsoftmax_target") != 0) {
		fprintf(stderr, "no kernel %s\n", name);
		return 2;
	}
	const float* z = in<float>((long long)rows * vocab);
	const float* rz = kld ? in<float>((long long)rows * vocab) : nullptr;
	const int* targets = in<int>(rows);
	double *lp = out<double>(rows), *rlp = out<double>(rows), *kl = out<double>(rows);
	int *arg = out<int>(rows), *bad = out<int>(rows), *rarg = out<int>(rows), *rbad = out<int>(rows);
	dim3 grid, block;
	grid.x = rows, block.x = LSM_THREADS;
	if (kld)
		simt::launch(grid, block, [&] { logsoftmax_kld(z, rz, rows, vocab, targets, lp, arg, bad, rlp, rarg, rbad, kl); });
	else
		simt::launch(grid, block, [&] { logsoftmax_target(z, rows, vocab, targets, lp, arg, bad); });
	fwrite(lp, 8, rows, stdout);
	fwrite(arg, 4, rows, stdout);
	fwrite(bad, 4, rows, stdout);
	if (kld) {
		fwrite(rlp, 8, rows, stdout);
		fwrite(rarg, 4, rows, stdout);
		fwrite(rbad, 4, rows, stdout);
		fwrite(kl, 8, rows, stdout);
	}
	return 0;
}
