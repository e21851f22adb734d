package gguf

import (
	"os"
	"syscall"
)

// pageDropper gives the kernel back the mapped pages of the header (the
// metadata and tensor infos) as the parser finishes with them: everything
// in them is copied out, and a vocabulary of millions of tokens is tens of
// megabytes of them, which would otherwise count against the process's
// resident memory on top of the copy. The pages stay in the page cache and
// fault back in if read again, so this is advice only; errors are ignored.
type pageDropper struct {
	data []byte // the mapping (page-aligned)
	done uint64 // data[:done] has been given back
}

func newPageDropper(data []byte) *pageDropper { return &pageDropper{data: data} }

// upTo gives back the whole pages before off not given back yet, when they
// are at least min bytes. The page where off falls stays.
func (d *pageDropper) upTo(off, min uint64) {
	page := uint64(os.Getpagesize())
	end := min64(off, uint64(len(d.data))) / page * page
	if end <= d.done || end-d.done < min {
		return
	}
	_ = syscall.Madvise(d.data[d.done:end], syscall.MADV_DONTNEED)
	d.done = end
}

func min64(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}
