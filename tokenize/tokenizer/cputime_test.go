package tokenizer_test

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPUThroughput adds MB per CPU-second, which stays meaningful on a
// machine whose cores other jobs share (wall-clock MB/s does not).
func reportCPUThroughput(b *testing.B, bytes int, start time.Duration) {
	if d := cpuTime() - start; d > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/d.Seconds(), "MB/cpu-s")
	}
}

var _ = testing.Benchmark
