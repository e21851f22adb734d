package model

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"ppl.dev/gguf"
	"ppl.dev/quant"
	"ppl.dev/score/ml"
)

// Loader hands an architecture's Builder the tensors it names, checked
// against the shapes it expects. Methods return nil after an error; the
// first error is kept and reported by Load, so a Builder reads as a plain
// list of tensors.
type Loader struct {
	HP   HParams
	Opts Options

	f     *gguf.File
	err   error
	roles map[string]map[gguf.Type]bool // tensor role -> weight types bound
	rinfo RopeInfo
	// alibiBias is ALiBi's maximum bias where the architecture has ALiBi
	// (Info.ALiBi).
	alibiBias float64
	alt       []string // "role=tensor" for roles bound to an alternative
	// kvHead0 is the first layer's key and value head size where it is
	// not HP.HeadDim and HP.ValueDim (Gemma 4's sliding layers'):
	// Info.KVHead0.
	kvHead0 int

	mats   []*ml.Matrix          // every matrix bound, in order, for the backend to prepare
	vecs   []*ml.Vector          // every vector bound
	byName map[string]*ml.Matrix // a tensor bound twice (a tied head) is one Matrix

	// read are the tensors bound; passed and passedBlocks, the names and
	// "blk.N." prefixes of those the architecture leaves unread as
	// llama.cpp does (Info.Unread).
	read, passed map[string]bool
	passedBlocks []string
}

// pass records tensors the architecture leaves unread as llama.cpp 0.7.0
// does (loading them, or not, and computing nothing with them): names, or
// prefixes ending in "." ("blk.3." for a whole block).
func (l *Loader) pass(names ...string) {
	if l.passed == nil {
		l.passed = map[string]bool{}
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".") {
			l.passedBlocks = append(l.passedBlocks, n)
		} else {
			l.passed[n] = true
		}
	}
}

// unbiased drops the bias bound with w (the file's NAME.bias beside
// NAME.weight), which llama.cpp loads and leaves unapplied, and returns w.
func (l *Loader) unbiased(w *ml.Matrix) *ml.Matrix {
	if w == nil || w.Bias == nil {
		return w
	}
	name, _, _ := strings.Cut(w.Name, ".weight")
	w.Bias = nil
	delete(l.read, name+".bias")
	l.pass(name + ".bias")
	return w
}

// unread lists the file's tensors that were neither bound nor passed.
func (l *Loader) unread() []string {
	var out []string
	for _, t := range l.f.Tensors {
		if l.read[t.Name] || l.passed[t.Name] || slices.ContainsFunc(l.passedBlocks, func(p string) bool { return strings.HasPrefix(t.Name, p) }) {
			continue
		}
		out = append(out, t.Name)
	}
	return out
}

// Err returns the first error met, if any.
func (l *Loader) Err() error { return l.err }

func (l *Loader) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

// Failf records an error found by a Builder (a missing bias, say).
func (l *Loader) Failf(format string, args ...any) { l.fail(fmt.Errorf(format, args...)) }

// Has reports whether the file has a tensor called name.
func (l *Loader) Has(name string) bool {
	_, ok := l.f.Tensor(name)
	return ok
}

// needBias records an error for the first of ws without a bias, naming the
// missing tensor (the file's .bias beside the matrix's .weight, or beside
// the fused matrix a part's rows come from).
func (l *Loader) needBias(ws ...*ml.Matrix) {
	for _, w := range ws {
		if l.err != nil {
			return
		}
		if w.Bias == nil { // w.Name: the file's NAME.weight, or a part's NAME.weight[a:b]
			name, _, _ := strings.Cut(w.Name, ".weight")
			l.Failf("missing tensor %s.bias", name)
		}
	}
}

// tensor returns the tensor called name with the given shape (ne0 first)
// and its data, or records an error.
func (l *Loader) tensor(name string, shape ...int) (*gguf.Tensor, []byte) {
	return l.tensorOf(name, func(t *gguf.Tensor) error {
		if !quant.Supported(t.Type) {
			return fmt.Errorf("tensor %s: weight type %v not supported (supported: %s)", name, t.Type, supportedTypes())
		}
		return nil
	}, shape...)
}

// tensorOf is tensor with the check of its type typeErr's (an error
// naming the tensor, or nil).
func (l *Loader) tensorOf(name string, typeErr func(*gguf.Tensor) error, shape ...int) (*gguf.Tensor, []byte) {
	if l.err != nil {
		return nil, nil
	}
	t, ok := l.f.Tensor(name)
	if !ok {
		l.fail(fmt.Errorf("missing tensor %s", name))
		return nil, nil
	}
	if !sameShape(t.Shape, shape) {
		l.fail(fmt.Errorf("tensor %s has shape %v, want %v", name, t.Shape, shape))
		return nil, nil
	}
	if err := typeErr(t); err != nil {
		l.fail(err)
		return nil, nil
	}
	data := l.f.Data(t)
	if data == nil || uint64(len(data)) != t.Size {
		l.fail(fmt.Errorf("tensor %s: data outside the file (truncated?)", name))
		return nil, nil
	}
	l.noteRole(name, t.Type)
	if l.read == nil {
		l.read = map[string]bool{}
	}
	l.read[name] = true
	return t, data
}

// noteRole records the type bound for the tensor's role (Role).
func (l *Loader) noteRole(name string, typ gguf.Type) {
	role := Role(name)
	if l.roles[role] == nil {
		l.roles[role] = map[gguf.Type]bool{}
	}
	l.roles[role][typ] = true
}

// Role is a tensor's role: its name without "blk.N." and ".weight"
// ("attn_q", "output").
func Role(name string) string {
	role := strings.TrimSuffix(name, ".weight")
	if rest, ok := strings.CutPrefix(role, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			role = rest[i+1:]
		}
	}
	return role
}

func sameShape(got []uint64, want []int) bool {
	// GGUF may carry trailing dimensions of 1.
	for len(got) > len(want) && got[len(got)-1] == 1 {
		got = got[:len(got)-1]
	}
	// And a matrix of one row may be stored as a vector.
	for len(want) > len(got) && want[len(want)-1] == 1 {
		want = want[:len(want)-1]
	}
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != uint64(want[i]) {
			return false
		}
	}
	return true
}

// supportedTypes lists the weight types quant can decode.
func supportedTypes() string {
	var s []string
	for t := gguf.Type(0); t < 64; t++ {
		if t.Known() && quant.Supported(t) {
			s = append(s, t.String())
		}
	}
	return strings.Join(s, ", ")
}

// Linear binds name+".weight", a matrix of out rows of in elements, and
// name+".bias" (out values) when the file has it.
func (l *Loader) Linear(name string, in, out int) *ml.Matrix {
	return l.matrix(name, 0, in, out)
}

// Experts binds name+".weight", a stack of n matrices of out rows of in
// elements (GGUF shape [in, out, n]), and name+".bias" (n × out values)
// when the file has it.
func (l *Loader) Experts(name string, n, in, out int) *ml.Matrix {
	return l.matrix(name, n, in, out)
}

// StackNamed binds the tensor called name (the whole name: Granite Switch's
// blk.N.attn_q.lora_a), a stack of n matrices of out rows of in elements,
// without a bias.
func (l *Loader) StackNamed(name string, n, in, out int) *ml.Matrix {
	return l.matrixOf(name, name, n, in, out)
}

func (l *Loader) matrix(name string, experts, in, out int) *ml.Matrix {
	return l.matrixOf(name, name+".weight", experts, in, out)
}

// matrixOf binds the tensor tname as the matrix name; its scale and bias
// (name+".scale", name+".bias") with it when tname is name+".weight".
func (l *Loader) matrixOf(name, tname string, experts, in, out int) *ml.Matrix {
	if w, ok := l.byName[name]; ok && w.In == in && w.Out == out && w.Experts == experts {
		return w
	}
	shape := []int{in, out}
	if experts > 0 {
		shape = append(shape, experts)
	}
	weights := tname == name+".weight"
	t, data := l.tensor(tname, shape...)
	if t == nil {
		return nil
	}
	// tensor checked the type, the shape and the bytes (the backend's
	// Prepare turns them into its own form).
	w := &ml.Matrix{Name: t.Name, Type: t.Type, In: in, Out: out, Experts: experts, Data: data}
	if weights {
		// Activation scales of W4A4 kernels, and a scale llama.cpp does
		// not read (outputScaled): neither is applied to the product.
		l.pass(name+".input_scale", name+".scale")
	}
	if weights && outputScaled(name, t.Type) && l.Has(name+".scale") {
		w.Scale = l.floats(name+".scale", max(experts, 1))
		for e, v := range w.Scale {
			if v == 0 {
				l.Failf("tensor %s.scale: element %d is 0", name, e)
			}
		}
	}
	if weights && l.Has(name+".bias") {
		if experts > 0 {
			w.Bias = l.floats(name+".bias", out, experts)
		} else {
			w.Bias = l.floats(name+".bias", out)
		}
	}
	if l.byName == nil {
		l.byName = map[string]*ml.Matrix{}
	}
	l.byName[name] = w
	l.mats = append(l.mats, w)
	return w
}

// LinearRows binds name+".weight", a matrix of the parts' rows (out[0]
// rows, then out[1], ...) of in elements, as one matrix per part: the
// fused projections some files store (Phi-3's attn_qkv, [q | k | v], and
// ffn_up, [gate | up]). Each part is its own rows of the file's bytes (a
// row is whole blocks), with its share of the bias and the matrix's
// scale: the products are those of the fused matrix, row for row.
func (l *Loader) LinearRows(name string, in int, out ...int) []*ml.Matrix {
	total := 0
	for _, o := range out {
		total += o
	}
	w := l.Linear(name, in, total)
	if w == nil {
		return nil
	}
	return l.splitRows(name, w, out...)
}

// splitRows replaces the bound matrix w (of name) by plain matrices of its
// consecutive rows, out[0] rows, then out[1], ...: each part is its own
// rows of the file's bytes (a row is whole blocks), with its share of the
// bias and the matrix's scale, so the products are those of w, row for
// row.
func (l *Loader) splitRows(name string, w *ml.Matrix, out ...int) []*ml.Matrix {
	rowBytes := len(w.Data) / (w.Out * max(w.Experts, 1))
	parts := make([]*ml.Matrix, len(out))
	r := 0
	for i, o := range out {
		p := *w
		p.Name = fmt.Sprintf("%s[%d:%d]", w.Name, r, r+o)
		p.Out, p.Experts, p.Data = o, 0, w.Data[r*rowBytes:(r+o)*rowBytes:(r+o)*rowBytes]
		p.Fused = w.Out
		if w.Bias != nil {
			p.Bias = w.Bias[r : r+o]
		}
		parts[i] = &p
		r += o
	}
	l.replaceMatrix(w, parts...)
	delete(l.byName, name)
	return parts
}

// replaceMatrix makes by, not the bound w, what the backend prepares (a
// fused matrix's parts, padded value heads).
func (l *Loader) replaceMatrix(w *ml.Matrix, by ...*ml.Matrix) {
	l.mats = slices.DeleteFunc(l.mats, func(m *ml.Matrix) bool { return m == w })
	l.mats = append(l.mats, by...)
}

// Stack binds name+".weight", a stack of n matrices of out rows of in
// elements (GGUF shape [in, out, n]), as n plain matrices: a batched
// product whose k-th matrix multiplies the k-th input (Gemma 3n's
// altup_proj), unlike Experts, among which routing chooses.
func (l *Loader) Stack(name string, n, in, out int) []*ml.Matrix {
	w := l.Experts(name, n, in, out)
	if w == nil {
		return nil
	}
	if w.Bias != nil || w.Scale != nil {
		l.Failf("tensor %s: a bias or scale on a stack of matrices is not supported", name)
		return nil
	}
	return l.splitRows(name, w, slices.Repeat([]int{out}, n)...)
}

// outputScaled says whether llama.cpp multiplies the product with matrix
// name by the file's "<name>.scale" tensor (one float32, or one per expert):
// NVFP4's second-level scale (ModelOpt's weight_scale_2), applied after the
// product and before the bias. llama.cpp reads it for the projections of
// attention, the MLPs, the experts and the recurrent layers, and for the
// output head only when that is NVFP4; a ".scale" on any other matrix (the
// token embedding) it does not read, and neither do we. The
// "<name>.input_scale" tensors such files also carry are the activations'
// FP4 scales of W4A4 kernels: llama.cpp does not apply them to the product,
// nor do we.
func outputScaled(name string, t gguf.Type) bool {
	if name == "output" {
		return t == gguf.TypeNVFP4
	}
	base := name
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if _, b, ok := strings.Cut(rest, "."); ok {
			base = b
		}
	}
	switch base {
	case "attn_q", "attn_k", "attn_v", "attn_output", "attn_qkv", "attn_gate",
		"ffn_gate", "ffn_up", "ffn_down", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp",
		"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
		"ssm_in", "ssm_out", "ssm_alpha", "ssm_beta":
		return true
	}
	return false
}

// LinearAlt binds the first of names that the file has, like Linear: the
// output head is "output", or the token embedding when the two are tied.
// The weight type is recorded under names[0]'s role either way, and Info
// says when an alternative was bound.
func (l *Loader) LinearAlt(in, out int, names ...string) *ml.Matrix {
	for i, n := range names {
		if l.Has(n + ".weight") {
			lin := l.Linear(n, in, out)
			if lin != nil && i > 0 {
				l.noteRole(names[0], lin.Type)
				l.alt = append(l.alt, names[0]+"="+n)
			}
			return lin
		}
	}
	l.fail(fmt.Errorf("missing tensor %s.weight", strings.Join(names, ".weight or ")))
	return nil
}

// Vector binds a one-dimensional tensor of n values, decoded to float32.
func (l *Loader) Vector(name string, n int) *ml.Vector {
	v := l.floats(name, n)
	if v == nil {
		return nil
	}
	w := &ml.Vector{Name: name, V: v}
	l.vecs = append(l.vecs, w)
	return w
}

// ones is a vector of n weights of 1 named name (a norm without weights).
func (l *Loader) ones(name string, n int) *ml.Vector {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return l.constVector(name, v)
}

// constVector is v as a vector named name that no tensor of the file holds
// (weights of 1, ALiBi's slopes), prepared for the backend as the file's.
func (l *Loader) constVector(name string, v []float32) *ml.Vector {
	w := &ml.Vector{Name: name, V: v}
	l.vecs = append(l.vecs, w)
	return w
}

// floats decodes a tensor of the given shape to float32, refusing NaN and
// infinite values.
func (l *Loader) floats(name string, shape ...int) []float32 {
	t, data := l.tensor(name, shape...)
	if t == nil {
		return nil
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]float32, n)
	if err := quant.Dequantize(t.Type, data, out); err != nil {
		l.fail(fmt.Errorf("tensor %s: %w", name, err))
		return nil
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			l.fail(fmt.Errorf("tensor %s: element %d is %v", name, i, v))
			return nil
		}
	}
	return out
}

// Norm binds name+".weight", a norm's scale of n values.
func (l *Loader) Norm(name string, n int) *ml.Vector {
	return l.Vector(name+".weight", n)
}

// bareNorm binds a norm llama.cpp 0.7.0 names without the ".weight"
// suffix (falcon-h1's ffn_norm, plamo3's post-norms): the tensor name
// itself, or name+".weight" when the file has only that (as Hugging Face
// converters write every norm), the same weights either way.
func (l *Loader) bareNorm(name string, n int) *ml.Vector {
	if !l.Has(name) && l.Has(name+".weight") {
		return l.Norm(name, n)
	}
	return l.Vector(name, n)
}

// splitGateUp binds a fused stack of n experts' gate and up matrices
// (GGUF shape [in, 2·out, n]: per expert, out gate rows then out up rows)
// as two stacks, copying the rows apart.
func (l *Loader) splitGateUp(name string, n, in, out int) (gate, up *ml.Matrix) {
	t, data := l.tensor(name+".weight", in, 2*out, n)
	if t == nil {
		return nil, nil
	}
	if l.Has(name + ".bias") {
		l.Failf("tensor %s.bias: biases on fused expert gate/up matrices are not supported", name)
		return nil, nil
	}
	half := len(data) / (2 * n) // bytes of one expert's out rows
	g, u := make([]byte, 0, n*half), make([]byte, 0, n*half)
	for e := range n {
		g = append(g, data[2*e*half:(2*e+1)*half]...)
		u = append(u, data[(2*e+1)*half:(2*e+2)*half]...)
	}
	mk := func(suffix string, d []byte) *ml.Matrix {
		w := &ml.Matrix{Name: t.Name + suffix, Type: t.Type, In: in, Out: out, Experts: n, Data: d}
		l.mats = append(l.mats, w)
		return w
	}
	return mk("[gate]", g), mk("[up]", u)
}
