package model

import (
	"fmt"
	"slices"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// qwen4exp: Qwen3.8-Flash-Next, as llama.cpp 0.7.0 runs it. Its layers are
// qwen35moe's (qwen35.go: Gated DeltaNet and gated attention, experts
// softmax-routed and renormalized with a sigmoid-gated shared expert),
// Gated DeltaNet's output gate a sigmoid rather than a SiLU; what is new
// is around them:
//
//   - Hyper-connections: the residual is S = hyper_connection.count
//     streams (n, S·embd), each a copy of the embedding at first. Before
//     the mixer and before the FFN a mix reads them: xn = the streams
//     RMS-normed one by one, times hc_*_norm (S·embd values); gate =
//     hc_*_up·silu(hc_*_down·xn / S) (a rank hyper_connection.low_rank
//     bottleneck); the block reads mean_s(xn_s ⊙ sigmoid(gate_s)), and its
//     output o is added to each stream s times 2·sigmoid(inject_s / S),
//     inject = hc_*_inject·xn (S values). No attention, FFN or output
//     norms: the head reads the mix of output_hc_* (without injection).
//     Every step rounds to float32 as llama.cpp's graph (and its fused
//     HC pre/post, the same bits) does.
//   - n-gram hash embeddings (PLE) in the one layer ple.layers names (a
//     Gated DeltaNet layer), before its mix: for each token, its
//     predecessors within the window (a missing one, or any at or before
//     ple.eos_token_id, read as that token) are hashed for each order n
//     of 2..ple.ngram_size, mixed_n = t₀·m₀ ⊕ … ⊕ t_{n-1}·m_{n-1} in
//     uint64 (m = ple.layer_multipliers), into ple.heads_per_ngram heads
//     each: row mixed_n mod head_vocab_sizes[h] + head_offsets[h] of
//     per_layer_token_embd. The heads' rows side by side (embd wide) give
//     key = ple_key·e (S·embd) and value = ple_value·e; with each stream's
//     RMS norms, s = key·query / sqrt(embd) (query the streams), gate =
//     sigmoid(sign(s)·sqrt(max(|s|, 1e-6))); g_s = value·gate_s, and each
//     stream gains g + silu(conv(RMSNorm(g)·ple_norm_conv)), the causal
//     depthwise convolution ple_conv1d of ple.conv_kernel taps dilated by
//     ple.ngram_size (zeros before the window).
//   - QSA (sparse attention) where attention.compress_ratios is above 0
//     (one ratio K for every such layer): the indexer's pooled keys score
//     blocks of K keys, and each query reads the attention.indexer.top_k/K
//     best blocks and the keys after its last whole block (nn.QSABlocks,
//     ml.PooledSparse). A window of at most top_k + K - 1 tokens reads
//     every key that way, which is dense attention; a backend without
//     ml.PooledSparse refuses longer ones by name.
//
// The MTP block (nextn_predict_layers, at the end) is not run.
func init() {
	Register("qwen4exp", newQwen4Exp)
}

type qwen4exp struct {
	*qwen35
	streams int
	mixes   []q4Layer
	head    q4Mix
	ple     *q4PLE // nil: no PLE layer
	reach   int    // the longest window QSA reads whole (q4Indexer.reach); 0: no QSA layer
	context int    // Options.Context, for Check
	cols    [][]int
}

// q4Layer is a layer's hyper-connection mixes and its QSA indexer (nil:
// dense attention).
type q4Layer struct {
	attn, ffn q4Mix
	qsa       *q4Indexer
}

// q4Indexer is a layer's QSA indexer (q4Indexer.keys).
type q4Indexer struct {
	heads, dim, topK, block int
	q, k                    *ml.Matrix // indexer.q_proj, k_proj
	qNorm, kNorm            *ml.Vector // indexer.q_norm, k_norm
	rope                    *nn.RoPE   // the attention's, on heads of dim
}

// reach is the longest window that reads every key: top_k/block whole
// blocks, and block - 1 keys after them.
func (x *q4Indexer) reach() int { return x.topK + x.block - 1 }

// keys runs the indexer over the layer's mix h: the keys each query row
// reads.
func (x *q4Indexer) keys(b ml.Backend, ps ml.PooledSparse, h ml.Tensor, eps float64) ml.KeySet {
	n := h.Rows()
	mark := b.Mark()
	defer b.Release(mark)
	q, raw, p := b.Alloc(n, x.heads*x.dim), b.Alloc(n, x.dim), b.Alloc(n, x.dim)
	b.Linears([]ml.Tensor{q, raw}, h, []*ml.Matrix{x.q, x.k})
	ps.PoolKeys(p, raw, nil, nil, x.block) // row r: the block starting at r, normed and turned to r below
	b.RMSNorm(p, p, x.kNorm, eps)
	b.RoPE(p, 1, x.rope)
	qh := b.View(q, n*x.heads, x.dim)
	b.RMSNorm(qh, qh, x.qNorm, eps)
	b.RoPE(q, x.heads, x.rope)
	return ps.PooledKeys(q, p, nil, x.heads, x.block, x.topK)
}

// q4Mix is one hyper-connection mix (q4Mix.read).
type q4Mix struct {
	norm             *ml.Vector // streams·embd: each stream's RMSNorm weights
	down, up, inject *ml.Matrix // inject nil: the head's
}

// q4PLE is the n-gram hash embeddings of one layer.
type q4PLE struct {
	layer, gram, perGram, kernel int
	eos                          uint64
	mult, offsets, sizes         []uint64
	table                        *ml.Matrix // rows of width embd/heads
	key, value                   *ml.Matrix
	normKey, normQuery, normConv *ml.Vector
	taps                         []*ml.Vector // tap k: one weight per channel
}

func newQwen4Exp(l *Loader) Network {
	moe := &moeOpts{gating: ml.GateSoftmax, norm: true}
	q, recurrent := qwen35Base(l, qwen35Opts{tiled: true, hyper: true})
	if q == nil {
		return nil
	}
	hp := q.hp
	m := meta{l.f, hp.Arch}
	S, err := m.int("hyper_connection.count", -1)
	if err == nil && S <= 1 {
		err = fmt.Errorf("metadata %s.hyper_connection.count = %d, want > 1", hp.Arch, S)
	}
	var lr, idxHeads, idxDim, topK int
	if err == nil {
		lr, err = m.positive("hyper_connection.low_rank", -1)
	}
	if err == nil {
		idxHeads, err = m.positive("attention.indexer.head_count", -1)
	}
	if err == nil {
		idxDim, err = m.positive("attention.indexer.key_length", -1)
	}
	if err == nil {
		topK, err = m.positive("attention.indexer.top_k", -1)
	}
	var ratios []int
	if err == nil {
		ratios, err = m.layerInts("attention.compress_ratios", hp.Layers, 0)
	}
	if err != nil {
		l.fail(err)
	}
	if l.Err() != nil { // the base's RoPE among them
		return nil
	}
	kpool := 0
	for _, r := range ratios {
		switch {
		case r == 0:
		case kpool != 0 && r != kpool:
			l.Failf("metadata %s.attention.compress_ratios: QSA layers must share one compress ratio, got %d and %d", hp.Arch, kpool, r)
			return nil
		default:
			kpool = r
		}
	}
	if kpool == 1 || kpool > 0 && topK%kpool != 0 {
		l.Failf("metadata %s.attention.compress_ratios: QSA needs a compress ratio above 1 that divides attention.indexer.top_k, got %d and %d", hp.Arch, kpool, topK)
		return nil
	}
	E := hp.Embd
	v := &qwen4exp{qwen35: q, streams: S, head: l.q4Mix("output_hc_", S, E, lr, false), context: l.Opts.Context}
	rope := q.rope.WithDims(q.rope.Dims, true) // on the indexer's heads
	rope.HeadDim = idxDim
	if err := rope.Validate(); err != nil {
		l.Failf("metadata %s.attention.indexer.key_length = %d: %v", hp.Arch, idxDim, err)
		return nil
	}
	for s := range S {
		v.cols = append(v.cols, slices.Repeat([]int{s}, E))
	}
	moeP := l.moeParams(*moe)
	for i, rec := range recurrent {
		p := fmt.Sprintf("blk.%d.", i)
		ly := q.mixer(l, i, rec, false)
		mx := q4Layer{attn: l.q4Mix(p+"hc_attn_", S, E, lr, true), ffn: l.q4Mix(p+"hc_ffn_", S, E, lr, true)}
		if !rec { // the indexer, whose tensors llama.cpp requires in every attention layer
			x := p + "indexer."
			ix := &q4Indexer{heads: idxHeads, dim: idxDim, topK: topK, block: ratios[i], rope: rope,
				q: l.Linear(x+"q_proj", E, idxHeads*idxDim), k: l.Linear(x+"k_proj", E, idxDim),
				qNorm: l.Norm(x+"q_norm", idxDim), kNorm: l.Norm(x+"k_norm", idxDim)}
			if ix.block > 0 {
				mx.qsa, v.reach = ix, ix.reach()
			}
		}
		ly.ffn = q.ffn(l, i, moeP)
		q.layers = append(q.layers, ly)
		v.mixes = append(v.mixes, mx)
	}
	v.ple = l.q4PLE(m, S, recurrent)
	if l.Err() != nil {
		return nil
	}
	return v
}

// q4Mix binds a hyper-connection mix's tensors (prefix p: "blk.N.hc_attn_").
func (l *Loader) q4Mix(p string, S, E, lr int, inject bool) q4Mix {
	x := q4Mix{
		norm: l.streamNorm(p+"norm.weight", E, S),
		down: l.Linear(p+"down", S*E, lr),
		up:   l.Linear(p+"up", lr, S*E),
	}
	if inject {
		x.inject = l.Linear(p+"inject", S*E, S)
	}
	return x
}

// streamNorm binds a norm's weights for each of S streams of E values,
// stored {E, S} or flat, {S·E} (llama.cpp reshapes either: its
// TENSOR_ALLOW_RESHAPE).
func (l *Loader) streamNorm(name string, E, S int) *ml.Vector {
	if t, ok := l.f.Tensor(name); ok && sameShape(t.Shape, []int{S * E}) {
		return l.tensorVector(name, S*E)
	}
	return l.tensorVector(name, E, S)
}

// q4PLE reads the PLE metadata and binds its tensors; nil without
// ple.layers, or after an error.
func (l *Loader) q4PLE(m meta, S int, recurrent []bool) *q4PLE {
	hp := l.HP
	a := hp.Arch
	v, ok := l.f.Lookup(a + ".ple.layers")
	if !ok || v.Len() == 0 {
		return nil
	}
	layers, err := l.f.Int32s(a + ".ple.layers")
	if err != nil {
		l.fail(err)
		return nil
	}
	if len(layers) != 1 {
		l.Failf("metadata %s.ple.layers lists %d layers; llama.cpp supports one PLE layer", a, len(layers))
		return nil
	}
	p := &q4PLE{layer: int(layers[0])}
	var hd, eos int
	p.gram, err = m.int("ple.ngram_size", -1)
	if err == nil && p.gram < 2 {
		err = fmt.Errorf("metadata %s.ple.ngram_size = %d, want >= 2", a, p.gram)
	}
	if err == nil {
		p.perGram, err = m.positive("ple.heads_per_ngram", -1)
	}
	if err == nil {
		p.kernel, err = m.positive("ple.conv_kernel", -1)
	}
	if err == nil {
		eos, err = m.int("ple.eos_token_id", -1)
	}
	if err == nil {
		hd, err = m.positive("embedding_length_per_layer_input", -1)
	}
	heads := (p.gram - 1) * p.perGram
	if err == nil {
		p.mult, err = uint64s(l.f, a+".ple.layer_multipliers", p.gram)
	}
	if err == nil {
		p.offsets, err = uint64s(l.f, a+".ple.head_offsets", heads)
	}
	if err == nil {
		p.sizes, err = uint64s(l.f, a+".ple.head_vocab_sizes", heads)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	p.eos = uint64(eos)
	rows := uint64(0)
	for h := range heads {
		if p.sizes[h] == 0 || p.offsets[h]+p.sizes[h] > 1<<31-1 {
			l.Failf("metadata %s.ple.head_vocab_sizes: PLE head %d's range [%d, +%d) does not fit an int32 row index", a, h, p.offsets[h], p.sizes[h])
			return nil
		}
		rows = max(rows, p.offsets[h]+p.sizes[h])
	}
	E := hp.Embd
	switch {
	case p.layer < 0 || p.layer >= len(recurrent) || !recurrent[p.layer]:
		l.Failf("metadata %s.ple.layers: PLE layer %d is not a Gated DeltaNet layer of the %d run", a, p.layer, len(recurrent))
		return nil
	case hd*heads != E:
		l.Failf("metadata %s.embedding_length_per_layer_input = %d: %d PLE heads of it are not embedding_length %d", a, hd, heads, E)
		return nil
	}
	t, ok := l.f.Tensor("per_layer_token_embd.weight")
	if !ok || len(t.Shape) != 2 || t.Shape[1] < rows {
		l.Failf("tensor per_layer_token_embd.weight: want %d rows of %d (the PLE heads' ranges)", rows, hd)
		return nil
	}
	pre := fmt.Sprintf("blk.%d.", p.layer)
	p.table = l.Linear("per_layer_token_embd", hd, int(t.Shape[1]))
	p.key = l.Linear(pre+"ple_key", E, S*E)
	p.value = l.Linear(pre+"ple_value", E, E)
	p.normKey = l.streamNorm(pre+"ple_norm_key.weight", E, S)
	p.normQuery = l.streamNorm(pre+"ple_norm_query.weight", E, S)
	p.normConv = l.streamNorm(pre+"ple_norm_conv.weight", E, S)
	w := l.floats(pre+"ple_conv1d.weight", p.kernel, S*E)
	if w == nil {
		return nil
	}
	for k := range p.kernel {
		tap := make([]float32, S*E)
		for c := range tap {
			tap[c] = w[c*p.kernel+k]
		}
		p.taps = append(p.taps, l.constVector(fmt.Sprintf("%sple_conv1d (tap %d)", pre, k), tap))
	}
	return p
}

// uint64s reads an array of at least n non-negative integers (llama.cpp
// reads the first n).
func uint64s(f *gguf.File, key string, n int) ([]uint64, error) {
	if _, ok := f.Lookup(key); !ok {
		return nil, fmt.Errorf("missing metadata %s", key)
	}
	out, err := f.Uint64s(key)
	if err == nil && len(out) < n {
		err = fmt.Errorf("metadata %s has %d values, want at least %d", key, len(out), n)
	}
	if err != nil {
		return nil, err
	}
	return out[:n], nil
}

// Check requires, besides Gated DeltaNet's recurrent operations, the
// operations the mixes are made of: ml.Latent's Columns, ml.RWKV's
// Sigmoid and SiLU, and for PLE ml.AltUp's MulCols and ml.PLE.
func (v *qwen4exp) Check(b ml.Backend) error {
	if err := v.qwen35.Check(b); err != nil {
		return err
	}
	_, lat := b.(ml.Latent)
	_, rw := b.(ml.RWKV)
	_, au := b.(ml.AltUp)
	_, pl := b.(ml.PLE)
	if !lat || !rw || v.ple != nil && (!au || !pl) {
		return fmt.Errorf("qwen4exp's hyper-connections and n-gram embeddings need ml.Latent's Columns, ml.RWKV's Sigmoid and SiLU, ml.AltUp's MulCols and ml.PLE, which backend %T lacks", b)
	}
	if _, ok := b.(ml.PooledSparse); !ok && v.reach > 0 && v.context > v.reach {
		return fmt.Errorf("qwen4exp: windows of %d tokens, past the %d its QSA indexer reads whole, need its sparse attention, which the %T backend lacks (ml.PooledSparse); windows of at most %d tokens run on it", v.context, v.reach, b, v.reach)
	}
	return nil
}

func (v *qwen4exp) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n, E, S := v.hp, len(tokens), v.hp.Embd, v.streams
	lb := b.(ml.Latent)
	x, h := embedStreams(b, v.tokenEmbd, tokens, S)
	for i := range v.layers {
		ly, mx := &v.layers[i], &v.mixes[i]
		mark := b.Mark()
		if v.ple != nil && v.ple.layer == i {
			v.ple.forward(b, x, tokens, v.cols, hp.Eps)
		}
		inject, out := b.Alloc(n, S), b.Alloc(n, E)
		a := v.read(b, x, &mx.attn, inject)
		if ly.recurrent {
			v.deltaNet(b, out, a, ly)
		} else {
			at := &v.attn
			if ix := mx.qsa; ix != nil && n > ix.reach() {
				ps, ok := b.(ml.PooledSparse)
				if !ok {
					b.Fail(fmt.Errorf("qwen4exp: a window of %d tokens needs QSA's sparse attention, which the %T backend lacks (ml.PooledSparse)", n, b))
					b.Release(mark)
					return h
				}
				sparse := v.attn
				sparse.Keys = ix.keys(b, ps, a, hp.Eps)
				at = &sparse
			}
			v.gatedAttention(b, out, a, i, ly, at)
		}
		v.add(b, x, out, inject)
		f := v.read(b, x, &mx.ffn, inject)
		ly.ffn.Forward(b, out, f)
		v.add(b, x, out, inject)
		b.Release(mark)
	}
	mark := b.Mark()
	lb.Columns(h, 0, v.read(b, x, &v.head, nil), 0, E)
	b.Release(mark)
	return h
}

// read returns the mix mx of the streams x (n, embd), and sets inject
// (n, streams) to its injection logits unless nil.
func (v *qwen4exp) read(b ml.Backend, x ml.Tensor, mx *q4Mix, inject ml.Tensor) ml.Tensor {
	n, E, S := x.Rows(), v.hp.Embd, v.streams
	lb, rc, rw := b.(ml.Latent), b.(ml.Recurrent), b.(ml.RWKV)
	xn := b.Alloc(n, S*E)
	b.RMSNorm(b.View(xn, n*S, E), b.View(x, n*S, E), mx.norm, v.hp.Eps)
	lo := b.Alloc(n, mx.down.Out)
	b.Linear(lo, xn, mx.down)
	b.Scale(lo, 1/float64(S))
	rw.SiLU(lo)
	gate := b.Alloc(n, S*E)
	b.Linear(gate, lo, mx.up)
	rw.Sigmoid(gate)
	rc.Mul(gate, xn, gate)
	acc, tmp := b.Alloc(n, E), b.Alloc(n, E)
	lb.Columns(acc, 0, gate, 0, E)
	for s := 1; s < S; s++ {
		lb.Columns(tmp, 0, gate, s*E, E)
		b.Add(acc, tmp)
	}
	b.Scale(acc, 1/float64(S))
	if inject != nil {
		b.Linear(inject, xn, mx.inject)
	}
	return acc
}

// add adds the block's output out (n, embd) to each stream s of x times
// 2·sigmoid(inject_s / streams); it overwrites inject.
func (v *qwen4exp) add(b ml.Backend, x, out, inject ml.Tensor) {
	b.Scale(inject, 1/float64(v.streams))
	b.(ml.RWKV).Sigmoid(inject)
	b.Scale(inject, 2)
	addStreams(b, x, out, inject, v.cols)
}

// rows returns the table rows the window's tokens gather, heads·n of
// them, token t's heads at [t·heads, (t+1)·heads).
func (p *q4PLE) rows(tokens []int32) []int32 {
	heads := (p.gram - 1) * p.perGram
	out := make([]int32, 0, len(tokens)*heads)
	ctx := make([]uint64, p.gram)
	for i, tok := range tokens {
		ctx[0] = uint64(tok)
		cut := false
		for s := 1; s < p.gram; s++ {
			j := i - s
			cut = cut || j < 0 || uint64(tokens[j]) == p.eos
			ctx[s] = p.eos
			if !cut {
				ctx[s] = uint64(tokens[j])
			}
		}
		for o := 2; o <= p.gram; o++ {
			mixed := ctx[0] * p.mult[0]
			for j := 1; j < o; j++ {
				mixed ^= ctx[j] * p.mult[j]
			}
			for g := range p.perGram {
				h := (o-2)*p.perGram + g
				out = append(out, int32(mixed%p.sizes[h]+p.offsets[h]))
			}
		}
	}
	return out
}

// forward adds the n-gram embeddings to the streams x (n, S·embd);
// cols[s] is embd copies of s.
func (p *q4PLE) forward(b ml.Backend, x ml.Tensor, tokens []int32, cols [][]int, eps float64) {
	n, SE, S := x.Rows(), x.Cols(), len(cols)
	E := SE / S
	rc, rw, au, lb := b.(ml.Recurrent), b.(ml.RWKV), b.(ml.AltUp), b.(ml.Latent)
	mark := b.Mark()
	idx := p.rows(tokens)
	emb := b.Alloc(len(idx), p.table.In)
	b.Embed(emb, p.table, idx)
	e := b.View(emb, n, E)
	key, query, value := b.Alloc(n, SE), b.Alloc(n, SE), b.Alloc(n, E)
	b.Linear(key, e, p.key)
	b.Linear(value, e, p.value)
	grouped := func(t ml.Tensor) ml.Tensor { return b.View(t, n*S, E) }
	b.RMSNorm(grouped(key), grouped(key), p.normKey, eps)
	b.RMSNorm(grouped(query), grouped(x), p.normQuery, eps)
	gate := b.Alloc(n, S)
	b.(ml.PLE).PLEGate(gate, key, query, float64(nn.InvSqrtf(E)))
	gated, wide, tmp := b.Alloc(n, SE), b.Alloc(n, E), b.Alloc(n, E)
	for s := range S {
		rc.GatherCols(wide, gate, cols[s])
		rc.Mul(tmp, value, wide)
		lb.Columns(gated, s*E, tmp, 0, E)
	}
	// The dilated causal convolution as llama.cpp sums it: tap by tap,
	// each a product of a shifted copy of the normed rows (zeros before
	// the window) by one weight per channel.
	hist := (p.kernel - 1) * p.gram
	pad := b.Alloc(hist+n, SE)
	if hist > 0 {
		rc.Zero(b.Slice(pad, 0, hist))
	}
	b.RMSNorm(b.View(b.Slice(pad, hist, hist+n), n*S, E), grouped(gated), p.normConv, eps)
	conv, term := b.Alloc(n, SE), b.Alloc(n, SE)
	for k, w := range p.taps {
		start := hist - (p.kernel-1-k)*p.gram
		if k == 0 {
			au.MulCols(conv, b.Slice(pad, start, start+n), w)
			continue
		}
		au.MulCols(term, b.Slice(pad, start, start+n), w)
		b.Add(conv, term)
	}
	rw.SiLU(conv)
	b.Add(gated, conv)
	b.Add(x, gated)
	b.Release(mark)
}
