package progress

import "golang.org/x/sys/unix"

// ioctlReadTermios is the ioctl that reads a terminal's settings: whether
// it succeeds says whether a file is a terminal.
const ioctlReadTermios = unix.TCGETS
