// Package cli implements ppl-window, the second stage of the ppl pipeline:
// it cuts each tokenized stream into the windows a model will score.
//
//	ppl-tokenize ... | ppl-window [flags] [FILE] | ppl-score ... | ppl-aggregate
//
// Perplexity depends on how much history the model has seen before each
// token, so the windowing protocol is part of the measurement. ppl-window
// makes that choice once, explicitly, and records it in its header; the
// scorer then only follows instructions, and the aggregator checks that
// every window the protocol asks for was scored. The protocols themselves
// are defined in package ppl.dev/window/protocol.
//
// # Input and output
//
// ppl-window reads the output of ppl-tokenize from FILE, or from standard
// input when FILE is absent or "-"; a FILE ending in .zst is
// zstd-compressed. The input must be a complete tokenize stage: a tokenize
// header, stream and tokens records, and the tokenize end record. Input
// that already has a window (or score) stage is refused.
//
// It writes to standard output every input record unchanged, its own
// header after the upstream header, a window record for each window, and
// its end record last. A stream's windows follow its last tokens record,
// so ppl-window streams: a scorer downstream can start on the first
// stream while later ones are still being tokenized.
//
// # Example
//
// A stream of 11 tokens, windowed with a context of 4 and a stride of 2:
//
//	$ ppl-window --context 4 --stride 2 tok.ndjson
//	{"type":"header","v":1,"stage":"tokenize","tool":"ppl-tokenize",...}
//	{"type":"header","v":1,"stage":"window","tool":"ppl-window","version":"0.1.0","flags":{"context":4,"protocol":"sliding","stride":2},"protocol":{"mode":"sliding","context":4,"stride":2}}
//	{"type":"stream","id":"en-1","domain":"en",...,"n_tokens":11}
//	{"type":"tokens","stream":"en-1","offset":0,"ids":[1,415,...]}
//	{"type":"window","stream":"en-1","index":0,"begin":0,"end":4,"score_from":1}
//	{"type":"window","stream":"en-1","index":1,"begin":2,"end":6,"score_from":4}
//	{"type":"window","stream":"en-1","index":2,"begin":4,"end":8,"score_from":6}
//	{"type":"window","stream":"en-1","index":3,"begin":6,"end":10,"score_from":8}
//	{"type":"window","stream":"en-1","index":4,"begin":8,"end":11,"score_from":10}
//	{"type":"end","stage":"tokenize","records":3}
//	{"type":"end","stage":"window","records":6}
//
// The first window reads tokens 0-3 and scores 1-3 (token 0 has no
// history); each later window scores the next 2 tokens after 2 tokens of
// history. Every token but the first is scored exactly once.
//
// # Flags
//
// --protocol MODE chooses the protocol; --context N is the window length
// N (default 4096):
//
//   - sliding (default): the first window is [0, N) scored from 1; each
//     later one scores the next S targets [s, s+S) reading N-S tokens of
//     history, with --stride S (default N/2, so 2048 for the default
//     context; 1 <= S < N). N must be at least 2.
//   - disjoint (or --disjoint): back-to-back windows [kN, (k+1)N), each
//     scored from its second token; a partial window at the end is
//     dropped. This is the GPTQ/WikiText-2 protocol. --stride is an error.
//   - llama.cpp: llama-perplexity's protocol. Chunks [kN, (k+1)N), the
//     first token of each replaced by BOS ("bos":true), scoring only the
//     targets [kN + N/2 + 1, (k+1)N). A stream of fewer than 2N tokens is
//     an error, as in llama-perplexity; N must be at least 3. --stride is
//     an error.
//
// --shard K/N emits only the windows of shard K of N (1 <= K <= N). Stream
// and tokens records are still all passed through, and each window keeps
// its index in its stream, so N ppl-score processes (on N machines: see
// ppl-slurm and docs/scale-out.md) can share a corpus and ppl-aggregate
// can merge their outputs. --split chooses how the windows are dealt:
//
//   - cost (the default): by work, so that the shards take equally long
//     when windows differ in length (short streams, a stream's last
//     window, long contexts). A window of L tokens costs L + L²/A, the
//     forward pass's weights plus attention's quadratic term, with A from
//     --split-attention A (default 32768; about 12 times the model's width,
//     where attention costs as much as the rest). The windows, largest
//     first, each go to the least loaded shard (package protocol, Deal).
//     This needs every stream's length before the first window, so
//     ppl-window reads its input twice (from standard input, it keeps a
//     temporary copy) and no longer streams. The header records the split:
//     protocol.split holds the attention length and every shard's window
//     count and cost.
//   - count: round-robin over the windows of all streams, in the order
//     the streams complete in the input, the first to shard 1. This
//     streams, as ppl-window does without --shard.
//
// The header records the shard and the split.
//
// --max-windows N keeps only the first N windows of each stream, as
// llama-perplexity's --chunks N does for its one text: a quick estimate.
// The header records it (protocol.max_windows) and ppl-aggregate expects
// exactly those windows.
//
// -o FILE (--output) writes to FILE instead of standard output, atomically
// (zstd-compressed when FILE ends in .zst), as every ppl tool's -o does.
//
// --log-level debug|info|warn|error (default info): a stream that gets no
// window (shorter than the context) is warned of; debug adds each
// stream's window count.
//
// --version prints the version; --help lists the flags.
//
// # Exit status
//
// 0 on success; 2 for a usage error (an unknown flag or a bad flag value,
// --stride not below --context, a malformed --shard), with a one-line
// message; 1 when the input is bad or cannot be read or written, with a
// one-line message that names the input and line:
//
//	ppl-window: <stdin>:12: tokens record: field "ids": missing
package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"

	"ppl.dev/command"
	"ppl.dev/pipe"
	"ppl.dev/progress"
	"ppl.dev/window/protocol"
)

// Version is ppl-window's version, written in its header.
const Version = "0.1.0"

const (
	tool           = "ppl-window"
	defaultContext = 4096
)

// flags are ppl-window's command line; --help prints them.
type flags struct {
	Input    string           `arg:"" optional:"" name:"file" default:"-" help:"Tokenize output to read (.zst: zstd-compressed); - or none for standard input."`
	Protocol *string          `placeholder:"MODE" help:"Windowing protocol: sliding (default), disjoint or llama.cpp."`
	Disjoint bool             `help:"Shorthand for --protocol disjoint: back-to-back windows, each scored from its second token."`
	Context  int              `default:"4096" placeholder:"N" help:"Window length N in tokens, at least 2 (3 for llama.cpp); default ${default}."`
	Stride   *int             `placeholder:"S" help:"Sliding protocol only: targets scored per window after the first, 1 <= S < N (default N/2)."`
	Shard    string           `placeholder:"K/N" help:"Emit only shard K of N (1 <= K <= N <= 4194304) of the windows."`
	MaxWin   int              `name:"max-windows" placeholder:"N" help:"Only the first N windows of each stream (llama-perplexity's --chunks); default all."`
	Split    *string          `placeholder:"BY" help:"With --shard, deal the windows by cost (default: equal work, tokens + tokens²/A) or by count (round-robin across all streams)."`
	Attn     *int             `name:"split-attention" placeholder:"A" help:"With --split cost, the window length at which attention costs as much as the rest of the model (about 12x its width; default 32768)."`
	Output   string           `short:"o" placeholder:"FILE" help:"Write to FILE instead of standard output (atomically; .zst compresses)."`
	LogLevel string           `default:"info" enum:"debug,info,warn,error" help:"Least severe message to show on stderr: debug, info, warn, error."`
	Version  kong.VersionFlag `help:"Print the version and exit."`
}

const description = `Cut tokenized streams into the windows a model scores: stage 2 of
ppl-tokenize | ppl-window | ppl-score | ppl-aggregate. Reads ppl-tokenize output
(FILE, or standard input), writes it through with a window header, window
records after each stream's tokens, and a window end record.

Protocols, for a context of N tokens:
  sliding    first window [0,N) scored from 1, then each window scores the next
             S targets after N-S tokens of history (--stride S, default N/2)
  disjoint   windows [kN,(k+1)N) scored from kN+1; a partial last one dropped
  llama.cpp  llama-perplexity: chunks [kN,(k+1)N) with BOS, scoring targets
             from kN+N/2+1; every stream needs at least 2N tokens

Example: ppl-tokenize ... | ppl-window --context 4096 --stride 2048 > win.ndjson`

// Main runs ppl-window with os.Args and returns its exit status.
func Main() int {
	return command.Exit(tool, run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr)
}

// config is a validated command line.
type config struct {
	input  string
	output string // -o FILE; "" for standard output
	level  int    // --log-level
	proto  protocol.Protocol
	shard  protocol.Shard
	split  string // with a shard: splitCost or splitCount
	attn   int    // with splitCost
	// owner, with splitCost, is the shard (0-based) of each window, by
	// global ordinal; set by plan.
	owner []int32
}

const (
	splitCost  = "cost"
	splitCount = "count"
)

// owns reports whether the window of global ordinal g is in the shard.
func (c config) owns(g int) bool {
	if c.owner != nil {
		return int(c.owner[g]) == c.shard.K-1
	}
	return c.shard.Owns(g)
}

// parse reads the command line; --help and --version print to stdout and
// return command.ErrExited.
func parse(args []string, stdout, stderr io.Writer) (config, error) {
	var f flags
	if err := command.Parse(tool, Version, description, &f, args, stdout, stderr); err != nil {
		return config{}, err
	}
	return resolve(f)
}

// resolve turns flags into a protocol and a shard.
func resolve(f flags) (config, error) {
	mode := protocol.Sliding
	switch {
	case f.Protocol != nil && f.Disjoint && *f.Protocol != protocol.Disjoint:
		return config{}, command.Usagef("--disjoint conflicts with --protocol %s", *f.Protocol)
	case f.Protocol != nil:
		mode = *f.Protocol
	case f.Disjoint:
		mode = protocol.Disjoint
	}
	if f.MaxWin < 0 {
		return config{}, command.Usagef("--max-windows %d: must be positive", f.MaxWin)
	}
	p := protocol.Protocol{Mode: mode, Context: f.Context, MaxWindows: f.MaxWin}
	switch mode {
	case protocol.Sliding:
		if f.Context < 2 {
			return config{}, command.Usagef("--context %d: must be at least 2", f.Context)
		}
		p.Stride = f.Context / 2
		if f.Stride != nil {
			p.Stride = *f.Stride
		}
		if p.Stride < 1 {
			return config{}, command.Usagef("--stride %d: must be at least 1", p.Stride)
		}
		if p.Stride >= p.Context {
			return config{}, command.Usagef("--stride %d: must be less than --context %d", p.Stride, p.Context)
		}
	case protocol.Disjoint, protocol.LlamaCpp:
		if f.Stride != nil {
			return config{}, command.Usagef("--stride: the %s protocol has no stride", mode)
		}
		least := 2
		if mode == protocol.LlamaCpp {
			least = 3
		}
		if f.Context < least {
			return config{}, command.Usagef("--context %d: must be at least %d for the %s protocol", f.Context, least, mode)
		}
	default:
		return config{}, command.Usagef("--protocol %q: want sliding, disjoint or llama.cpp", mode)
	}
	if err := protocol.Validate(p); err != nil {
		return config{}, command.UsageError{Msg: err.Error()} // not reached: checked above, with flag names
	}
	shard, err := protocol.ParseShard(f.Shard)
	if err != nil {
		return config{}, command.Usagef("--%v", err)
	}
	p.Shard = shard.String()
	level, _ := progress.ParseLevel(f.LogLevel) // kong checked the enum
	cfg := config{input: f.Input, output: f.Output, proto: p, shard: shard, level: level}
	if shard.N == 0 {
		if f.Split != nil {
			return config{}, command.Usagef("--split: only with --shard")
		}
		if f.Attn != nil {
			return config{}, command.Usagef("--split-attention: only with --shard")
		}
		return cfg, nil
	}
	cfg.split = splitCost
	if f.Split != nil {
		cfg.split = *f.Split
	}
	switch cfg.split {
	case splitCost:
		cfg.attn = protocol.DefaultAttention
		if f.Attn != nil {
			cfg.attn = *f.Attn
		}
		if cfg.attn < 1 {
			return config{}, command.Usagef("--split-attention %d: must be at least 1", cfg.attn)
		}
	case splitCount:
		if f.Attn != nil {
			return config{}, command.Usagef("--split-attention: only with --split cost")
		}
	default:
		return config{}, command.Usagef("--split %q: want cost or count", cfg.split)
	}
	return cfg, nil
}

// headerFlags are the flags recorded in the header: the effective values.
func (c config) headerFlags() map[string]any {
	m := map[string]any{"protocol": c.proto.Mode, "context": c.proto.Context}
	if c.proto.MaxWindows > 0 {
		m["max_windows"] = c.proto.MaxWindows
	}
	if c.proto.Stride != 0 {
		m["stride"] = c.proto.Stride
	}
	if c.proto.Shard != "" {
		m["shard"] = c.proto.Shard
		m["split"] = c.split
	}
	if c.split == splitCost {
		m["split_attention"] = c.attn
	}
	return m
}

// run is ppl-window without the process: args are the command line
// without the program name.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parse(args, stdout, stderr)
	if err != nil {
		return err
	}
	in, name := stdin, "<stdin>"
	if cfg.input != "-" {
		name = cfg.input
	}
	open := func() (io.ReadCloser, error) { return pipe.Open(cfg.input) }
	if cfg.split == splitCost && cfg.input == "-" {
		// Two passes: keep a copy of standard input.
		tmp, err := os.CreateTemp("", "ppl-window-*.ndjson")
		if err != nil {
			return fmt.Errorf("--split cost: a temporary copy of standard input: %w", err)
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		if _, err := io.Copy(tmp, stdin); err != nil {
			return fmt.Errorf("--split cost: a temporary copy of standard input: %w", err)
		}
		open = func() (io.ReadCloser, error) {
			_, err := tmp.Seek(0, io.SeekStart)
			return io.NopCloser(tmp), err
		}
	}
	// A file (or the kept copy for --split cost) can be read twice: the
	// first pass counts the windows, so that the header tells ppl-score
	// the total its progress counts towards. From a pipe ppl-window
	// streams and the total stays unknown.
	if cfg.split == splitCost || cfg.input != "-" {
		f, err := open()
		if err != nil {
			return err
		}
		err = plan(ctx, pipe.NewReader(f, name), &cfg)
		f.Close()
		if err != nil {
			return err
		}
	}
	if cfg.input != "-" || cfg.split == splitCost {
		f, err := open()
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	out := stdout
	var af *pipe.AtomicFile
	if cfg.output != "" {
		if err := pipe.CheckNotInput(cfg.output, cfg.input); err != nil {
			return err
		}
		if af, err = pipe.Create(cfg.output); err != nil {
			return err
		}
		defer af.Close() // removes the file unless committed
		out = af
	}
	w := pipe.NewWriter(out, pipe.StageWindow)
	err = window(ctx, pipe.NewReader(in, name), w, cfg, progress.New(stderr, tool, cfg.level))
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write: %w", ferr)
	}
	if err == nil && af != nil {
		err = af.Commit()
	}
	return err
}

// window copies the records of r to w, adding the window stage.
func window(ctx context.Context, r *pipe.Reader, w *pipe.Writer, cfg config, log *progress.Log) error {
	var (
		streams  = pipe.NewStreams()
		done     = map[string]bool{} // streams whose windows were emitted
		started  bool                // own header written
		tokenize bool                // tokenize header seen
		global   int                 // ordinal of the next window over all streams, for --shard
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err // names the input and line
		}
		if h := rec.Header; h != nil {
			switch h.Stage {
			case pipe.StageTokenize:
				tokenize = true
			case pipe.StageWindow:
				return r.Errorf("input is already windowed: it has a window header (written by %s)", h.Tool)
			default:
				return r.Errorf("input has a %s stage: ppl-window reads the output of ppl-tokenize", h.Stage)
			}
			if err := w.Pass(rec); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			continue
		}
		if !started {
			if !tokenize { // the reader lets no record before its stage's header
				return r.Errorf("no tokenize header before the first %s record", rec.Type)
			}
			if err := w.Header(pipe.Header{Tool: tool, Version: Version, Flags: cfg.headerFlags(), Protocol: &cfg.proto}); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			started = true
		}
		if err := w.Pass(rec); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		st, err := streams.Add(rec)
		if err != nil {
			return r.Errorf("%v", err)
		}
		if st == nil || !st.Complete() || done[st.ID] {
			continue
		}
		done[st.ID] = true
		st.Release() // windows need only the count
		spans, err := protocol.Windows(st.NTokens, cfg.proto)
		if err != nil {
			return r.Errorf("stream %q: %v", st.ID, err)
		}
		if len(spans) == 0 {
			log.Warnf("warning: stream %q (%d tokens) gets no window under the %s protocol at context %d: it is shorter than the context and is not measured",
				st.ID, st.NTokens, cfg.proto.Mode, cfg.proto.Context)
		}
		log.Debugf("stream %q: %d tokens, %d windows", st.ID, st.NTokens, len(spans))
		for i, s := range spans {
			if cfg.owns(global) {
				win := pipe.Window{Stream: st.ID, Index: i, Begin: s.Begin, End: s.End, ScoreFrom: s.ScoreFrom, BOS: s.BOS}
				if err := w.Window(&win); err != nil {
					return fmt.Errorf("write: %w", err)
				}
			}
			global++
		}
	}
	if err := streams.CheckComplete(); err != nil {
		return r.Errorf("%v", err)
	}
	if !started { // cannot happen: a complete tokenize stage has an end record
		return r.Errorf("no tokenize stage in the input")
	}
	if err := w.End(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// plan reads the whole input once and counts its windows (the header's
// protocol.windows); with --split cost it also deals them by cost: it sets
// cfg.owner and the header's record of the split. It reads streams as
// window does, so the global ordinals agree; errors in the input are
// reported here, as window would.
func plan(ctx context.Context, r *pipe.Reader, cfg *config) error {
	var (
		streams = pipe.NewStreams()
		done    = map[string]bool{}
		costs   []int64
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if h := rec.Header; h != nil {
			switch h.Stage {
			case pipe.StageTokenize:
			case pipe.StageWindow:
				return r.Errorf("input is already windowed: it has a window header (written by %s)", h.Tool)
			default:
				return r.Errorf("input has a %s stage: ppl-window reads the output of ppl-tokenize", h.Stage)
			}
			continue
		}
		st, err := streams.Add(rec)
		if err != nil {
			return r.Errorf("%v", err)
		}
		if st == nil || !st.Complete() || done[st.ID] {
			continue
		}
		done[st.ID] = true
		st.Release()
		spans, err := protocol.Windows(st.NTokens, cfg.proto)
		if err != nil {
			return r.Errorf("stream %q: %v", st.ID, err)
		}
		for _, s := range spans {
			var c int64
			if cfg.split == splitCost {
				c = protocol.Cost(s, cfg.attn)
			}
			costs = append(costs, c)
		}
	}
	if err := streams.CheckComplete(); err != nil {
		return r.Errorf("%v", err)
	}
	cfg.proto.Windows = len(costs)
	if cfg.split != splitCost {
		return nil
	}
	owner, load := protocol.Deal(costs, cfg.shard.N)
	windows := make([]int, cfg.shard.N)
	for _, k := range owner {
		windows[k]++
	}
	cfg.owner = owner
	cfg.proto.Split = &pipe.Split{By: splitCost, Attention: cfg.attn, Windows: windows, Cost: load}
	return nil
}
