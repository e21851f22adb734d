package model

import (
	"errors"
	"fmt"
	"math"

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
	return m.score(tokens, scoreFrom, nil)
}

// ScoreWith is Score plus, for each target, the KL divergence of the model's
// next-token distribution from ref's, ref's log-probability of the target,
// and whether the two models' top tokens agree. Both models must share the
// vocabulary. ref is locked after m: do not score two models against each
// other in both directions at once.
func (m *Model) ScoreWith(tokens []int32, scoreFrom int, ref *Model) (*Result, error) {
	switch {
	case ref == nil:
		return nil, errors.New("model: ScoreWith: no reference model")
	case ref == m:
		return nil, errors.New("model: ScoreWith: the reference is the model itself")
	case ref.Vocab() != m.Vocab():
		return nil, fmt.Errorf("model: ScoreWith: reference vocabulary has %d tokens, model %d", ref.Vocab(), m.Vocab())
	}
	return m.score(tokens, scoreFrom, ref)
}

func (m *Model) checkTokens(tokens []int32, scoreFrom int) error {
	if scoreFrom < 1 || scoreFrom > len(tokens) {
		return fmt.Errorf("model: score from %d with %d tokens (want 1 <= from <= tokens)", scoreFrom, len(tokens))
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.HP.Vocab {
			return fmt.Errorf("model: token %d at position %d is outside the vocabulary [0, %d)", t, i, m.HP.Vocab)
		}
	}
	return nil
}

func (m *Model) score(tokens []int32, scoreFrom int, ref *Model) (*Result, error) {
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
	m.ctx.Reset()
	hid := m.net.Forward(m.ctx, tokens)
	var rhid []float32
	if ref != nil {
		ref.mu.Lock()
		defer ref.mu.Unlock()
		ref.ctx.Reset()
		rhid = ref.net.Forward(ref.ctx, tokens)
	}

	vocab := m.HP.Vocab
	rb := min(rowBlock(vocab), n-scoreFrom)
	logits := m.ctx.Alloc(rb * vocab)
	var rlogits []float32
	if ref != nil {
		rlogits = ref.ctx.Alloc(rb * vocab)
	}
	errs := make([]error, rb)
	// Hidden row p predicts token p+1: rows [scoreFrom-1, n-1).
	for r0 := scoreFrom - 1; r0 < n-1; r0 += rb {
		b := min(rb, n-1-r0)
		project(m, logits, hid, r0, b)
		if ref != nil {
			project(ref, rlogits, rhid, r0, b)
		}
		m.ctx.Parallel(b, func(_, lo, hi int) {
			for j := lo; j < hi; j++ {
				p := r0 + j + 1 // the target
				i := p - scoreFrom
				row := logits[j*vocab : (j+1)*vocab]
				lse, arg, err := logSumExp(row, p)
				if errs[j] = err; err != nil {
					continue
				}
				res.Logprobs[i] = float64(row[tokens[p]]) - lse
				res.Argmax[i] = int32(arg)
				if ref == nil {
					continue
				}
				rrow := rlogits[j*vocab : (j+1)*vocab]
				rlse, rarg, err := logSumExp(rrow, p)
				if err != nil {
					errs[j] = fmt.Errorf("reference %w", err)
					continue
				}
				res.RefLogprobs[i] = float64(rrow[tokens[p]]) - rlse
				res.KLD[i] = kld(rrow, rlse, row, lse)
				res.Top1Agree[i] = arg == rarg
			}
		})
		if err := firstErr(errs[:b]); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	return res, nil
}

// project computes the logits of hidden rows [r0, r0+b) of model m.
func project(m *Model, logits, hid []float32, r0, b int) {
	e := m.HP.Embd
	mark := m.ctx.Mark()
	m.net.Output().Forward(m.ctx, logits, hid[r0*e:(r0+b)*e], b)
	m.ctx.Release(mark)
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// logSumExp returns log Σ exp(row) and the index of the largest logit (the
// first, on ties), or an error naming target p if a logit is NaN or
// infinite. The maximum m is exact; each term e^(v-m) is a float32
// exponential within 2 ulp, summed in float64 (nn.ExpSum), and the log is
// float64: the result is within about 3e-7 relative of the float64
// log-sum-exp, far below the float32 rounding of the logits themselves.
func logSumExp(row []float32, p int) (lse float64, arg int, err error) {
	mx, arg, ok := nn.MaxArg(row)
	if !ok {
		for i, v := range row {
			if v-v != 0 { // NaN or ±Inf
				return 0, 0, fmt.Errorf("logits for target %d contain %v (token %d)", p, v, i)
			}
		}
	}
	return float64(mx) + math.Log(nn.ExpSum(row, mx)), arg, nil
}

// kld returns KL(p || q) = Σ p_i (log p_i - log q_i) for the distributions
// softmax(pz) and softmax(qz), given their log-sum-exps.
func kld(pz []float32, plse float64, qz []float32, qlse float64) float64 {
	qz = qz[:len(pz)]
	var s float64
	for i, v := range pz {
		lp := float64(v) - plse
		s += math.Exp(lp) * (lp - (float64(qz[i]) - qlse))
	}
	return s
}
