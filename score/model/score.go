package model

import (
	"errors"
	"fmt"
	"math"

	"ppl.dev/quant"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// RowBlock is the least number of positions whose logits exist at once;
// rowBlock raises it to fill logitFloats.
const RowBlock = 64

// logitFloats is how many logits may exist at once per model (64 MB): the
// output head then runs over 512 positions of a 32k vocabulary at a time,
// or 110 of 152k, so its weights are decoded once for that many positions.
const logitFloats = 16 << 20

// rowBlock is how many positions' logits exist at once for a vocabulary.
func rowBlock(vocab int) int { return max(RowBlock, logitFloats/vocab) }

// Result holds the scores of the targets tokens[ScoreFrom:]: element i-ScoreFrom
// of each slice belongs to target i, predicted from tokens[:i].
type Result struct {
	ScoreFrom int
	Logprobs  []float64 // log p(tokens[i] | tokens[:i])
	Argmax    []int32   // the model's most likely token at i (the first, on ties)

	// Set by ScoreWith only.
	RefLogprobs []float64 // the reference model's log p(tokens[i] | tokens[:i])
	KLD         []float64 // KL(reference || model) over the whole vocabulary, nats
	Top1Agree   []bool    // whether both models' argmax agree
}

// Score runs tokens through the model from an empty cache, as positions
// 0..len-1, and scores each target i in [scoreFrom, len(tokens)).
// scoreFrom must be at least 1 (target 0 has no context).
func (m *Model) Score(tokens []int32, scoreFrom int) (*Result, error) {
	return m.score(tokens, scoreFrom, nil, false, nil)
}

// ScoreVisit is Score, and visit sees each target's logits on the host:
// visit(j, logits) for target scoreFrom+j, the model's logits over the
// vocabulary (a copy back from the device per block of rows on a GPU).
// visit runs on several goroutines at once, each call for another j, and
// must not keep logits.
func (m *Model) ScoreVisit(tokens []int32, scoreFrom int, visit func(j int, logits []float32)) (*Result, error) {
	return m.score(tokens, scoreFrom, nil, false, visit)
}

// ScoreWith is Score plus, for each target, the KL divergence of the model's
// next-token distribution from ref's, ref's log-probability of the target,
// and whether the two models' top tokens agree. Both models must share the
// vocabulary. ref is locked after m: do not score two models against each
// other in both directions at once.
func (m *Model) ScoreWith(tokens []int32, scoreFrom int, ref *Model) (*Result, error) {
	if err := m.checkRef("ScoreWith", ref); err != nil {
		return nil, err
	}
	return m.score(tokens, scoreFrom, ref, false, nil)
}

// ScoreWithApart is ScoreWith for a reference on another device than m's
// (another GPU): the two forward passes run at once, each on its own
// device, as do the two output heads of each block of rows, and each block
// of ref's logits comes to m's backend through the host (ref's Read, then
// m's Write) for m's LogSoftmax. The results are ScoreWith's to the bit:
// the same logits meet in the same LogSoftmax. It costs m's device one more
// block of logits, and each block a copy through the host.
func (m *Model) ScoreWithApart(tokens []int32, scoreFrom int, ref *Model) (*Result, error) {
	if err := m.checkRef("ScoreWithApart", ref); err != nil {
		return nil, err
	}
	return m.score(tokens, scoreFrom, ref, true, nil)
}

func (m *Model) checkRef(op string, ref *Model) error {
	switch {
	case ref == nil:
		return fmt.Errorf("model: %s: no reference model", op)
	case ref == m:
		return fmt.Errorf("model: %s: the reference is the model itself", op)
	case ref.Vocab() != m.Vocab():
		return fmt.Errorf("model: %s: reference vocabulary has %d tokens, model %d", op, ref.Vocab(), m.Vocab())
	}
	return nil
}

func (m *Model) checkTokens(tokens []int32, scoreFrom int) error {
	if scoreFrom < 1 || scoreFrom > len(tokens) {
		return fmt.Errorf("model: score from %d with %d tokens (want 1 <= from <= tokens)", scoreFrom, len(tokens))
	}
	if l, ok := m.net.(Limited); ok && l.MaxTokens() > 0 && len(tokens) > l.MaxTokens() {
		return fmt.Errorf("model: a window of %d tokens, but %s has learned positions for %d", len(tokens), m.HP.Arch, l.MaxTokens())
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.HP.Vocab {
			return fmt.Errorf("model: token %d at position %d is outside the vocabulary [0, %d)", t, i, m.HP.Vocab)
		}
	}
	return nil
}

// score scores tokens, against ref when it is not nil; apart says that ref
// is on another device (ScoreWithApart); visit, when not nil, sees the
// logits (ScoreVisit).
func (m *Model) score(tokens []int32, scoreFrom int, ref *Model, apart bool, visit func(int, []float32)) (*Result, error) {
	if err := m.checkTokens(tokens, scoreFrom); err != nil {
		return nil, err
	}
	n, nt := len(tokens), len(tokens)-scoreFrom
	res := &Result{ScoreFrom: scoreFrom, Logprobs: make([]float64, nt), Argmax: make([]int32, nt)}
	if ref != nil {
		res.RefLogprobs, res.KLD, res.Top1Agree = make([]float64, nt), make([]float64, nt), make([]bool, nt)
	}
	if nt == 0 {
		return res, nil
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	var hid, rhid ml.Tensor
	var err error
	if apart {
		ref.mu.Lock()
		defer ref.mu.Unlock()
		var rerr error
		concurrently(func() { hid, err = m.forward(tokens) }, func() { rhid, rerr = ref.forward(tokens) })
		if err != nil {
			return nil, err
		}
		if rerr != nil {
			return nil, fmt.Errorf("reference: %w", rerr)
		}
	} else {
		if hid, err = m.forward(tokens); err != nil {
			return nil, err
		}
		if ref != nil {
			ref.mu.Lock()
			defer ref.mu.Unlock()
			if rhid, err = ref.forward(tokens); err != nil {
				return nil, fmt.Errorf("reference: %w", err)
			}
		}
	}

	vocab := m.HP.Vocab
	rb := min(rowBlock(vocab), n-scoreFrom)
	b := m.b
	logits := b.Alloc(rb, vocab)
	var rlogits, rcopy ml.Tensor // rcopy: ref's logits on m's backend, when apart
	if ref != nil {
		rlogits = ref.b.Alloc(rb, vocab)
	}
	if apart {
		rcopy = b.Alloc(rb, vocab)
	}
	targets := tokens[1:]
	// Hidden row p predicts token p+1: rows [scoreFrom-1, n-1).
	for r0 := scoreFrom - 1; r0 < n-1; r0 += rb {
		nb := min(rb, n-1-r0)
		i, first := r0+1-scoreFrom, r0 == scoreFrom-1
		out := &ml.Scores{LP: res.Logprobs[i : i+nb], Arg: res.Argmax[i : i+nb]}
		lg := b.Slice(logits, 0, nb)
		var rlg ml.Tensor
		switch {
		case apart:
			var host []float32
			concurrently(func() { m.project(lg, hid, r0, nb, first) }, func() {
				rl := ref.b.Slice(rlogits, 0, nb)
				ref.project(rl, rhid, r0, nb, first)
				host = ref.b.Read(rl)
			})
			rlg = b.Slice(rcopy, 0, nb)
			b.Write(rlg, host)
		case ref != nil:
			m.project(lg, hid, r0, nb, first)
			rlg = ref.b.Slice(rlogits, 0, nb)
			ref.project(rlg, rhid, r0, nb, first)
		default:
			m.project(lg, hid, r0, nb, first)
		}
		var rarg []int32
		if ref != nil {
			rarg = make([]int32, nb)
			out.RLP, out.RArg, out.KLD = res.RefLogprobs[i:i+nb], rarg, res.KLD[i:i+nb]
		}
		if err := errors.Join(b.Err(), refErr(ref)); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		if err := b.LogSoftmax(lg, rlg, targets[r0:r0+nb], out); err != nil {
			var bad *ml.BadLogit
			if errors.As(err, &bad) {
				who := "logits"
				if bad.Ref {
					who = "reference logits"
				}
				src := m
				if bad.Ref {
					src = ref
				}
				cause := nonFinite(src)
				return nil, fmt.Errorf("model: %s for target %d contain %v (token %d)%s", who, r0+1+bad.Row, bad.Value, bad.Token, cause)
			}
			return nil, fmt.Errorf("model: %w", err)
		}
		for j := range rarg {
			res.Top1Agree[i+j] = res.Argmax[i+j] == rarg[j]
		}
		if visit != nil {
			visitRows(b.Read(lg), vocab, i, visit)
		}
	}
	return res, nil
}

// visitRows calls visit(first+j, row j) for each row of the host logits,
// the rows split over GOMAXPROCS goroutines (a nil nn.Context's Parallel).
func visitRows(host []float32, vocab, first int, visit func(int, []float32)) {
	var all *nn.Context
	all.Parallel(len(host)/vocab, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			visit(first+j, host[j*vocab:(j+1)*vocab])
		}
	})
}

// concurrently runs f here and g on another goroutine, and returns when
// both have: the two models of ScoreWithApart, each on its own device. A
// panic in g (a programming error) is raised again here.
func concurrently(f, g func()) {
	var p any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		g()
	}()
	defer func() {
		<-done
		if p != nil {
			panic(p)
		}
	}()
	f()
}

func refErr(ref *Model) error {
	if ref == nil {
		return nil
	}
	return ref.b.Err()
}

// forward runs tokens through the network from a fresh scratch memory and
// returns the hidden states after the output norm.
func (m *Model) forward(tokens []int32) (ml.Tensor, error) {
	m.b.Reset()
	hid := m.net.Forward(m.b, tokens)
	if err := m.b.Err(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return hid, nil
}

// project computes the logits of hidden rows [r0, r0+nb); first tells
// that r0 is the first row whose logits the window computes.
func (m *Model) project(logits, hid ml.Tensor, r0, nb int, first bool) {
	mark := m.b.Mark()
	m.net.Head().Forward(m.b, logits, m.b.Slice(hid, r0, r0+nb), first)
	m.b.Release(mark)
}

// nonFinite names the first weight of m holding a NaN or an infinity, as
// ": tensor NAME row R holds V", or returns "" when none does (the
// activations overflowed). Norms and biases are checked at load; the
// matrices, too large to scan at every load, are scanned only here, when
// logits have gone bad.
func nonFinite(m *Model) string {
	for _, w := range m.mats {
		rows := w.Out * max(w.Experts, 1)
		rb := len(w.Data) / rows
		row := make([]float32, w.In)
		for r := range rows {
			quant.DequantizeRow(w.Type, w.Data[r*rb:(r+1)*rb], row)
			for _, v := range row {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Sprintf(": tensor %s row %d holds %v", w.Name, r, v)
				}
			}
		}
	}
	return ""
}
