// Package protocol decides which windows of a token stream a model reads
// and which of their tokens it scores.
//
// Perplexity depends on how much history the model sees before each
// target, so the windowing protocol is part of the measurement: the same
// model and text give different numbers under different protocols, and
// two results can only be compared when their protocols agree. This
// package is the single definition of each protocol. ppl-window uses it to
// emit window records; ppl-aggregate uses it to check that the scores it
// reads cover exactly the windows the protocol asks for.
//
// A stream of n tokens x[0..n) is cut into spans. Span{Begin, End,
// ScoreFrom} asks the model to read x[Begin..End) from an empty state and
// to score the targets x[i] for i in [ScoreFrom, End), each conditioned on
// x[Begin..i). Streams never share history: every span lies inside one
// stream. Three protocols are defined, for a context of N tokens:
//
//   - sliding (the default; stride S, 1 <= S < N): the first span is
//     [0, min(N, n)) scored from 1; each later span scores the next S
//     targets [s, min(s+S, n)), s = N, N+S, N+2S, ..., and reads the N-S
//     tokens before them as history: Begin = s-(N-S). Every token after
//     the first is scored exactly once, and no target sees more than N-1
//     tokens of history or (after the first span) fewer than N-S.
//   - disjoint: back-to-back spans [kN, (k+1)N), each scored from its
//     second token, kN+1; a partial span at the end is dropped. This is
//     the protocol of the GPTQ paper's WikiText-2 numbers.
//   - llama.cpp: llama-perplexity's protocol. Chunk k is [kN, (k+1)N) for
//     k < n/N, its first token replaced by BOS (Span.BOS), and only the
//     second half is scored: targets [kN + N/2 + 1, (k+1)N). llama-perplexity
//     refuses inputs of fewer than 2N tokens, and so does Windows; N must
//     be at least 3 so that every chunk has a target.
//
// Windows returns the spans of one stream. Sharding (Shard) splits the
// global sequence of windows, across all streams in order, between
// independent scorers: round-robin by count (Shard.Owns), or by cost
// (Deal), so that every shard gets the same work when windows differ in
// length: a forward pass over L tokens costs about L for the weights and
// L² for attention (Cost).
package protocol

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"ppl.dev/pipe"
)

// Protocol modes, as written in the window header's protocol.mode.
const (
	Sliding  = "sliding"
	Disjoint = "disjoint"
	LlamaCpp = "llama.cpp"
)

// MaxTokens bounds the length of one stream, so that every position fits
// in an int32 and no window arithmetic overflows.
const MaxTokens = math.MaxInt32

// Protocol is the window header's protocol: Mode, Context (N) and, for
// sliding only, Stride (S). Windows ignores Shard; see ParseShard.
type Protocol = pipe.Protocol

// Span is one window of a stream: read x[Begin..End) from an empty state,
// score the targets x[i] for i in [ScoreFrom, End). BOS asks the scorer
// to replace x[Begin] by the model's BOS token when llama-perplexity would
// (its vocabulary's add_bos: tokenizer.Tokenizer's ChunkBOS). Always 0 <=
// Begin < ScoreFrom < End <= n.
type Span struct {
	Begin, End, ScoreFrom int
	BOS                   bool
}

// Targets returns the number of tokens the span scores.
func (s Span) Targets() int { return s.End - s.ScoreFrom }

// Len returns the number of tokens the span reads.
func (s Span) Len() int { return s.End - s.Begin }

// ErrTooShort is returned (wrapped) by Windows for a stream the protocol
// cannot window at all (llama.cpp with fewer than 2N tokens).
var ErrTooShort = errors.New("stream too short")

// Validate checks a protocol's mode, context and stride.
func Validate(p Protocol) error {
	switch p.Mode {
	case Sliding:
		if p.Context < 2 {
			return fmt.Errorf("context %d: must be at least 2", p.Context)
		}
		if p.Stride < 1 {
			return fmt.Errorf("stride %d: must be at least 1", p.Stride)
		}
		if p.Stride >= p.Context {
			return fmt.Errorf("stride %d: must be less than the context %d", p.Stride, p.Context)
		}
	case Disjoint, LlamaCpp:
		least := 2
		if p.Mode == LlamaCpp {
			least = 3 // N/2+1 < N: every chunk scores at least one target
		}
		if p.Context < least {
			return fmt.Errorf("context %d: must be at least %d for the %s protocol", p.Context, least, p.Mode)
		}
		if p.Stride != 0 {
			return fmt.Errorf("stride %d: the %s protocol has no stride", p.Stride, p.Mode)
		}
	default:
		return fmt.Errorf("unknown protocol %q (want %s, %s or %s)", p.Mode, Sliding, Disjoint, LlamaCpp)
	}
	return nil
}

// Count returns the number of windows of a stream of n tokens, without
// building them.
func Count(n int, p Protocol) (int, error) {
	c, err := count(n, p)
	if p.MaxWindows > 0 {
		c = min(c, p.MaxWindows) // only the first MaxWindows (--max-windows)
	}
	return c, err
}

func count(n int, p Protocol) (int, error) {
	if err := check(n, p); err != nil {
		return 0, err
	}
	N := p.Context
	switch p.Mode {
	case Sliding:
		if n < 2 {
			return 0, nil
		}
		if n <= N {
			return 1, nil
		}
		S := p.Stride
		return 1 + (n-N+S-1)/S, nil
	default: // Disjoint, LlamaCpp
		return n / N, nil
	}
}

// Windows returns the windows of a stream of n tokens under p, in order.
// Index i of the result is the window's index in its stream.
func Windows(n int, p Protocol) ([]Span, error) {
	count, err := Count(n, p)
	if err != nil {
		return nil, err
	}
	spans := make([]Span, 0, count)
	N := p.Context
	switch p.Mode {
	case Sliding:
		if n < 2 {
			return spans, nil
		}
		spans = append(spans, Span{Begin: 0, End: min(N, n), ScoreFrom: 1})
		S, history := p.Stride, N-p.Stride
		for s := N; s < n; s += S {
			spans = append(spans, Span{Begin: max(0, s-history), End: s + min(S, n-s), ScoreFrom: s})
		}
	case Disjoint:
		for k := 0; k < n/N; k++ {
			spans = append(spans, Span{Begin: k * N, End: (k + 1) * N, ScoreFrom: k*N + 1})
		}
	case LlamaCpp:
		for k := 0; k < n/N; k++ {
			spans = append(spans, Span{Begin: k * N, End: (k + 1) * N, ScoreFrom: k*N + N/2 + 1, BOS: true})
		}
	}
	return spans[:count], nil
}

func check(n int, p Protocol) error {
	if err := Validate(p); err != nil {
		return err
	}
	if n < 0 || n > MaxTokens {
		return fmt.Errorf("stream length %d: want 0 to %d tokens", n, MaxTokens)
	}
	// n >= 2N, written so that 2N cannot overflow.
	if p.Mode == LlamaCpp && n/p.Context < 2 {
		return fmt.Errorf("%w: the llama.cpp protocol needs at least twice the context (2 x %d tokens), the stream has %d",
			ErrTooShort, p.Context, n)
	}
	return nil
}

// Shard selects every N-th window of the global sequence of windows (all
// streams' windows, streams in the order they complete in the input),
// starting with the K-th: windows are dealt round-robin to N shards. The
// zero Shard is the whole sequence.
type Shard struct {
	K, N int // 1 <= K <= N
}

// MaxShards is the most shards a run may be split into. A shard's header
// lists every shard's windows and cost (pipe.Split), so a count past any
// cluster's job array (Slurm's largest is 4,000,001) would only exhaust
// memory; it is refused by name instead.
const MaxShards = 1 << 22

// ParseShard parses "k/n" (1 <= k <= n <= MaxShards); "" is the zero
// Shard.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	ks, ns, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want k/n, e.g. 1/4", s)
	}
	k, errK := strconv.Atoi(ks)
	n, errN := strconv.Atoi(ns)
	if errK != nil || errN != nil {
		return Shard{}, fmt.Errorf("shard %q: want k/n with integers k and n, e.g. 1/4", s)
	}
	if n < 1 || k < 1 || k > n {
		return Shard{}, fmt.Errorf("shard %q: want 1 <= k <= n", s)
	}
	if n > MaxShards {
		return Shard{}, fmt.Errorf("shard %q: at most %d shards", s, MaxShards)
	}
	return Shard{K: k, N: n}, nil
}

// String returns "k/n", or "" for the zero Shard.
func (s Shard) String() string {
	if s.N == 0 {
		return ""
	}
	return strconv.Itoa(s.K) + "/" + strconv.Itoa(s.N)
}

// Owns reports whether the window with global ordinal g (0-based, counted
// over all streams' windows in order) belongs to the shard.
func (s Shard) Owns(g int) bool {
	if s.N == 0 {
		return true
	}
	return g%s.N == s.K-1
}

// DefaultAttention is the default attention length of Cost: the window
// length at which attention costs as much as the rest of the forward pass.
// In a transformer layer of width d, a window of L tokens costs about
// 12Ld² multiply-adds in the weights (4d² for attention's projections, 8d²
// for the MLP, a token) and L²d in attention itself (QKᵀ and AV, L/2 keys
// a query on average), so the two meet at L = 12d: 32768 is a model about
// 2,700 wide; a 4096-wide model's is 49152.
const DefaultAttention = 32768

// Cost is the work of scoring span s, in token units: the tokens it reads,
// plus the quadratic term of attention, L²/attention (attention >= 1).
func Cost(s Span, attention int) int64 {
	L := int64(s.Len())
	return L + L*L/int64(attention)
}

// Deal assigns items of the given costs to n shards so that the shards'
// total costs are as even as it can: the items, largest first (ties in
// input order), each go to the shard with the least cost so far (ties to
// the lowest shard). This is longest-processing-time-first scheduling: the
// largest shard exceeds the mean by less than the cost of one item, and in
// practice by much less. owner[i] is item i's shard, 0 to n-1; load[k] is
// shard k's total. It is deterministic, so every shard of a run computes
// the same deal from the same input.
func Deal(costs []int64, n int) (owner []int32, load []int64) {
	if n < 1 {
		panic(fmt.Sprintf("protocol.Deal: %d shards", n))
	}
	order := make([]int, len(costs))
	for i := range order {
		order[i] = i
	}
	// Stable: equal costs keep their input order.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(costs[b], costs[a]) })
	owner = make([]int32, len(costs))
	load = make([]int64, n)
	h := &shardHeap{load: load, ids: make([]int, n)}
	for k := range h.ids {
		h.ids[k] = k
	}
	heap.Init(h)
	for _, i := range order {
		k := h.ids[0]
		owner[i] = int32(k)
		load[k] += costs[i]
		heap.Fix(h, 0)
	}
	return owner, load
}

// shardHeap orders shard numbers by load, then number.
type shardHeap struct {
	load []int64
	ids  []int
}

func (h *shardHeap) Len() int { return len(h.ids) }
func (h *shardHeap) Less(i, j int) bool {
	a, b := h.ids[i], h.ids[j]
	return h.load[a] < h.load[b] || h.load[a] == h.load[b] && a < b
}
func (h *shardHeap) Swap(i, j int) { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *shardHeap) Push(any)      { panic("not used") }
func (h *shardHeap) Pop() any      { panic("not used") }
