package gguf

import (
	"fmt"
	"math"
	"unsafe"
)

// StringArray is an array of strings held in two allocations: the bytes of
// every string back to back, and where each one starts.
//
// Why: the tokenizer vocabulary is an array of strings, and vocabularies
// reach millions of tokens of a few bytes each. As a []string each token
// costs a 16-byte header besides its bytes (and a Go string of its own, if
// copied one by one); here it costs its bytes plus a 4-byte offset, less
// than the 8-byte length prefix it has in the file. Readers that index a
// vocabulary (the tokenizer) share the array's memory through Arena instead
// of copying it.
//
// A StringArray is immutable and safe for concurrent use; it lives on the
// heap, so it survives File.Close. The strings At returns share its memory.
type StringArray struct {
	data []byte
	offs []uint32 // len = Len()+1, offs[0] = 0; string i is data[offs[i]:offs[i+1]]
}

// maxStringArrayBytes bounds the bytes of one string array (its offsets
// are 32-bit): 4 GiB of metadata is far beyond any real file.
const maxStringArrayBytes = math.MaxUint32

// NewStringArray copies s into a StringArray. It fails when the strings
// hold more than 4 GiB in all.
func NewStringArray(s []string) (*StringArray, error) {
	total := 0
	for _, x := range s {
		total += len(x)
		if total > maxStringArrayBytes {
			return nil, fmt.Errorf("string array of more than %d bytes", maxStringArrayBytes)
		}
	}
	a := &StringArray{data: make([]byte, 0, total), offs: make([]uint32, 1, len(s)+1)}
	for _, x := range s {
		a.data = append(a.data, x...)
		a.offs = append(a.offs, uint32(len(a.data)))
	}
	return a, nil
}

// Len returns the number of strings (0 for a nil array).
func (a *StringArray) Len() int {
	if a == nil || len(a.offs) == 0 {
		return 0
	}
	return len(a.offs) - 1
}

// At returns string i, which shares the array's memory. It panics when i
// is out of range, as indexing a slice does.
func (a *StringArray) At(i int) string {
	lo, hi := a.offs[i], a.offs[i+1]
	if lo == hi {
		return ""
	}
	return unsafe.String(&a.data[lo], hi-lo)
}

// Strings returns the strings as a new []string (whose strings share the
// array's memory): 16 bytes a string.
func (a *StringArray) Strings() []string {
	out := make([]string, a.Len())
	for i := range out {
		out[i] = a.At(i)
	}
	return out
}

// Arena returns the array's storage: string i is data[offs[i]:offs[i+1]],
// len(offs) = Len()+1, offs[0] = 0 and offs never decreases. Both slices
// are shared and must not be modified.
func (a *StringArray) Arena() (data []byte, offs []uint32) {
	if a == nil {
		return nil, []uint32{0}
	}
	return a.data, a.offs
}
