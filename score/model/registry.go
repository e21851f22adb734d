package model

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"ppl.dev/score/ml"
)

// Network is one architecture's decoder with its weights bound.
type Network interface {
	// Forward runs tokens at positions 0..n-1 from an empty cache and
	// returns the final hidden states after the output norm, (n, Embd),
	// allocated from b. Token ids are already checked against the
	// vocabulary.
	Forward(b ml.Backend, tokens []int32) ml.Tensor
	// Head is the projection of hidden states onto the vocabulary.
	Head() *Head
}

// Checker is a Network that needs operations beyond ml.Backend (an
// extension interface of package ml, such as a recurrent scan): Check
// reports, at load, a backend that lacks them, naming the operations, so a
// device without them refuses the model before scoring anything.
type Checker interface {
	Check(b ml.Backend) error
}

// Limited is a Network without positions past a limit (learned absolute
// positions: gpt2): MaxTokens, when above 0, is the most tokens a window
// may hold, and a longer one is refused.
type Limited interface {
	MaxTokens() int
}

// Head is a model's output head: logits = hidden·Outputᵀ, then
// soft-capped (cap · tanh(z / cap)) when SoftCap > 0.
type Head struct {
	Output  *ml.Matrix // output, or token_embd when tied
	Scale   float64    // multiplies the logits (granite: 1/logit_scale); 0: none
	SoftCap float64    // final_logit_softcapping; 0: none
	// Suppressed, when Hi > 0, are the vocabulary ids [Lo, Hi) whose
	// logits are -FLT_MAX in the first row of logits a window computes
	// (chameleon's image tokens: llama.cpp 0.7.0 overwrites them in the
	// first output row of each ubatch, and no other).
	Suppressed struct{ Lo, Hi int }
}

// Forward computes the logits of hidden rows: h (rows, Embd) -> dst (rows,
// vocabulary); first tells that hid's first row is the window's first
// whose logits are computed.
func (h *Head) Forward(b ml.Backend, dst, hid ml.Tensor, first bool) {
	b.Linear(dst, hid, h.Output)
	if h.Scale != 0 {
		b.Scale(dst, h.Scale)
	}
	if h.SoftCap > 0 {
		b.SoftCap(dst, h.SoftCap)
	}
	if s := h.Suppressed; first && s.Hi > 0 {
		row := b.Slice(dst, 0, 1)
		v := b.Read(row)
		for i := s.Lo; i < s.Hi; i++ {
			v[i] = -math.MaxFloat32
		}
		b.Write(row, v)
	}
}

// Builder binds a file's tensors into a Network, naming each tensor through
// the Loader, which records the first error (missing tensor, wrong shape,
// unsupported type).
type Builder func(l *Loader) Network

var (
	regMu sync.RWMutex
	archs = map[string]Builder{}
)

// Register makes an architecture (the GGUF general.architecture value)
// loadable. Architecture files call it from init.
func Register(arch string, b Builder) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := archs[arch]; dup {
		panic(fmt.Sprintf("model: architecture %q registered twice", arch))
	}
	archs[arch] = b
}

// Architectures lists the registered architectures, sorted.
func Architectures() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []string
	for a := range archs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func builder(arch string) (Builder, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	b, ok := archs[arch]
	return b, ok
}
