package nn

import "golang.org/x/sys/unix"

// adviseHuge asks Linux to back an arena chunk with transparent huge pages
// (2 MB) where the system leaves that to the program
// (/sys/kernel/mm/transparent_hugepage/enabled: madvise, Debian's and
// Ubuntu's default): a window's activations are read and written a column
// strip at a time, one row per token, each row on another 4 KB page, and
// the TLB misses of those strides cost more than the arithmetic. A kernel
// that refuses is no error: the chunk keeps small pages.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
