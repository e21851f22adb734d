package protocol

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func sliding(n, s int) Protocol { return Protocol{Mode: Sliding, Context: n, Stride: s} }
func disjoint(n int) Protocol   { return Protocol{Mode: Disjoint, Context: n} }
func llama(n int) Protocol      { return Protocol{Mode: LlamaCpp, Context: n} }

func TestWindows(t *testing.T) {
	for _, tc := range []struct {
		n    int
		p    Protocol
		want []Span
	}{
		// sliding, N=4, S=2
		{0, sliding(4, 2), []Span{}},
		{1, sliding(4, 2), []Span{}},
		{2, sliding(4, 2), []Span{{0, 2, 1, false}}},
		{3, sliding(4, 2), []Span{{0, 3, 1, false}}},
		{4, sliding(4, 2), []Span{{0, 4, 1, false}}},
		{5, sliding(4, 2), []Span{{0, 4, 1, false}, {2, 5, 4, false}}},
		{6, sliding(4, 2), []Span{{0, 4, 1, false}, {2, 6, 4, false}}},
		{7, sliding(4, 2), []Span{{0, 4, 1, false}, {2, 6, 4, false}, {4, 7, 6, false}}},
		// sliding, N=4, S=3: one token of history
		{10, sliding(4, 3), []Span{{0, 4, 1, false}, {3, 7, 4, false}, {6, 10, 7, false}}},
		{11, sliding(4, 3), []Span{{0, 4, 1, false}, {3, 7, 4, false}, {6, 10, 7, false}, {9, 11, 10, false}}},
		// sliding, N=5, S=1: one target per later window
		{7, sliding(5, 1), []Span{{0, 5, 1, false}, {1, 6, 5, false}, {2, 7, 6, false}}},
		// sliding, N=2, S=1: the smallest context
		{4, sliding(2, 1), []Span{{0, 2, 1, false}, {1, 3, 2, false}, {2, 4, 3, false}}},
		// disjoint, N=4
		{0, disjoint(4), []Span{}},
		{3, disjoint(4), []Span{}},
		{4, disjoint(4), []Span{{0, 4, 1, false}}},
		{7, disjoint(4), []Span{{0, 4, 1, false}}},
		{8, disjoint(4), []Span{{0, 4, 1, false}, {4, 8, 5, false}}},
		{11, disjoint(4), []Span{{0, 4, 1, false}, {4, 8, 5, false}}},
		{4, disjoint(2), []Span{{0, 2, 1, false}, {2, 4, 3, false}}},
		// llama.cpp, N=4: first = N/2 = 2, targets [kN+3, kN+4)
		{8, llama(4), []Span{{0, 4, 3, true}, {4, 8, 7, true}}},
		{11, llama(4), []Span{{0, 4, 3, true}, {4, 8, 7, true}}},
		{12, llama(4), []Span{{0, 4, 3, true}, {4, 8, 7, true}, {8, 12, 11, true}}},
		// llama.cpp, N=5: first = 2, targets [kN+3, kN+5)
		{10, llama(5), []Span{{0, 5, 3, true}, {5, 10, 8, true}}},
		// llama.cpp, N=3: first = 1, one target per chunk
		{7, llama(3), []Span{{0, 3, 2, true}, {3, 6, 5, true}}},
		// llama.cpp, N=512 as in llama-perplexity -c 512: 256 targets... minus one
		{1024, llama(512), []Span{{0, 512, 257, true}, {512, 1024, 769, true}}},
	} {
		t.Run(fmt.Sprintf("%s/N=%d/S=%d/n=%d", tc.p.Mode, tc.p.Context, tc.p.Stride, tc.n), func(t *testing.T) {
			got, err := Windows(tc.n, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Windows(%d) =\n%v\nwant\n%v", tc.n, got, tc.want)
			}
			count, err := Count(tc.n, tc.p)
			if err != nil || count != len(tc.want) {
				t.Errorf("Count(%d) = %d, %v; want %d", tc.n, count, err, len(tc.want))
			}
		})
	}
}

func TestWindowsErrors(t *testing.T) {
	for _, tc := range []struct {
		n    int
		p    Protocol
		want string
	}{
		{10, sliding(1, 1), "context 1: must be at least 2"},
		{10, sliding(0, 0), "context 0: must be at least 2"},
		{10, sliding(4, 0), "stride 0: must be at least 1"},
		{10, sliding(4, -1), "stride -1: must be at least 1"},
		{10, sliding(4, 4), "stride 4: must be less than the context 4"},
		{10, sliding(4, 5), "stride 5: must be less than the context 4"},
		{10, disjoint(1), "context 1: must be at least 2 for the disjoint protocol"},
		{10, Protocol{Mode: Disjoint, Context: 4, Stride: 2}, "stride 2: the disjoint protocol has no stride"},
		{10, llama(2), "context 2: must be at least 3 for the llama.cpp protocol"},
		{10, Protocol{Mode: LlamaCpp, Context: 4, Stride: 1}, "stride 1: the llama.cpp protocol has no stride"},
		{10, Protocol{Mode: "hf", Context: 4}, `unknown protocol "hf" (want sliding, disjoint or llama.cpp)`},
		{10, Protocol{Context: 4}, `unknown protocol "" (want sliding, disjoint or llama.cpp)`},
		{-1, sliding(4, 2), "stream length -1: want 0 to 2147483647 tokens"},
		{0, llama(4), "stream too short: the llama.cpp protocol needs at least twice the context (2 x 4 tokens), the stream has 0"},
		{7, llama(4), "stream too short: the llama.cpp protocol needs at least twice the context (2 x 4 tokens), the stream has 7"},
		{10, llama(math.MaxInt), fmt.Sprintf("stream too short: the llama.cpp protocol needs at least twice the context (2 x %d tokens), the stream has 10", math.MaxInt)},
	} {
		_, err := Windows(tc.n, tc.p)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Windows(%d, %+v) error = %v, want %q", tc.n, tc.p, err, tc.want)
		}
		if _, cerr := Count(tc.n, tc.p); cerr == nil || cerr.Error() != tc.want {
			t.Errorf("Count(%d, %+v) error = %v, want %q", tc.n, tc.p, cerr, tc.want)
		}
	}
	if _, err := Windows(7, llama(4)); !errors.Is(err, ErrTooShort) {
		t.Errorf("Windows(7, llama(4)) = %v, want ErrTooShort", err)
	}
}

// checkSpans asserts the invariants every protocol keeps; it returns how
// many times each position of the stream is scored.
func checkSpans(n int, p Protocol, spans []Span) error {
	scored := make([]int, n)
	for i, s := range spans {
		if !(0 <= s.Begin && s.Begin < s.ScoreFrom && s.ScoreFrom < s.End && s.End <= n) {
			return fmt.Errorf("span %d %+v: want 0 <= begin < score_from < end <= n=%d", i, s, n)
		}
		if s.Len() > p.Context {
			return fmt.Errorf("span %d %+v reads %d tokens, more than the context %d", i, s, s.Len(), p.Context)
		}
		if s.BOS != (p.Mode == LlamaCpp) {
			return fmt.Errorf("span %d %+v: bos %v for protocol %s", i, s, s.BOS, p.Mode)
		}
		if i > 0 && s.ScoreFrom < spans[i-1].End {
			return fmt.Errorf("span %d %+v scores targets before the end of span %d %+v", i, s, i-1, spans[i-1])
		}
		for j := s.ScoreFrom; j < s.End; j++ {
			scored[j]++
		}
	}
	for j, c := range scored {
		if c > 1 {
			return fmt.Errorf("target %d scored %d times", j, c)
		}
	}
	N := p.Context
	switch p.Mode {
	case Sliding:
		// Every token but the first is scored exactly once.
		for j := 1; j < n; j++ {
			if scored[j] != 1 {
				return fmt.Errorf("target %d scored %d times, want once", j, scored[j])
			}
		}
		for i, s := range spans {
			if i == 0 {
				if s.Begin != 0 || s.ScoreFrom != 1 || s.End != min(N, n) {
					return fmt.Errorf("first span %+v, want [0, %d) from 1", s, min(N, n))
				}
				continue
			}
			// Later spans: N-S tokens of history, at most S targets.
			if s.ScoreFrom-s.Begin != N-p.Stride || s.Targets() > p.Stride {
				return fmt.Errorf("span %d %+v: want %d tokens of history and at most %d targets", i, s, N-p.Stride, p.Stride)
			}
			if s.Targets() < p.Stride && s.End != n {
				return fmt.Errorf("span %d %+v: short span before the end of the stream", i, s)
			}
		}
	case Disjoint, LlamaCpp:
		first := 1
		if p.Mode == LlamaCpp {
			first = N/2 + 1
		}
		if len(spans) != n/N {
			return fmt.Errorf("%d spans, want n/N = %d", len(spans), n/N)
		}
		for k, s := range spans {
			if s.Begin != k*N || s.End != (k+1)*N || s.ScoreFrom != k*N+first {
				return fmt.Errorf("span %d %+v, want [%d, %d) from %d", k, s, k*N, (k+1)*N, k*N+first)
			}
		}
	}
	return nil
}

// TestProperties checks the invariants over many (n, N, S).
func TestProperties(t *testing.T) {
	var ps []Protocol
	for N := 2; N <= 12; N++ {
		for S := 1; S < N; S++ {
			ps = append(ps, sliding(N, S))
		}
		ps = append(ps, disjoint(N))
		if N >= 3 {
			ps = append(ps, llama(N))
		}
	}
	ps = append(ps, sliding(4096, 2048), sliding(512, 1), sliding(512, 511), disjoint(2048), llama(512))
	for _, p := range ps {
		for n := 0; n <= 5*p.Context+7 && n <= 3000; n++ {
			spans, err := Windows(n, p)
			if p.Mode == LlamaCpp && n < 2*p.Context {
				if !errors.Is(err, ErrTooShort) {
					t.Fatalf("Windows(%d, %+v) = %v, want ErrTooShort", n, p, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Windows(%d, %+v): %v", n, p, err)
			}
			if err := checkSpans(n, p, spans); err != nil {
				t.Fatalf("Windows(%d, %+v): %v", n, p, err)
			}
			if c, _ := Count(n, p); c != len(spans) {
				t.Fatalf("Count(%d, %+v) = %d, want %d", n, p, c, len(spans))
			}
		}
	}
}

// TestShardsPartition deals the windows of several streams to m shards and
// checks that every window goes to exactly one shard, round-robin.
func TestShardsPartition(t *testing.T) {
	p := sliding(4, 2)
	var total int
	for _, n := range []int{0, 1, 2, 3, 4, 5, 43, 17} {
		c, err := Count(n, p)
		if err != nil {
			t.Fatal(err)
		}
		total += c
	}
	for m := 1; m <= 7; m++ {
		owners := make([]int, total)
		for k := 1; k <= m; k++ {
			sh, err := ParseShard(fmt.Sprintf("%d/%d", k, m))
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for g := range total {
				if sh.Owns(g) {
					owners[g]++
					got++
				}
			}
			// Round-robin: shard sizes differ by at most one, earlier shards first.
			if want := total/m + b2i(k <= total%m); got != want {
				t.Errorf("shard %v owns %d windows of %d, want %d", sh, got, total, want)
			}
		}
		for g, c := range owners {
			if c != 1 {
				t.Fatalf("m=%d: window %d owned by %d shards", m, g, c)
			}
		}
	}
	var zero Shard
	for g := range 10 {
		if !zero.Owns(g) {
			t.Errorf("zero shard does not own window %d", g)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		err  string
	}{
		{"", Shard{}, ""},
		{"1/1", Shard{1, 1}, ""},
		{"2/3", Shard{2, 3}, ""},
		{"3/3", Shard{3, 3}, ""},
		{"0/3", Shard{}, `shard "0/3": want 1 <= k <= n`},
		{"4/3", Shard{}, `shard "4/3": want 1 <= k <= n`},
		{"1/0", Shard{}, `shard "1/0": want 1 <= k <= n`},
		{"-1/2", Shard{}, `shard "-1/2": want 1 <= k <= n`},
		{"1/4194304", Shard{1, 4194304}, ""},
		{"1/4194305", Shard{}, `shard "1/4194305": at most 4194304 shards`},
		{"1/4444444441", Shard{}, `shard "1/4444444441": at most 4194304 shards`},
		{"3", Shard{}, `shard "3": want k/n, e.g. 1/4`},
		{"a/b", Shard{}, `shard "a/b": want k/n with integers k and n, e.g. 1/4`},
		{"1/2/3", Shard{}, `shard "1/2/3": want k/n with integers k and n, e.g. 1/4`},
		{" 1/2", Shard{}, `shard " 1/2": want k/n with integers k and n, e.g. 1/4`},
	} {
		got, err := ParseShard(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseShard(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("ParseShard(%q).String() = %q", tc.in, got.String())
		}
	}
}

// FuzzWindows throws arbitrary (n, N, S, mode) at Windows: it must either
// return a clean error or spans that keep every invariant, never panic.
func FuzzWindows(f *testing.F) {
	f.Add(43, 4, 2, uint8(0))
	f.Add(43, 4, 0, uint8(1))
	f.Add(43, 4, 0, uint8(2))
	f.Add(7, 4, 0, uint8(2))
	f.Add(0, 2, 1, uint8(0))
	f.Add(100, 4, 4, uint8(0))
	f.Add(100, 1, 0, uint8(1))
	f.Add(-5, 4, 2, uint8(0))
	f.Add(1<<40, 4, 2, uint8(0))
	f.Add(100, math.MaxInt, math.MaxInt-1, uint8(0))
	f.Add(100, 3, 0, uint8(3))
	f.Fuzz(func(t *testing.T, n, N, S int, mode uint8) {
		p := Protocol{Mode: []string{Sliding, Disjoint, LlamaCpp, "bogus"}[mode%4], Context: N, Stride: S}
		count, err := Count(n, p)
		if err != nil {
			if _, werr := Windows(n, p); werr == nil || werr.Error() != err.Error() {
				t.Fatalf("Count error %v but Windows error %v", err, werr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			verr := Validate(p)
			switch {
			case verr != nil:
				if verr.Error() != err.Error() {
					t.Fatalf("error %v, Validate says %v", err, verr)
				}
			case n < 0 || n > MaxTokens:
			case p.Mode == LlamaCpp && errors.Is(err, ErrTooShort):
			default:
				t.Fatalf("unexpected error for a valid protocol %+v, n=%d: %v", p, n, err)
			}
			return
		}
		if count > 1<<16 {
			t.Skip("too many windows to build in a fuzz iteration")
		}
		spans, err := Windows(n, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) != count {
			t.Fatalf("Count = %d, Windows gave %d", count, len(spans))
		}
		if n > 1<<20 {
			return // checkSpans allocates n ints
		}
		if err := checkSpans(n, p, spans); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"", "1/1", "2/3", "0/1", "a/b", "1/", "/1", "99999999999999999999/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if s != "" && (sh.K < 1 || sh.K > sh.N) {
			t.Fatalf("ParseShard(%q) = %+v", s, sh)
		}
		back, err := ParseShard(sh.String())
		if err != nil || back != sh {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

func TestCost(t *testing.T) {
	for _, tc := range []struct {
		s    Span
		attn int
		want int64
	}{
		{Span{Begin: 0, End: 4, ScoreFrom: 1}, 4, 4 + 4},
		{Span{Begin: 10, End: 20, ScoreFrom: 15}, 1000, 10},
		{Span{Begin: 0, End: 65536, ScoreFrom: 1}, DefaultAttention, 65536 + 131072},
		{Span{Begin: 0, End: MaxTokens, ScoreFrom: 1}, 1, MaxTokens + MaxTokens*MaxTokens}, // no overflow
	} {
		if got := Cost(tc.s, tc.attn); got != tc.want {
			t.Errorf("Cost(%v, %d) = %d, want %d", tc.s, tc.attn, got, tc.want)
		}
	}
}

func TestDeal(t *testing.T) {
	for _, tc := range []struct {
		costs []int64
		n     int
		owner []int32
		load  []int64
	}{
		{nil, 3, []int32{}, []int64{0, 0, 0}},
		{[]int64{5}, 1, []int32{0}, []int64{5}},
		// Largest first, each to the least loaded; ties to the lowest shard
		// and in input order.
		{[]int64{1, 5, 3, 3, 2}, 2, []int32{1, 0, 1, 1, 0}, []int64{7, 7}},
		{[]int64{4, 4, 4, 4}, 3, []int32{0, 1, 2, 0}, []int64{8, 4, 4}},
		{[]int64{7, 1, 1, 1, 1, 1, 1, 1}, 2, []int32{0, 1, 1, 1, 1, 1, 1, 1}, []int64{7, 7}},
	} {
		owner, load := Deal(tc.costs, tc.n)
		if !reflect.DeepEqual(owner, tc.owner) || !reflect.DeepEqual(load, tc.load) {
			t.Errorf("Deal(%v, %d) = %v, %v; want %v, %v", tc.costs, tc.n, owner, load, tc.owner, tc.load)
		}
	}
}

// TestDealBalance is the acceptance check for cost-balanced shards: on
// corpora whose streams differ in length by orders of magnitude, the
// largest shard's work (tokens read plus attention) is within 10% of the
// mean, at short and long contexts, where dealing by count is not. It logs
// the figures of both.
func TestDealBalance(t *testing.T) {
	// mixed: lengths from 40 tokens to 1.2M, a few long books among many
	// short articles, in no particular order. overContext: articles just
	// over the context, two windows each (one full, one short), which
	// round-robin over two shards deals full to one and short to the other.
	var mixed, overContext []int
	for i := range 60 {
		mixed = append(mixed, 40+(i*7919)%3000)
	}
	mixed = append(mixed, 1_200_000, 35_000, 400_000, 9_000, 150_000, 70_000, 640_000, 20_000)
	for range 200 {
		overContext = append(overContext, 4096+100)
	}
	for _, tc := range []struct {
		corpus  string
		lengths []int
		p       Protocol
		shards  int
	}{
		{"mixed", mixed, sliding(4096, 2048), 3},
		{"mixed", mixed, sliding(4096, 2048), 16},
		{"mixed", mixed, sliding(32768, 16384), 8},
		{"mixed", mixed, sliding(65536, 32768), 4},
		{"mixed", mixed, disjoint(2048), 12},
		{"mixed", mixed, sliding(512, 256), 64},
		{"over-context", overContext, sliding(4096, 2048), 2},
		{"over-context", overContext, sliding(4096, 2048), 3},
	} {
		lengths := tc.lengths
		var costs []int64
		for _, n := range lengths {
			spans, err := Windows(n, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range spans {
				costs = append(costs, Cost(s, DefaultAttention))
			}
		}
		_, load := Deal(costs, tc.shards)
		rr := make([]int64, tc.shards) // round-robin by count, for comparison
		for g, c := range costs {
			rr[g%tc.shards] += c
		}
		over := func(load []int64) float64 {
			var sum, top int64
			for _, l := range load {
				sum += l
				top = max(top, l)
			}
			return float64(top)/(float64(sum)/float64(len(load))) - 1
		}
		name := fmt.Sprintf("%s %s/N=%d/S=%d/%d shards", tc.corpus, tc.p.Mode, tc.p.Context, tc.p.Stride, tc.shards)
		t.Logf("%s: %d windows; largest shard over the mean: by cost %.2f%%, by count %.2f%%", name, len(costs), 100*over(load), 100*over(rr))
		if o := over(load); o > 0.10 {
			t.Errorf("%s: the largest shard is %.1f%% over the mean (loads %v), want at most 10%%", name, 100*o, load)
		}
	}
}

// TestDealProperties: on random costs, every item goes to one shard, the
// loads add up, and no shard exceeds another by more than the largest
// item (greedy to the least loaded keeps that at every step).
func TestDealProperties(t *testing.T) {
	seed := uint64(1)
	next := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 33 }
	for trial := range 300 {
		n := 1 + int(next()%17)
		costs := make([]int64, next()%200)
		var top int64
		for i := range costs {
			costs[i] = int64(next() % (1 + uint64(trial)*1000))
			top = max(top, costs[i])
		}
		owner, load := Deal(costs, n)
		sum := make([]int64, n)
		for i, k := range owner {
			if k < 0 || int(k) >= n {
				t.Fatalf("item %d to shard %d of %d", i, k, n)
			}
			sum[k] += costs[i]
		}
		if !reflect.DeepEqual(sum, load) {
			t.Fatalf("loads %v, items add up to %v", load, sum)
		}
		if hi, lo := slices.Max(load), slices.Min(load); hi-lo > top {
			t.Fatalf("%d shards, costs %v: loads %v differ by more than the largest item %d", n, costs, load, top)
		}
	}
}
