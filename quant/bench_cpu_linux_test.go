package quant

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling thread in ns, locking the
// goroutine to it (until unlock is called): on a shared machine the time a
// kernel runs, not the time it waits for a core.
func threadCPU() (ns int64, unlock func()) {
	runtime.LockOSThread()
	return threadNow(), runtime.UnlockOSThread
}

func threadNow() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
