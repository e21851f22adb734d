package llamakld

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/score/nn"
)

func TestNearestInt(t *testing.T) {
	for _, c := range []struct {
		v    float32
		want int32
	}{{0, 0}, {0.4999, 0}, {0.5, 0}, {1.5, 2}, {2.5, 2}, {65534.5, 65534}, {65535, 65535}, {-0.6, -1}, {3.49, 3}} {
		if got := nearestInt(c.v); got != c.want {
			t.Errorf("nearestInt(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}

// logits returns n random logits of spread s, with ties and a few far
// below the rest (beyond the 16 nats a row keeps).
func logits(r *rand.Rand, n int, s float64) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * s)
		if i%17 == 3 {
			l[i] = l[i-1]
		}
		if i%29 == 5 {
			l[i] -= 40
		}
	}
	return l
}

// TestQuantize checks a row against the exact log-softmax: the tokens
// within 16 nats of the top decode within half a step (scale/2, plus the
// float32 roundings of the sum), the others to the row's minimum; the
// scale and minimum are the header's; an odd vocabulary's padding is 0.
// A row of equal logits has scale 0 and every code 0.
func TestQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 7, 1000, 32001} {
		for _, s := range []float64{0.01, 1, 5} {
			l := logits(r, n, s)
			row := make(Row, RowLen(n)+1)
			row[len(row)-1] = 0xbeef // past the row: untouched
			nll := Quantize(row[:RowLen(n)], l, n/2)
			mx := float64(slices.Max(l))
			var sum float64
			for _, v := range l {
				sum += math.Exp(float64(v) - mx)
			}
			lse := mx + math.Log(sum)
			if d := math.Abs(nll - (lse - float64(l[n/2]))); d > 1e-5*(1+math.Abs(nll)) {
				t.Errorf("n %d spread %v: -log p %v, exact %v", n, s, nll, lse-float64(l[n/2]))
			}
			scale, minLP := row.float(0), row.float(1)
			for i, v := range l {
				exact := float64(v) - lse
				got := float64(row.LogProb(i))
				switch {
				case float64(v) > mx-16:
					if d := math.Abs(got - exact); d > float64(scale)/2+1e-5*(1+math.Abs(exact)) {
						t.Fatalf("n %d spread %v token %d: log p %v, exact %v (step %v)", n, s, i, got, exact, scale)
					}
				case got != float64(minLP):
					t.Fatalf("n %d spread %v token %d, %v below the top: log p %v, want the minimum %v", n, s, i, mx-float64(v), got, minLP)
				}
			}
			if n%2 == 1 && row[RowLen(n)-1] != 0 {
				t.Errorf("n %d: padding %#x", n, row[RowLen(n)-1])
			}
			if row[len(row)-1] != 0xbeef {
				t.Errorf("n %d: wrote past the row", n)
			}
		}
	}
	row := make(Row, RowLen(5))
	Quantize(row, []float32{2, 2, 2, 2, 2}, 0)
	if row.float(0) != 0 || slices.ContainsFunc(row[4:], func(q uint16) bool { return q != 0 }) {
		t.Errorf("equal logits: scale %v, codes %v", row.float(0), row[4:])
	}
	if got, want := row.LogProb(3), float32(-math.Log(5)); math.Abs(float64(got-want)) > 1e-6 {
		t.Errorf("equal logits: log p %v, want %v", got, want)
	}
}

// TestScore checks Score against a base row of the same logits (KL within
// what the 16-bit codes move it, about 1e-5, the same top token, p the
// same) and of shifted
// ones: KL(base || model) then matches the float64 one over the tokens
// within 16 nats of the base's top.
func TestScore(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 5000
	for _, s := range []float64{0.5, 3} {
		base := logits(r, n, s)
		row := make(Row, RowLen(n))
		Quantize(row, base, 7)
		self := Score(base, row, 7)
		if !self.SameTop || math.Abs(self.KLD) > 3e-5 || math.Abs(float64(self.NLL-self.NLLBase)) > 3e-4 || math.Abs(float64(self.PDiff)) > 1e-6 {
			t.Errorf("spread %v, the base's own logits: %+v", s, self)
		}
		model := slices.Clone(base)
		for i := range model {
			model[i] += float32(r.NormFloat64() * 0.3)
		}
		got := Score(model, row, 7)
		mx, mm := float64(slices.Max(base)), float64(slices.Max(model))
		var sb, sm float64
		for i := range base {
			sb += math.Exp(float64(base[i]) - mx)
			sm += math.Exp(float64(model[i]) - mm)
		}
		lb, lm := mx+math.Log(sb), mm+math.Log(sm)
		var want float64
		for i := range base {
			if lp := float64(base[i]) - lb; float64(row.LogProb(i)) > -16 {
				want += math.Exp(lp) * (lp - (float64(model[i]) - lm))
			}
		}
		if d := math.Abs(got.KLD - want); d > 1e-3*want+1e-6 {
			t.Errorf("spread %v: KLD %v, float64 %v", s, got.KLD, want)
		}
		if d := math.Abs(float64(got.NLL) - (lm - float64(model[7]))); d > 1e-5*(1+lm) {
			t.Errorf("spread %v: -log p %v, float64 %v", s, got.NLL, lm-float64(model[7]))
		}
		if top := slices.Index(model, slices.Max(model)) == slices.Index(base, slices.Max(base)); got.SameTop != top {
			t.Errorf("spread %v: same top %v, want %v", s, got.SameTop, top)
		}
	}
}

// TestFile writes a base file and reads it back, and checks that a
// writer stopped short leaves no file.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.kld")
	const nctx, nvocab = 10, 33
	tokens := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 32, 0, 5, 5, 5, 5, 5, 5, 5, 5}
	w, err := Create(path, nctx, nvocab, tokens)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	rl := RowLen(nvocab)
	var all []uint16
	for range 2 {
		rows := make([]uint16, Targets(nctx)*rl)
		for i := range Targets(nctx) {
			Quantize(rows[i*rl:(i+1)*rl], logits(r, nvocab, 2), i)
		}
		if err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	if err := w.Write(all[:rl]); err == nil || !strings.Contains(err.Error(), "more than the 8 rows") {
		t.Errorf("a row too many: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a refused row: no error")
	}
	w, _ = Create(path, nctx, nvocab, tokens)
	w.Write(all)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.NCtx != nctx || b.NVocab != nvocab || b.NChunk != 2 || !slices.Equal(b.Tokens, tokens) {
		t.Fatalf("header %d %d %d %v", b.NCtx, b.NVocab, b.NChunk, b.Tokens)
	}
	for k := range 2 {
		rows, err := b.Chunk(k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rows, all[k*len(all)/2:(k+1)*len(all)/2]) {
			t.Errorf("chunk %d differs", k)
		}
	}
	if _, err := b.Chunk(2, nil); err == nil {
		t.Error("chunk 2 of 2: no error")
	}
	// Prefetch: the same rows, to every caller; a file cut short after
	// Open checked it fails the chunk it lost, naming the file.
	p1 := b.Prefetch(1)
	done := make(chan []uint16)
	for range 3 {
		go func() {
			rows, _ := p1()
			done <- rows
		}()
	}
	for range 3 {
		if rows := <-done; !slices.Equal(rows, all[len(all)/2:]) {
			t.Error("Prefetch(1): rows differ from chunk 1's")
		}
	}
	cut := filepath.Join(t.TempDir(), "cut.kld")
	raw, _ := os.ReadFile(path)
	os.WriteFile(cut, raw, 0o644)
	bc, err := Open(cut)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if err := os.Truncate(cut, bc.rows+bc.chunkBytes()+10); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.Prefetch(0)(); err != nil {
		t.Errorf("Prefetch(0) of the cut file: %v", err)
	}
	if _, err := bc.Prefetch(1)(); err == nil || !strings.Contains(err.Error(), cut+": chunk 1: EOF") {
		t.Errorf("Prefetch(1) of the cut file: %v", err)
	}

	// The byte-order path of a big-endian host, run here: the same bytes
	// written, the same rows read back.
	littleEndian = false
	swapped := filepath.Join(dir, "swapped.kld")
	w, _ = Create(swapped, nctx, nvocab, tokens)
	w.Write(all)
	err = w.Close()
	if err == nil {
		var sb *File
		if sb, err = Open(swapped); err == nil {
			rows, _ := sb.Chunk(1, nil)
			if !slices.Equal(rows, all[len(all)/2:]) {
				t.Error("big-endian path: chunk 1 differs")
			}
			sb.Close()
		}
	}
	littleEndian = true
	if err != nil {
		t.Fatalf("big-endian path: %v", err)
	}
	a, err1 := os.ReadFile(path)
	b2, err2 := os.ReadFile(swapped)
	if err1 != nil || err2 != nil || !slices.Equal(a, b2) {
		t.Errorf("big-endian path: the file differs (%v, %v)", err1, err2)
	}
	os.Remove(swapped)

	// One chunk of two written: no file, no temporary left.
	short := filepath.Join(dir, "short.kld")
	w, _ = Create(short, nctx, nvocab, tokens)
	w.Write(all[:len(all)/2])
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "4 of its 8 rows written") {
		t.Errorf("short Close: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 || left[0].Name() != "b.kld" {
		t.Errorf("in the directory: %v, want b.kld alone", left)
	}
	if _, err := Create(short, nctx, nvocab, tokens[:15]); err == nil {
		t.Error("15 tokens in chunks of 10: no error")
	}
	if _, err := Create(short+".zst", nctx, nvocab, tokens); err == nil || !strings.Contains(err.Error(), "uncompressed") {
		t.Errorf("a .zst name: %v", err)
	}
}

// TestOpenErrors checks that Open refuses broken files with a message
// naming the file.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	header := func(nctx, nvocab, nchunk int32, tokens ...int32) []byte {
		b := []byte(Magic)
		for _, v := range append([]int32{nctx, nvocab, nchunk}, tokens...) {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return b
	}
	good := append(header(4, 3, 1, 1, 2, 0, 1), make([]byte, 2*RowLen(3)*Targets(4))...) // one target
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a llama-perplexity KL-divergence base file"},
		{"magic", append([]byte("_logitz_"), good[8:]...), "not a llama-perplexity KL-divergence base file"},
		{"short header", good[:15], "not a llama-perplexity KL-divergence base file"},
		{"zero chunks", header(2, 3, 0), "header says context 2, vocabulary 3, 0 chunks"},
		{"negative vocabulary", header(4, -3, 1, 1, 2, 0, 1), "header says context 4, vocabulary -3, 1 chunks"},
		{"one byte short", good[:len(good)-1], "51 bytes, but its header (context 4, vocabulary 3, 1 chunks) makes 52"},
		{"one byte long", append(slices.Clone(good), 0), "53 bytes, but its header"},
		{"huge header", header(1<<30, 1<<30, 1<<30), "makes 1237940046202909293950271508"},
		{"token", append(header(4, 3, 1, 1, 3, 0, 1), make([]byte, 2*RowLen(3)*Targets(4))...), "token 3 (chunk 0, position 1) outside the vocabulary of 3"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), p+": ") {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	p := filepath.Join(dir, "good")
	os.WriteFile(p, good, 0o644)
	b, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// FuzzOpen reads arbitrary files: Open either refuses them or reads every
// chunk.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(Magic))
	b := []byte(Magic)
	for _, v := range []int32{4, 3, 1, 1, 2, 0, 1} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	f.Add(append(b, make([]byte, 2*RowLen(3))...))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "f.kld")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Open(p)
		if err != nil {
			return
		}
		defer b.Close()
		for k := range b.NChunk {
			if _, err := b.Chunk(k, nil); err != nil {
				t.Fatalf("chunk %d of a file Open took: %v", k, err)
			}
		}
	})
}

// quantizeRef is Quantize as plain loops, one glibc expf at a time and a
// branch per token: the arithmetic the blocked form must reproduce bit
// for bit (as kldPlain is kldBlocks's, and logSumExpPlain logSumExp's).
func quantizeRef(row Row, logits []float32, tok int) float64 {
	maxLogit, minLogit := slices.Max(logits), slices.Min(logits)
	minLogit = max(minLogit, maxLogit-16)
	lse := logSumExpPlain(logits, maxLogit)
	minLP := (minLogit - maxLogit) - lse
	scale := (maxLogit - minLogit) / 65535
	row[0], row[1] = uint16(math.Float32bits(scale)), uint16(math.Float32bits(scale)>>16)
	row[2], row[3] = uint16(math.Float32bits(minLP)), uint16(math.Float32bits(minLP)>>16)
	q := row[4:]
	clear(q)
	if scale != 0 {
		for i, v := range logits {
			if v > minLogit {
				q[i] = uint16(nearestInt(1 / scale * (v - minLogit)))
			}
		}
	}
	return float64(float32(maxLogit+lse) - logits[tok])
}

// TestScoreReference checks the blocked loops against the plain ones, bit
// for bit, at every CPU level (nn's vector kernels and plain Go):
// kldBlocks against kldPlain, logSumExp against logSumExpPlain, Quantize
// against quantizeRef; vocabularies of 1 to 152,064 tokens (past and short of
// the blocks of 512 and the lanes of 16), logits of spreads from 0.01 to
// 30 with ties and tokens 40 below the rest, rows of equal logits, logits
// of ±1e30, and models near and far from the base.
func TestScoreReference(t *testing.T) {
	prev := nn.CurrentLevel()
	defer nn.SetLevel(prev)
	for _, lv := range nn.Levels() {
		nn.SetLevel(lv)
		r := rand.New(rand.NewPCG(9, 10))
		for _, n := range []int{1, 2, 15, 17, 511, 513, 5000, 152064} {
			for _, s := range []float64{0.01, 1, 5, 30} {
				base, model := logits(r, n, s), logits(r, n, s)
				switch {
				case s == 5 && n > 2:
					base[1], model[2] = 1e30, -1e30
				case s == 0.01:
					for i := range base {
						base[i] = 2
					}
				}
				tok := r.IntN(n)
				row, ref := make(Row, RowLen(n)), make(Row, RowLen(n))
				for i := range row {
					row[i], ref[i] = 0xbeef, 0xbeef
				}
				nll, want := Quantize(row, base, tok), quantizeRef(ref, base, tok)
				if math.Float64bits(nll) != math.Float64bits(want) || !slices.Equal(row, ref) {
					t.Fatalf("level %v, n %d spread %v: Quantize differs from quantizeRef (-log p %v, %v)", lv, n, s, nll, want)
				}
				for _, m := range [][]float32{base, model} {
					mx := slices.Max(m)
					if got, want := logSumExp(m, mx), logSumExpPlain(m, mx); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("level %v, n %d spread %v: logSumExp %v, the plain loop's %v", lv, n, s, got, want)
					}
					top := mx + logSumExp(m, mx)
					got, gi := kldBlocks(m, row[4:], row.float(0), row.float(1), top)
					want, wi := kldPlain(m, row[4:], row.float(0), row.float(1), top)
					if math.Float64bits(got) != math.Float64bits(want) || gi != wi {
						t.Fatalf("level %v, n %d spread %v: kldBlocks %v (top %d), kldPlain %v (top %d)", lv, n, s, got, gi, want, wi)
					}
				}
			}
		}
	}
}
