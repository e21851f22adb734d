package model

import (
	"fmt"
	"sort"
	"sync"

	"ppl.dev/score/nn"
)

// Network is one architecture's decoder with its weights bound.
type Network interface {
	// Forward runs tokens at positions 0..n-1 from an empty cache and
	// returns the final hidden states after the output norm, (n, Embd),
	// allocated from c. Token ids are already checked against the vocabulary.
	Forward(c *nn.Context, tokens []int32) []float32
	// Output is the projection of hidden states onto the vocabulary.
	Output() *nn.Linear
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
