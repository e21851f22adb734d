package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

const (
	magic = "GGUF"

	// maxDims is GGML_MAX_DIMS.
	maxDims = 4

	// maxArrayDepth bounds nested arrays (an array of arrays is depth 2).
	// Real files use depth 1; the bound keeps recursion shallow.
	maxArrayDepth = 8

	// Fewest bytes one metadata entry takes: key length, value type, and a
	// one-byte value; one tensor info: name length, n_dims, one dimension,
	// type, offset.
	minKVSize     = 8 + 4 + 1
	minTensorSize = 8 + 4 + 8 + 4 + 8
)

// parser reads the header of a GGUF file held in memory. Every read checks
// the bytes left, so no input can make it index out of range.
type parser struct {
	name string
	b    []byte
	off  uint64           // next byte to read
	done func(off uint64) // if set, told after each metadata entry that b[:off] is read
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf: %s: "+format, append([]any{p.name}, args...)...)
}

func (p *parser) left() uint64 { return uint64(len(p.b)) - p.off }

// need fails unless n more bytes are available; what names what is read.
func (p *parser) need(n uint64, what string) error {
	if n > p.left() {
		return p.errorf("truncated file: %s needs %d bytes at offset %d, file size %d", what, n, p.off, len(p.b))
	}
	return nil
}

// fixed reads one little-endian value of size bytes, decoded by get.
func fixed[E any](p *parser, size uint64, what string, get func([]byte) E) (E, error) {
	if err := p.need(size, what); err != nil {
		var zero E
		return zero, err
	}
	v := get(p.b[p.off:])
	p.off += size
	return v, nil
}

func (p *parser) u8(what string) (uint8, error) { return fixed(p, 1, what, getUint8) }
func (p *parser) u32(what string) (uint32, error) {
	return fixed(p, 4, what, binary.LittleEndian.Uint32)
}
func (p *parser) u64(what string) (uint64, error) {
	return fixed(p, 8, what, binary.LittleEndian.Uint64)
}

// Decoders of one little-endian element of the fixed-size value types
// (with binary.LittleEndian's Uint16/32/64), shared by single values
// (fixed) and arrays (decode).
func getUint8(b []byte) uint8     { return b[0] }
func getInt8(b []byte) int8       { return int8(b[0]) }
func getBool(b []byte) bool       { return b[0] == 1 }
func getInt16(b []byte) int16     { return int16(binary.LittleEndian.Uint16(b)) }
func getInt32(b []byte) int32     { return int32(binary.LittleEndian.Uint32(b)) }
func getFloat32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
func getInt64(b []byte) int64     { return int64(binary.LittleEndian.Uint64(b)) }
func getFloat64(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }

// str reads a length-prefixed string, copied out of the file so that it
// survives Close.
func (p *parser) str(what string) (string, error) { return p.strElem(what, -1, true) }

// strElem reads a string, element i of an array (i < 0: not an element),
// and copies it out if copyOut is set; otherwise it only checks and skips
// it. The name of what is read is formatted only for an error.
func (p *parser) strElem(what string, i int, copyOut bool) (string, error) {
	if p.left() < 8 {
		return "", p.need(8, elemName(what, i)+" length")
	}
	n := binary.LittleEndian.Uint64(p.b[p.off:])
	p.off += 8
	if n > p.left() {
		return "", p.errorf("%s: string length %d at offset %d exceeds the %d bytes left in the file", elemName(what, i), n, p.off-8, p.left())
	}
	var s string
	if copyOut {
		s = string(p.b[p.off : p.off+n])
	}
	p.off += n
	return s, nil
}

func elemName(what string, i int) string {
	if i < 0 {
		return what
	}
	return fmt.Sprintf("%s[%d]", what, i)
}

// count reads an element count and checks that n elements of at least min
// bytes each fit in the rest of the file, so that allocating n is safe.
func (p *parser) count(what string, min uint64) (uint64, error) {
	n, err := p.u64(what)
	if err != nil {
		return 0, err
	}
	if n > p.left()/min {
		return 0, p.errorf("%s %d at offset %d needs at least %d bytes per entry, only %d bytes left in the file", what, n, p.off-8, min, p.left())
	}
	return n, nil
}

// parse parses a whole GGUF file held in b (the mapped file, for Open).
// The returned File refers to b for tensor data; strings are copied out.
func parse(name string, b []byte) (*File, error) { return parseWith(name, b, nil) }

// parseWith is parse that calls done(off) after each metadata entry, once
// b[:off] will not be read again (Open gives those pages back).
func parseWith(name string, b []byte, done func(off uint64)) (*File, error) {
	p := &parser{name: name, b: b, done: done}
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		head := b[:min(len(b), len(magic))]
		return nil, p.errorf("not a GGUF file: magic %q, want %q", head, magic)
	}
	p.off = uint64(len(magic))
	version, err := p.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, p.errorf("GGUF version 1 is not supported (only versions 2 and 3)")
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, p.errorf("big-endian GGUF (version %d) is not supported", bits.ReverseBytes32(version))
	default:
		return nil, p.errorf("unsupported GGUF version %d (want 2 or 3)", version)
	}
	f := &File{
		Path:      name,
		Shards:    []string{name},
		Version:   version,
		Alignment: DefaultAlignment,
		FileSize:  uint64(len(b)),
		data:      b,
	}
	nTensors, err := p.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := p.count("metadata count", minKVSize)
	if err != nil {
		return nil, err
	}
	if err := p.checkTensorCount(nTensors); err != nil { // early, before the metadata
		return nil, err
	}

	f.Metadata = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := range nKV {
		key, err := p.str(fmt.Sprintf("metadata key %d", i))
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("metadata %q", key)
		if j, dup := f.kvIndex[key]; dup {
			return nil, p.errorf("%s: duplicate key (entries %d and %d)", what, j, i)
		}
		vt, err := p.u32(what + " type")
		if err != nil {
			return nil, err
		}
		v, err := p.value(vt, 0, what)
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Value: v})
		if p.done != nil {
			p.done(p.off)
		}
	}
	if err := f.setAlignment(p); err != nil {
		return nil, err
	}

	if err := p.checkTensorCount(nTensors); err != nil { // exact, after it
		return nil, err
	}
	f.Tensors = make([]*Tensor, 0, nTensors)
	f.tensors = make(map[string]*Tensor, nTensors)
	for i := range nTensors {
		t, err := p.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tensors[t.Name]; dup {
			return nil, p.errorf("tensor %q: duplicate name (tensor %d)", t.Name, i)
		}
		f.tensors[t.Name] = t
		f.Tensors = append(f.Tensors, t)
	}

	// The data section starts at the next multiple of the alignment.
	f.DataOffset = p.off
	if r := p.off % f.Alignment; r != 0 {
		f.DataOffset = p.off + (f.Alignment - r)
		if f.DataOffset < p.off {
			return nil, p.errorf("data section offset overflows (alignment %d)", f.Alignment)
		}
	}
	for _, t := range f.Tensors {
		start := f.DataOffset + t.Offset
		end := start + t.Size
		if start < f.DataOffset || end < start {
			return nil, p.errorf("tensor %q: data offset %d + size %d overflows", t.Name, t.Offset, t.Size)
		}
		if end > f.FileSize {
			return nil, p.errorf("tensor %q: data [%d,%d) beyond end of file (size %d)", t.Name, start, end, f.FileSize)
		}
	}
	return f, nil
}

func (p *parser) checkTensorCount(n uint64) error {
	if n > p.left()/minTensorSize {
		return p.errorf("tensor count %d needs at least %d bytes per tensor, only %d bytes left in the file", n, minTensorSize, p.left())
	}
	return nil
}

// setAlignment applies general.alignment.
func (f *File) setAlignment(p *parser) error {
	v, ok := f.Lookup(KeyAlignment)
	if !ok {
		return nil
	}
	a, err := alignmentOf(v)
	if err != nil {
		return p.errorf("metadata %q: %v", KeyAlignment, err)
	}
	f.Alignment = a
	return nil
}

// alignmentOf checks an alignment value: an integer that is a power of two.
func alignmentOf(v Value) (uint64, error) {
	i, u, big, isInt := v.asInt()
	switch {
	case !isInt:
		return 0, fmt.Errorf("is %s, want an unsigned integer", v.typeName())
	case big && u&(u-1) != 0:
		return 0, fmt.Errorf("%d is not a power of two", u)
	case big:
		return u, nil
	case i <= 0 || i&(i-1) != 0:
		return 0, fmt.Errorf("%d is not a power of two", i)
	}
	return uint64(i), nil
}

// tensorInfo reads and checks the i-th tensor info: dimensions, type,
// overflow-free size, aligned offset. Bounds are checked by parse, once the
// data offset is known.
func (p *parser) tensorInfo(i uint64, align uint64) (*Tensor, error) {
	name, err := p.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("tensor %q", name)
	nd, err := p.u32(what + " n_dims")
	if err != nil {
		return nil, err
	}
	if nd == 0 || nd > maxDims {
		return nil, p.errorf("%s: %d dimensions, want 1 to %d", what, nd, maxDims)
	}
	t := &Tensor{Name: name, Shape: make([]uint64, nd)}
	elems := uint64(1)
	overflow := false
	for j := range t.Shape {
		if t.Shape[j], err = p.u64(fmt.Sprintf("%s dimension %d", what, j)); err != nil {
			return nil, err
		}
		hi, lo := bits.Mul64(elems, t.Shape[j])
		overflow = overflow || hi != 0
		elems = lo
	}
	typ, err := p.u32(what + " type")
	if err != nil {
		return nil, err
	}
	t.Type = Type(typ)
	if t.Offset, err = p.u64(what + " offset"); err != nil {
		return nil, err
	}
	if overflow {
		return nil, p.errorf("%s: shape %v overflows uint64 elements", what, t.Shape)
	}
	if !t.Type.Known() {
		return nil, p.errorf("%s: unknown ggml type %d", what, typ)
	}
	row, err := t.Type.RowSize(t.Shape[0])
	if err != nil {
		return nil, p.errorf("%s: shape %v: %v", what, t.Shape, err)
	}
	rows := uint64(0)
	if t.Shape[0] != 0 {
		rows = elems / t.Shape[0]
	}
	hi, size := bits.Mul64(row, rows)
	if hi != 0 {
		return nil, p.errorf("%s: %s shape %v overflows uint64 bytes", what, t.Type, t.Shape)
	}
	t.Size = size
	if t.Offset%align != 0 {
		return nil, p.errorf("%s: offset %d is not a multiple of the alignment %d", what, t.Offset, align)
	}
	return t, nil
}

// value reads a value of type vt; depth counts the enclosing arrays.
func (p *parser) value(vt uint32, depth int, what string) (Value, error) {
	t := ValueType(vt)
	v := Value{Type: t}
	var err error
	switch t {
	case ValueUint8:
		v.v, err = fixed(p, 1, what, getUint8)
	case ValueInt8:
		v.v, err = fixed(p, 1, what, getInt8)
	case ValueUint16:
		v.v, err = fixed(p, 2, what, binary.LittleEndian.Uint16)
	case ValueInt16:
		v.v, err = fixed(p, 2, what, getInt16)
	case ValueUint32:
		v.v, err = fixed(p, 4, what, binary.LittleEndian.Uint32)
	case ValueInt32:
		v.v, err = fixed(p, 4, what, getInt32)
	case ValueFloat32:
		v.v, err = fixed(p, 4, what, getFloat32)
	case ValueBool:
		var x uint8
		x, err = p.u8(what)
		if err == nil && x > 1 {
			return v, p.errorf("%s: bool byte %d at offset %d, want 0 or 1", what, x, p.off-1)
		}
		v.v = x == 1
	case ValueString:
		v.v, err = p.str(what)
	case ValueUint64:
		v.v, err = fixed(p, 8, what, binary.LittleEndian.Uint64)
	case ValueInt64:
		v.v, err = fixed(p, 8, what, getInt64)
	case ValueFloat64:
		v.v, err = fixed(p, 8, what, getFloat64)
	case ValueArray:
		return p.array(depth+1, what)
	default:
		return v, p.errorf("%s: unknown value type %d", what, vt)
	}
	return v, err
}

func (p *parser) array(depth int, what string) (Value, error) {
	if depth > maxArrayDepth {
		return Value{}, p.errorf("%s: arrays nested deeper than %d", what, maxArrayDepth)
	}
	et, err := p.u32(what + " array type")
	if err != nil {
		return Value{}, err
	}
	t := ValueType(et)
	if !t.Known() {
		return Value{}, p.errorf("%s: unknown array element type %d", what, et)
	}
	n, err := p.count(what+" array of "+t.String()+": count", uint64(t.minSize()))
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: ValueArray, ElemType: t}
	// Fixed-size elements: n*size bytes are known to be there.
	b := p.b[p.off:]
	switch t {
	case ValueUint8:
		v.v = append(make([]uint8, 0, n), b[:n]...)
	case ValueInt8:
		v.v = decode(b, n, 1, getInt8)
	case ValueBool:
		for i, x := range b[:n] {
			if x > 1 {
				return v, p.errorf("%s[%d]: bool byte %d at offset %d, want 0 or 1", what, i, x, p.off+uint64(i))
			}
		}
		v.v = decode(b, n, 1, getBool)
	case ValueUint16:
		v.v = decode(b, n, 2, binary.LittleEndian.Uint16)
	case ValueInt16:
		v.v = decode(b, n, 2, getInt16)
	case ValueUint32:
		v.v = decode(b, n, 4, binary.LittleEndian.Uint32)
	case ValueInt32:
		v.v = decode(b, n, 4, getInt32)
	case ValueFloat32:
		v.v = decode(b, n, 4, getFloat32)
	case ValueUint64:
		v.v = decode(b, n, 8, binary.LittleEndian.Uint64)
	case ValueInt64:
		v.v = decode(b, n, 8, getInt64)
	case ValueFloat64:
		v.v = decode(b, n, 8, getFloat64)
	case ValueString:
		s, err := p.strings(n, what)
		v.v = s
		return v, err
	case ValueArray:
		vs := make([]Value, n)
		for i := range vs {
			if vs[i], err = p.array(depth+1, fmt.Sprintf("%s[%d]", what, i)); err != nil {
				return v, err
			}
		}
		v.v = vs
		return v, nil
	}
	p.off += n * uint64(t.fixedSize())
	return v, nil
}

// strings reads an array of n strings into a StringArray. A vocabulary has
// 100,000s of them, so they share one copy of their bytes instead of one
// allocation each: a first pass checks the lengths and counts the bytes, a
// second copies the strings back to back, without their length prefixes.
func (p *parser) strings(n uint64, what string) (*StringArray, error) {
	start := p.off
	total := uint64(0)
	for i := range n {
		l := p.off
		if _, err := p.strElem(what, int(i), false); err != nil {
			return nil, err
		}
		total += p.off - l - 8
	}
	if total > maxStringArrayBytes {
		return nil, p.errorf("%s: array of %d strings holds %d bytes, more than the %d this reader supports", what, n, total, uint64(maxStringArrayBytes))
	}
	a := &StringArray{data: make([]byte, 0, total), offs: make([]uint32, 1, n+1)}
	off := start
	for range n {
		l := binary.LittleEndian.Uint64(p.b[off:])
		off += 8
		a.data = append(a.data, p.b[off:off+l]...)
		a.offs = append(a.offs, uint32(len(a.data)))
		off += l
	}
	return a, nil
}

// decode decodes n little-endian elements of size bytes each from b.
func decode[E any](b []byte, n uint64, size int, get func([]byte) E) []E {
	out := make([]E, n)
	for i := range out {
		out[i] = get(b[i*size:])
	}
	return out
}
