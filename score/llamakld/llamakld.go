// Package llamakld reads and writes llama-perplexity's KL-divergence base
// files (`--kl-divergence-base FILE`), and computes what llama-perplexity
// --kl-divergence computes from one, so that ppl-score can take a
// reference model's log-probabilities from a file llama.cpp wrote (a
// reference that does not fit beside the model, or that was scored once
// elsewhere) and give llama.cpp's figures, or write such a file for
// llama-perplexity to read.
//
// A file is, little-endian: the 8 bytes "_logits_"; the context n_ctx, the
// vocabulary n_vocab and the chunks n_chunk as int32; the n_chunk·n_ctx
// tokens of the chunks (int32, as tokenized: the BOS that replaces a
// chunk's first token is not written); then for each chunk, for each of
// its n_ctx-1-n_ctx/2 targets (positions n_ctx/2 .. n_ctx-2 predicting the
// next token) one row of 2·⌈n_vocab/2⌉+4 uint16: a float32 scale and a
// float32 minimum log-probability, then each token's log-probability
// quantized to 16 bits over [max-16, max] of the logits (and a zero
// after an odd vocabulary). Nothing in the file says which model wrote it:
// its name and hash are what identify it.
//
// The arithmetic is llama.cpp 0.7.0's (tools/perplexity/perplexity.cpp:
// log_softmax with and without base_log_prob, nearest_int): float32
// operations rounded one by one, glibc's expf (nn.LibcExpf), sums of
// exponentials in float64 and their log rounded to float32. Go's math.Log
// and glibc's log may differ in the last place of a float64; rounded to
// float32, as both programs round it, they give the same value unless the
// float64 lies within that place of a float32 rounding boundary.
package llamakld

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"unsafe"

	"ppl.dev/pipe"
	"ppl.dev/score/nn"
)

// Magic is a base file's first 8 bytes.
const Magic = "_logits_"

const headerBytes = 8 + 3*4

// File is an open base file.
type File struct {
	f      *os.File
	path   string
	NCtx   int
	NVocab int
	NChunk int
	Tokens []int32 // NChunk·NCtx tokens
	rows   int64   // offset of chunk 0's first row
}

// Targets is how many targets a chunk of n tokens scores: positions n/2
// to n-2, each predicting the next token (llama-perplexity's first =
// n_ctx/2).
func Targets(n int) int { return n - 1 - n/2 }

// RowLen is the uint16s of one target's row for a vocabulary of n tokens.
func RowLen(n int) int { return 2*((n+1)/2) + 4 }

// Open opens a base file and reads its header and tokens, checking that
// its size is exactly what they imply.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	b, err := readHeader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	b.f = f
	return b, nil
}

// readHeader reads and checks the header and tokens of f (named path).
func readHeader(f *os.File, path string) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var h [headerBytes]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:8]) != Magic {
		return nil, fmt.Errorf("%s: not a llama-perplexity KL-divergence base file (no %q header)", path, Magic)
	}
	nctx := int32(binary.LittleEndian.Uint32(h[8:]))
	nvocab := int32(binary.LittleEndian.Uint32(h[12:]))
	nchunk := int32(binary.LittleEndian.Uint32(h[16:]))
	if nctx < 2 || nvocab < 1 || nchunk < 1 {
		return nil, fmt.Errorf("%s: header says context %d, vocabulary %d, %d chunks", path, nctx, nvocab, nchunk)
	}
	b := &File{path: path, NCtx: int(nctx), NVocab: int(nvocab), NChunk: int(nchunk)}
	// The size the header implies, exactly (a bad header's overflows int64).
	ntok := new(big.Int).Mul(big.NewInt(int64(nctx)), big.NewInt(int64(nchunk)))
	want := new(big.Int).Mul(big.NewInt(int64(Targets(int(nctx)))), big.NewInt(2*int64(RowLen(int(nvocab)))))
	want.Mul(want, big.NewInt(int64(nchunk)))
	want.Add(want, new(big.Int).Lsh(ntok, 2))
	want.Add(want, big.NewInt(headerBytes))
	if !want.IsInt64() || want.Int64() != st.Size() {
		return nil, fmt.Errorf("%s: %d bytes, but its header (context %d, vocabulary %d, %d chunks) makes %v", path, st.Size(), nctx, nvocab, nchunk, want)
	}
	b.rows = headerBytes + 4*ntok.Int64()
	raw := make([]byte, 4*ntok.Int64())
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("%s: reading the tokens: %w", path, err)
	}
	b.Tokens = make([]int32, ntok.Int64())
	for i := range b.Tokens {
		t := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if t < 0 || t >= nvocab {
			return nil, fmt.Errorf("%s: token %d (chunk %d, position %d) outside the vocabulary of %d", path, t, i/int(nctx), i%int(nctx), nvocab)
		}
		b.Tokens[i] = t
	}
	return b, nil
}

func (b *File) chunkBytes() int64 {
	return int64(Targets(b.NCtx)) * int64(RowLen(b.NVocab)) * 2
}

// Chunk reads chunk k's rows, Targets(NCtx) of RowLen(NVocab) each, into
// dst (grown as needed) and returns them.
func (b *File) Chunk(k int, dst []uint16) ([]uint16, error) {
	if k < 0 || k >= b.NChunk {
		return nil, fmt.Errorf("%s: no chunk %d (it has %d)", b.path, k, b.NChunk)
	}
	n := b.chunkBytes()
	if cap(dst) < int(n/2) {
		dst = make([]uint16, n/2)
	}
	dst = dst[:n/2]
	raw := bytesOf(dst) // read in place: a chunk of a large vocabulary is hundreds of MB
	if _, err := b.f.ReadAt(raw, b.rows+int64(k)*n); err != nil {
		return nil, fmt.Errorf("%s: chunk %d: %w", b.path, k, err)
	}
	if !littleEndian {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
	}
	return dst, nil
}

// Prefetch starts reading chunk k's rows and returns a function that
// waits for them (Chunk's result): it may be called any number of times,
// from any goroutine, and returns the same rows and error each time.
func (b *File) Prefetch(k int) func() ([]uint16, error) {
	var rows []uint16
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rows, err = b.Chunk(k, nil)
	}()
	return func() ([]uint16, error) {
		<-done
		return rows, err
	}
}

// littleEndian says that the host stores a uint16 as the files do (amd64,
// arm64): rows are then read and written in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bytesOf is the memory of v as bytes.
func bytesOf(v []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v))
}

// Close closes the file.
func (b *File) Close() error { return b.f.Close() }

// Row is one target's row: the scale and minimum as float32 bits in its
// first 4 uint16, then a code per token.
type Row []uint16

func (r Row) float(i int) float32 { return math.Float32frombits(uint32(r[2*i]) | uint32(r[2*i+1])<<16) }

// LogProb is the reference's log-probability of token t as
// llama-perplexity decodes it: scale·code + minimum, in float32.
func (r Row) LogProb(t int) float32 {
	return float32(r.float(0)*float32(r[4+t])) + r.float(1)
}

// Target is what llama-perplexity --kl-divergence computes for one target
// from the model's logits and the base file's row.
type Target struct {
	KLD     float64 // KL(base || model) over the tokens whose base log-prob is above -16
	NLL     float32 // the model's -log p of the target
	NLLBase float32 // the base's
	PDiff   float32 // p - p_base of the target
	SameTop bool    // the models' top tokens (the first, on ties) are the same
}

// Score computes llama-perplexity's figures for one target: logits are the
// model's over the vocabulary, row the base's, tok the target token.
func Score(logits []float32, row Row, tok int) Target {
	maxLogit, imax := logits[0], 0
	for i, v := range logits[1:] {
		if v > maxLogit {
			maxLogit, imax = v, i+1
		}
	}
	lse := logSumExp(logits, maxLogit)
	scale, minLP := row.float(0), row.float(1)
	q := row[4:]
	var t Target
	t.NLL = float32(maxLogit+lse) - logits[tok]
	t.NLLBase = -(float32(scale*float32(q[tok])) + minLP)
	top := float32(maxLogit + lse)
	terms := kldBlocks
	if !nn.LibcExpfsVector() {
		terms = kldPlain
	}
	var imaxBase int
	t.KLD, imaxBase = terms(logits, q, scale, minLP, top)
	t.SameTop = imax == imaxBase
	t.PDiff = nn.LibcExpf(-t.NLL) - nn.LibcExpf(-t.NLLBase)
	return t
}

// kldPlain is the KLD's sum over the tokens whose base log-prob l =
// scale·q + minLP is above -16, of expf(l)·((l - logit) + top), in order
// in float64, and the base's top token (the first, on ties): a token at a
// time, expf only where the sum needs it (for CPUs where LibcExpfs has
// no vector kernel).
func kldPlain(logits []float32, q []uint16, scale, minLP, top float32) (float64, int) {
	var sum float64
	imaxBase, maxBase := -1, float32(0)
	for i, v := range logits {
		lb := float32(scale*float32(q[i])) + minLP
		if i == 0 || lb > maxBase {
			maxBase, imaxBase = lb, i
		}
		if lb > -16 {
			sum += float64(nn.LibcExpf(lb) * (float32(lb-v) + top))
		}
	}
	return sum, imaxBase
}

// kldBlocks is kldPlain in blocks: every token's expf from LibcExpfs's
// vector kernels, the terms of those at -16 and below masked to +0 (which
// leaves the sum as it is: it is never -0), then the block's sum.
func kldBlocks(logits []float32, q []uint16, scale, minLP, top float32) (float64, int) {
	var sum float64
	imaxBase, maxBase := -1, float32(0)
	var lbs, pbs [block]float32
	for i0 := 0; i0 < len(logits); i0 += block {
		lb, pb := lbs[:min(block, len(logits)-i0)], pbs[:min(block, len(logits)-i0)]
		for i := range lb {
			lb[i] = float32(scale*float32(q[i0+i])) + minLP
		}
		nn.LibcExpfs(pb, lb)
		for i, l := range lb {
			if i0+i == 0 || l > maxBase {
				maxBase, imaxBase = l, i0+i
			}
			pb[i] = math.Float32frombits(math.Float32bits(pb[i]*(float32(l-logits[i0+i])+top)) & above16(l))
		}
		for _, v := range pb {
			sum += float64(v)
		}
	}
	return sum, imaxBase
}

// above16 is all ones where the log-prob l is above -16 (its token counts
// toward the KLD), else 0: a select of bits, not a branch per token that
// the CPU would mispredict.
func above16(l float32) uint32 {
	var keep uint32
	if l > -16 {
		keep = 0xffffffff
	}
	return keep
}

// logSumExp is log Σ expf(v - mx) in llama-perplexity's arithmetic: each
// exponential glibc's expf of the float32 difference, summed in float64
// in order, the log rounded to float32.
func logSumExp(logits []float32, mx float32) float32 {
	if !nn.LibcExpfsVector() {
		return logSumExpPlain(logits, mx)
	}
	var s float64
	var e [block]float32
	for i0 := 0; i0 < len(logits); i0 += block {
		x := e[:min(block, len(logits)-i0)]
		for i := range x {
			x[i] = logits[i0+i] - mx
		}
		nn.LibcExpfs(x, x)
		for _, v := range x {
			s += float64(v)
		}
	}
	return float32(math.Log(s))
}

// logSumExpPlain is logSumExp one exponential at a time, without the
// blocks' copies (for CPUs where LibcExpfs has no vector kernel).
func logSumExpPlain(logits []float32, mx float32) float32 {
	var s float64
	for _, v := range logits {
		s += float64(nn.LibcExpf(v - mx))
	}
	return float32(math.Log(s))
}

// block is how many of a row's exponentials Score and logSumExp take
// from nn.LibcExpfs at a time (its vector kernels), on the stack.
const block = 512

// Quantize fills row (RowLen(len(logits)) long) with the base file's row
// of logits, as llama-perplexity --kl-divergence-base writes it, and
// returns the target tok's -log p (float32 arithmetic, as a float64).
func Quantize(row Row, logits []float32, tok int) float64 {
	maxLogit, minLogit := logits[0], logits[0]
	for _, v := range logits[1:] {
		if maxLogit < v {
			maxLogit = v
		}
		if v < minLogit {
			minLogit = v
		}
	}
	if lo := maxLogit - 16; minLogit < lo {
		minLogit = lo
	}
	lse := logSumExp(logits, maxLogit)
	minLP := (minLogit - maxLogit) - lse
	scale := (maxLogit - minLogit) / 65535
	row[0], row[1] = uint16(math.Float32bits(scale)), uint16(math.Float32bits(scale)>>16)
	row[2], row[3] = uint16(math.Float32bits(minLP)), uint16(math.Float32bits(minLP)>>16)
	q := row[4:]
	clear(q[len(logits):]) // the padding of an odd vocabulary
	inv := 1 / scale
	for i, v := range logits {
		// 0 at minLogit and below, and for all when scale is 0 (every
		// logit is then minLogit); a select, not a branch the CPU would
		// mispredict.
		var keep uint16
		if v > minLogit {
			keep = 0xffff
		}
		q[i] = uint16(nearestInt(inv*(v-minLogit))) & keep
	}
	return float64(float32(maxLogit+lse) - logits[tok])
}

// nearestInt is llama-perplexity's nearest_int: v rounded to an integer by
// adding 1.5·2^23 in float32 (ties to even), for |v| < 2^22.
func nearestInt(v float32) int32 {
	b := math.Float32bits(float32(v) + 12582912) // v rounded: a caller's product is never fused
	return int32(b&0x007fffff) - 0x00400000
}

// Writer writes a base file: the header and tokens first, then each
// chunk's rows in order, to a temporary file (pipe.Create) renamed to the
// destination by Close once every row is there: a run that stops leaves
// no partial file.
type Writer struct {
	f           *pipe.AtomicFile
	path        string
	nvocab      int
	rows, total int64
	buf         []byte // the rows in the file's byte order, on a big-endian host
}

// Create starts the base file path for chunks of nctx tokens, the tokens
// of all chunks one after another.
func Create(path string, nctx, nvocab int, tokens []int32) (*Writer, error) {
	if nctx < 2 || nvocab < 1 || len(tokens) == 0 || len(tokens)%nctx != 0 || nctx > math.MaxInt32 || nvocab > math.MaxInt32 || len(tokens)/nctx > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %d tokens in chunks of %d, vocabulary %d: not a base file's shape", path, len(tokens), nctx, nvocab)
	}
	if pipe.IsZstd(path) {
		return nil, fmt.Errorf("%s: llama-perplexity reads base files uncompressed", path)
	}
	f, err := pipe.Create(path)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, path: path, nvocab: nvocab, total: int64(len(tokens)/nctx) * int64(Targets(nctx))}
	h := make([]byte, headerBytes+4*len(tokens))
	copy(h, Magic)
	binary.LittleEndian.PutUint32(h[8:], uint32(nctx))
	binary.LittleEndian.PutUint32(h[12:], uint32(nvocab))
	binary.LittleEndian.PutUint32(h[16:], uint32(len(tokens)/nctx))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(h[headerBytes+4*i:], uint32(t))
	}
	if _, err := f.Write(h); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Write appends the rows of consecutive targets (RowLen(nvocab) each).
func (w *Writer) Write(rows []uint16) error {
	n := RowLen(w.nvocab)
	if len(rows)%n != 0 {
		return fmt.Errorf("%s: %d uint16s are not whole rows of %d", w.path, len(rows), n)
	}
	if w.rows += int64(len(rows) / n); w.rows > w.total {
		return fmt.Errorf("%s: more than the %d rows its chunks have", w.path, w.total)
	}
	out := bytesOf(rows)
	if !littleEndian {
		w.buf = w.buf[:0]
		for _, v := range rows {
			w.buf = binary.LittleEndian.AppendUint16(w.buf, v)
		}
		out = w.buf
	}
	if _, err := w.f.Write(out); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

// Close checks that every row was written and puts the file in place.
func (w *Writer) Close() error {
	if w.rows != w.total {
		w.f.Close()
		return fmt.Errorf("%s: %d of its %d rows written: not written", w.path, w.rows, w.total)
	}
	return w.f.Commit()
}

// Abort drops the file.
func (w *Writer) Abort() { w.f.Close() }
