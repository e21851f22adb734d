//go:build !linux

package quant

// threadCPU is 0 where the thread's CPU time is not read (see the Linux
// version): the benchmarks then report wall time only.
func threadCPU() (ns int64, unlock func()) { return 0, func() {} }

func threadNow() int64 { return 0 }
