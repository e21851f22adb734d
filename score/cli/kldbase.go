package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"ppl.dev/cache"
	"ppl.dev/pipe"
	"ppl.dev/score/llamakld"
	"ppl.dev/score/model"
)

// kldBase is --kld-base: the reference's log-probabilities, quantized,
// from a file llama-perplexity --kl-divergence-base wrote.
type kldBase struct {
	f    *llamakld.File
	info pipe.Model // the file's name and sha256, the header's reference
}

// openKLDBase opens --kld-base and hashes it (its identity in the header
// and the cache key; remembered in the cache as a model's is), checking it
// against the protocol and the model.
func (s *scorer) openKLDBase(ctx context.Context, proto *pipe.Protocol) error {
	path := s.f.KLDBase
	t0 := time.Now()
	b, err := llamakld.Open(path)
	if err != nil {
		return fmt.Errorf("--kld-base: %w", err)
	}
	s.base = &kldBase{f: b, info: pipe.Model{Name: filepath.Base(path)}}
	if proto.Mode != "llama.cpp" || proto.Context != b.NCtx {
		return fmt.Errorf("--kld-base %s: its chunks are llama-perplexity's of %d tokens; the windows are %s's of %d: use ppl-window --protocol llama.cpp --context %d", path, b.NCtx, proto.Mode, proto.Context, b.NCtx)
	}
	if b.NVocab != s.m.Vocab() {
		return fmt.Errorf("--kld-base %s: a vocabulary of %d tokens, the model's has %d", path, b.NVocab, s.m.Vocab())
	}
	if s.base.info.SHA256, err = s.cache.FileSHA256(ctx, cache.LogHashing(s.log.Infof, s.base.info.Name), path); err != nil {
		return fmt.Errorf("--kld-base: %w", err)
	}
	s.log.Infof("reference: %s, llama-perplexity's log-probs of %d chunks of %d tokens (hashed in %s)", s.base.info.Name, b.NChunk, b.NCtx, time.Since(t0).Round(time.Millisecond))
	return nil
}

// llamaChunk checks that win is chunk k of the llama.cpp protocol at
// context n (the tokens [kn, (k+1)n), scored from kn + n/2 + 1) and
// returns k.
func llamaChunk(win *pipe.Window, n int) (int, error) {
	k := win.Begin / n
	if win.Begin%n != 0 || win.End != win.Begin+n || win.ScoreFrom != win.Begin+n/2+1 {
		return 0, fmt.Errorf("window %d of %s [%d,%d) scored from %d is not a llama-perplexity chunk of %d tokens", win.Index, win.Stream, win.Begin, win.End, win.ScoreFrom, n)
	}
	return k, nil
}

// baseJob sets j up to take its reference from the base file's chunk for
// win (whose tokens, ids, must be the chunk's): the rows are read while
// the window is computed, and each target's figures computed from the
// model's logits as they come.
func (s *scorer) baseJob(j *job, win *pipe.Window, ids []int32) error {
	b := s.base.f
	k, err := llamaChunk(win, b.NCtx)
	if err != nil {
		return fmt.Errorf("--kld-base %s: %w", s.f.KLDBase, err)
	}
	if k >= b.NChunk {
		return fmt.Errorf("--kld-base %s: window %d of %s is chunk %d; the file has %d chunks", s.f.KLDBase, win.Index, win.Stream, k, b.NChunk)
	}
	want := b.Tokens[k*b.NCtx : (k+1)*b.NCtx]
	for i, t := range ids {
		if t != want[i] {
			return fmt.Errorf("--kld-base %s: window %d of %s, position %d: token %d where the file's chunk %d has %d: not the tokens it was made from", s.f.KLDBase, win.Index, win.Stream, win.Begin+i, t, k, want[i])
		}
	}
	// The chunk (hundreds of MB for a large vocabulary at a long
	// context) is read while the model computes the window, and waited
	// for at its first logits.
	rows := b.Prefetch(k)
	rl := llamakld.RowLen(b.NVocab)
	targets := make([]llamakld.Target, len(j.tokens)-j.from)
	j.visit = func(t int, logits []float32) {
		if r, err := rows(); err == nil {
			targets[t] = llamakld.Score(logits, r[t*rl:(t+1)*rl], int(j.tokens[j.from+t]))
		}
	}
	j.after = func(res *model.Result) error {
		if _, err := rows(); err != nil {
			return fmt.Errorf("--kld-base: %w", err)
		}
		res.KLD, res.RefLogprobs, res.Top1Agree = make([]float64, len(targets)), make([]float64, len(targets)), make([]bool, len(targets))
		for t, v := range targets {
			res.KLD[t], res.RefLogprobs[t], res.Top1Agree[t] = v.KLD, -float64(v.NLLBase), v.SameTop
		}
		return nil
	}
	return nil
}

// baseWriter is --write-kld-base: the file, the stream it holds and the
// chunk it takes next.
type baseWriter struct {
	w      *llamakld.Writer
	stream string
	nchunk int
	next   int
}

// writeJob sets j up to quantize the model's logits into the rows of its
// chunk, which drain writes in order (writeRows). The file is created at
// the first window, from its stream's tokens.
func (s *scorer) writeJob(j *job, win *pipe.Window, st *pipe.StreamTokens, proto *pipe.Protocol) error {
	path := s.f.WriteKLDBase
	n := proto.Context
	k, err := llamaChunk(win, n)
	if err != nil {
		return fmt.Errorf("--write-kld-base %s: %w", path, err)
	}
	if s.bw == nil {
		nchunk := st.NTokens / n
		if proto.MaxWindows > 0 {
			nchunk = min(nchunk, proto.MaxWindows)
		}
		w, err := llamakld.Create(path, n, s.m.Vocab(), st.IDs[:nchunk*n])
		if err != nil {
			return fmt.Errorf("--write-kld-base: %w", err)
		}
		s.bw = &baseWriter{w: w, stream: win.Stream, nchunk: nchunk}
	}
	if win.Stream != s.bw.stream || k != s.bw.next || k >= s.bw.nchunk {
		return fmt.Errorf("--write-kld-base %s: window %d of %s is chunk %d; the file takes chunk %d of %s's %d next (one text, every window in order)", path, win.Index, win.Stream, k, s.bw.next, s.bw.stream, s.bw.nchunk)
	}
	s.bw.next++
	rl := llamakld.RowLen(s.m.Vocab())
	j.rows = make([]uint16, (len(j.tokens)-j.from)*rl)
	j.visit = func(t int, logits []float32) {
		llamakld.Quantize(j.rows[t*rl:(t+1)*rl], logits, int(j.tokens[j.from+t]))
	}
	return nil
}

// writeRows appends a written window's rows to --write-kld-base's file.
func (s *scorer) writeRows(j *job) error {
	if s.bw == nil || j.rows == nil {
		return nil
	}
	err := s.bw.w.Write(j.rows)
	j.rows = nil
	return err
}

// closeBase puts --write-kld-base's file in place once every chunk is in
// it, and closes --kld-base's.
func (s *scorer) closeBase() error {
	if s.base != nil {
		s.base.f.Close()
		s.base = nil
	}
	if s.bw == nil {
		if s.f.WriteKLDBase != "" {
			return fmt.Errorf("--write-kld-base %s: no window to write", s.f.WriteKLDBase)
		}
		return nil
	}
	bw := s.bw
	s.bw = nil
	if bw.next != bw.nchunk {
		bw.w.Abort()
		return fmt.Errorf("--write-kld-base %s: %d of its %d chunks scored: not written", s.f.WriteKLDBase, bw.next, bw.nchunk)
	}
	if err := bw.w.Close(); err != nil {
		return fmt.Errorf("--write-kld-base: %w", err)
	}
	s.log.Infof("wrote %s: llama-perplexity's log-probs of %d chunks", s.f.WriteKLDBase, bw.nchunk)
	return nil
}

// abortBase drops an unfinished --write-kld-base file.
func (s *scorer) abortBase() {
	if s.bw != nil {
		s.bw.w.Abort()
		s.bw = nil
	}
	if s.base != nil {
		s.base.f.Close()
		s.base = nil
	}
}
