// Host harness of any kernels/*.cu file for the Go tests' hostDevice
// (hostdev_test.go): the CUDA C on the SIMT runtime of simt_host.h, its
// kernels launched by name through simt_driver.h. Compiled once per file:
//   -DKERNEL_CU='"path/to/kernels/x.cu"' -DKERNELS='SIMT_KERNEL(a) SIMT_KERNEL(b)'
// Protocol: simt_driver.h.
#include "simt_host.h"

#include KERNEL_CU

#include "simt_driver.h"

int main() { return simt::serve({KERNELS}); }
