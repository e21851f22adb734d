//go:build !linux

package gguf

// pageDropper does nothing where the header pages cannot be given back
// (header_linux.go says why Linux does).
type pageDropper struct{}

func newPageDropper(data []byte) *pageDropper { return &pageDropper{} }

func (d *pageDropper) upTo(off, min uint64) {}
