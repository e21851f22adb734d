// simt_driver.h: a generic launcher for kernels compiled on the SIMT
// runtime of simt_host.h, so that one small main serves every kernel of a
// .cu file (kernel_host.cc) and the Go tests launch them as the CUDA
// backend does (hostDevice in hostdev_test.go).
//
// stdin: one line of text
//   kernel gx gy gz bx by bz nbufs nargs
// then nbufs lines "path bytes pad": the device allocations the pointer
// arguments point into, each a file whose bytes [pad, pad+bytes) are the
// allocation, pad+bytes a multiple of the page size; then nargs arguments
// of 16 bytes each: int32 kind (0 a pointer, 1 a 32-bit integer, 2 a 64-bit
// one, 3 float, 4 double), int32 buffer (a pointer's, -1 for a null
// pointer), int64 value (a pointer's byte offset into its buffer; a
// scalar's bits, low bytes first). The kinds must match the kernel's
// parameter types (the PTX's .u64, .u32, .f32, .f64): a mismatch exits
// with status 2, as on a GPU it would read garbage.
//
// The launch runs twice, each time on a private copy-on-write mapping of
// the files that ends at an unmapped page (reading past an allocation
// faults): in threadIdx order, and greedy in reverse order, the last warp
// running ahead as far as the barriers let it (Schedule in simt_host.h).
// When the two leave different bytes that is a race between the block's
// threads (exit status 6, naming the first difference); otherwise the
// first run's bytes are written back to the files. Exit status 2 on bad
// input, 3 and 4 as simt_host.h, 5 on a file that cannot be mapped.
#pragma once

#include <fcntl.h>
#include <tuple>
#include <type_traits>
#include <utility>

namespace simt {

struct Arg {
	int kind, buf;
	long long bits;
};

inline std::vector<char*> buffers;

template <class T> T argAs(const Arg& a, int i) {
	using U = std::remove_cv_t<T>;
	const int want = std::is_pointer_v<U> ? 0 : std::is_same_v<U, float> ? 3 : std::is_same_v<U, double> ? 4 : sizeof(U) == 8 ? 2 : 1;
	if (a.kind != want || (want == 0 && a.buf >= (int)buffers.size())) {
		fprintf(stderr, "argument %d: kind %d (buffer %d), the kernel takes kind %d\n", i, a.kind, a.buf, want);
		exit(2);
	}
	if constexpr (std::is_pointer_v<U>) {
		return a.buf < 0 ? nullptr : (U)(buffers[a.buf] + a.bits);
	} else {
		U v;
		memcpy(&v, &a.bits, sizeof v);
		return v;
	}
}

// Kernel is one entry of a harness's table: its name and a launcher that
// converts the arguments to the kernel's parameter types.
struct Kernel {
	const char* name;
	std::function<void(dim3, dim3, const std::vector<Arg>&)> run;
};

template <class... P, size_t... I> std::tuple<P...> args(const std::vector<Arg>& a, std::index_sequence<I...>) {
	return std::tuple<P...>(argAs<P>(a[I], (int)I)...);
}

template <class... P> Kernel kernel(const char* name, void (*k)(P...)) {
	return {name, [k](dim3 grid, dim3 block, const std::vector<Arg>& a) {
		        if (a.size() != sizeof...(P)) {
			        fprintf(stderr, "%zu arguments, the kernel takes %zu\n", a.size(), sizeof...(P));
			        exit(2);
		        }
		        std::tuple<P...> t = args<P...>(a, std::index_sequence_for<P...>{});
		        launch(grid, block, [&] { std::apply(k, t); });
	        }};
}

// mapFile maps bytes+pad bytes of path, copy-on-write (private) or
// shared, followed by an unmapped page, and returns the allocation.
inline char* mapFile(const std::string& path, size_t bytes, size_t pad, bool shared) {
	size_t len = bytes + pad;
	char* p = (char*)mmap(nullptr, len + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open(path.c_str(), O_RDWR);
	if (p == MAP_FAILED || fd < 0 ||
	    (len > 0 && mmap(p, len, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED, fd, 0) == MAP_FAILED))
		fail(5, ("cannot map " + path).c_str());
	close(fd);
	return p + pad;
}

// serve reads one launch from stdin and runs it (above).
inline int serve(std::initializer_list<Kernel> table) {
	char name[128];
	dim3 g, b;
	int nbufs, nargs;
	if (scanf("%127s %u %u %u %u %u %u %d %d", name, &g.x, &g.y, &g.z, &b.x, &b.y, &b.z, &nbufs, &nargs) != 9 || nbufs < 0 ||
	    nargs < 0)
		return 2;
	const Kernel* k = nullptr;
	for (auto& e : table)
		if (strcmp(e.name, name) == 0) k = &e;
	if (!k) {
		fprintf(stderr, "no kernel %s in this harness\n", name);
		return 2;
	}
	std::vector<std::string> paths(nbufs);
	std::vector<size_t> sizes(nbufs), pads(nbufs);
	for (int i = 0; i < nbufs; i++) {
		char path[4096];
		if (scanf("%4095s %zu %zu", path, &sizes[i], &pads[i]) != 3) return 2;
		paths[i] = path;
	}
	if (getchar() != '\n') return 2;
	std::vector<Arg> a(nargs);
	if (fread(a.data(), sizeof(Arg), nargs, stdin) != (size_t)nargs || getchar() != EOF) return 2;
	std::vector<char*> runs[2];
	for (int r = 0; r < 2; r++) {
		buffers.clear();
		for (int i = 0; i < nbufs; i++) buffers.push_back(mapFile(paths[i], sizes[i], pads[i], false));
		runs[r] = buffers;
		schedule = r == 0 ? Schedule{} : Schedule{true, true};
		k->run(g, b, a);
	}
	for (int i = 0; i < nbufs; i++)
		for (size_t j = 0; j < sizes[i]; j++)
			if (runs[0][i][j] != runs[1][i][j]) {
				fprintf(stderr, "simt: %s: a race: buffer %d byte %zu is %#x in threadIdx order, %#x with the last warp running ahead\n",
				        name, i, j, (unsigned char)runs[0][i][j], (unsigned char)runs[1][i][j]);
				return 6;
			}
	for (int i = 0; i < nbufs; i++) {
		char* f = mapFile(paths[i], sizes[i], pads[i], true);
		for (size_t j = 0; j < sizes[i]; j += 4096) {
			size_t n = std::min<size_t>(4096, sizes[i] - j);
			if (memcmp(f + j, runs[0][i] + j, n) != 0) memcpy(f + j, runs[0][i] + j, n);
		}
	}
	return 0;
}

} // namespace simt

#define SIMT_KERNEL(k) simt::kernel(#k, k),
