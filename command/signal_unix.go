//go:build unix

package command

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// diePipe ends the process by SIGPIPE's default action, as a write to a
// reader that is gone does in a tool that does not catch it.
func diePipe() {
	signal.Reset(syscall.SIGPIPE)
	syscall.Kill(syscall.Getpid(), syscall.SIGPIPE)
	time.Sleep(time.Second) // the signal ends the process first
	os.Exit(128 + int(syscall.SIGPIPE))
}
