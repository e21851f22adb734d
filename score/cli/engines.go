package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"ppl.dev/pipe"
	"ppl.dev/score/backend"
	"ppl.dev/score/model"
)

// engine is the model (and the reference) loaded on one device. With
// --devices, each device has its own, and the windows go to whichever is
// free; the output stays in input order, so it is the same as one engine's
// (each engine computes a window as the first would: the same backend, the
// same kernels).
type engine struct {
	m, ref backend.Model
}

func (e engine) close() {
	if e.m != nil {
		e.m.Close()
	}
	if e.ref != nil {
		e.ref.Close()
	}
}

// score runs one window's job on the engine.
func (e engine) score(j *job) {
	t0 := time.Now()
	switch {
	case e.ref != nil:
		j.res, j.err = e.m.ScoreWith(j.tokens, j.from, e.ref)
	case j.visit != nil:
		j.res, j.err = e.m.ScoreVisit(j.tokens, j.from, j.visit)
		if j.err == nil && j.after != nil {
			j.err = j.after(j.res)
		}
	default:
		j.res, j.err = e.m.Score(j.tokens, j.from)
	}
	j.dur = time.Since(t0)
}

// job is one window: its scores record, and until they are in it, what to
// compute them from.
type job struct {
	sc         *pipe.Scores
	done       bool // sc is complete
	tokens     []int32
	from       int
	group, key string // its cache entry
	res        *model.Result
	err        error
	dur        time.Duration
	// visit sees each target's logits (--kld-base, --write-kld-base),
	// after completes res from what it saw or fails (--kld-base: its
	// chunk unread), rows are the chunk's rows to write
	// (--write-kld-base).
	visit func(t int, logits []float32)
	after func(*model.Result) error
	rows  []uint16
}

// windowRun is the windows being scored and the output that waits for
// them: records to write through and windows' scores, in input order.
type windowRun struct {
	queue    []queued
	jobs     chan *job
	results  chan *job
	inflight int
	workers  sync.WaitGroup
}

// queued is one output: a record written through (raw), or a window's
// scores.
type queued struct {
	raw []byte
	j   *job
}

// loadEngines loads the model (and the reference) on each device of
// --devices after the first, which holds s.m and s.ref, or takes them from
// the group the backend loaded with the first (openGroup).
func (s *scorer) loadEngines(ctx context.Context, opts model.Options) error {
	first := engine{m: s.m.Model}
	if s.ref != nil {
		first.ref = s.ref.Model
	}
	s.engines = []engine{first}
	if len(s.f.devices) < 2 {
		return nil
	}
	ropts := opts
	ropts.KVDtype = s.f.RefKVDtype
	take := func(role string) backend.Model {
		ms := s.group[role]
		if len(ms) == 0 {
			return nil
		}
		s.group[role] = ms[1:]
		return ms[0]
	}
	for i, index := range s.f.devices[1:] {
		e := engine{m: take("model"), ref: take("reference")}
		var err error
		if e.m == nil {
			e.m, err = s.openCtx(ctx, s.f.Model, func() (backend.Model, error) { return s.openAt("--devices", s.f.Model, opts, index) })
		}
		if err == nil && s.ref != nil && e.ref == nil {
			flag, rindex := "--devices", index
			if len(s.f.refDevices) > 0 {
				flag, rindex = "--reference-devices", s.f.refDevices[i+1]
			}
			e.ref, err = s.openCtx(ctx, s.f.Reference, func() (backend.Model, error) { return s.openAt(flag, s.f.Reference, ropts, rindex) })
		}
		if err != nil {
			e.close()
			return err
		}
		s.engines = append(s.engines, e)
	}
	// A window's numbers must not depend on the engine that scores it (nor
	// a cached window on the engine that scored it first).
	for _, e := range s.engines[1:] {
		for _, pair := range [][2]backend.Model{{first.m, e.m}, {first.ref, e.ref}} {
			if pair[0] == nil {
				continue
			}
			a, b := pair[0].Device(), pair[1].Device()
			if d := differs(a, b); d != "" {
				return fmt.Errorf("--devices: %s would compute differently from %s (%s): a window's numbers must not depend on the engine that scores it; list devices of one kind", b.Name, a.Name, d)
			}
		}
	}
	names := make([]string, len(s.engines))
	for i, e := range s.engines {
		names[i] = e.m.Device().Name
		if e.ref != nil && e.ref.Device().Name != names[i] {
			names[i] += " (reference on " + e.ref.Device().Name + ")"
		}
	}
	s.log.Infof("%d engines: %s", len(s.engines), strings.Join(names, ", "))
	for _, l := range []*loaded{s.m, s.ref} {
		if l == nil {
			continue
		}
		if p, ok := l.Device().Extra["weight_placement"]; ok {
			s.log.Infof("%s's weights: %v", l.info.Name, p)
		}
	}
	return nil
}

// openAt loads a model on device index of the backend the first engine is
// on; flag names the flag that chose the device, for the error.
func (s *scorer) openAt(flag, path string, opts model.Options, index int) (backend.Model, error) {
	b, _ := backend.Get(s.backend) // the first engine's: it exists
	m, err := b.Open(path, opts, index)
	if err != nil {
		return nil, fmt.Errorf("%s: %s on %s:%d: %w", flag, path, s.backend, index, err)
	}
	return m, nil
}

// pass writes rec through, after the scores still to come of the windows
// before it.
func (s *scorer) pass(w *pipe.Writer, rec *pipe.Record) error {
	if len(s.work.queue) == 0 {
		return w.Pass(rec)
	}
	// The reader reuses its line buffer.
	s.work.queue = append(s.work.queue, queued{raw: append([]byte(nil), rec.Raw...)})
	return nil
}

// upload copies the weights of every engine's models that wait for a
// window to copy them (backend.Uploader: a GPU's) before the first window
// computed, all at once, and says so: a large model's take minutes. Ctrl-C
// returns at once, as during a load.
func (s *scorer) upload(ctx context.Context) error {
	if s.uploaded {
		return nil
	}
	s.uploaded = true
	var us []backend.Uploader
	var where []string
	for _, e := range s.engines {
		for _, m := range []backend.Model{e.m, e.ref} {
			if u, ok := m.(backend.Uploader); ok {
				us = append(us, u)
				where = append(where, m.Device().Name)
			}
		}
	}
	if len(us) == 0 {
		return nil
	}
	slices.Sort(where)
	s.log.Infof("copying the weights to %s (once, at the first window computed)", strings.Join(slices.Compact(where), ", "))
	t0 := time.Now()
	errs := make(chan error, len(us))
	for _, u := range us {
		go func() { errs <- u.Upload() }()
	}
	var first error
	for range us {
		select {
		case err := <-errs:
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return errors.New("interrupted while copying the weights to the device")
		}
	}
	if first != nil {
		return first
	}
	s.log.Infof("weights copied in %s", time.Since(t0).Round(time.Millisecond))
	return nil
}

// submit queues a window's scores for output and, when they are not from
// the cache, has an engine compute them: at once with one engine (so that
// a later window with the same tokens replays this one's), else by the
// first engine free, waiting for one when all are busy.
func (s *scorer) submit(ctx context.Context, w *pipe.Writer, j *job) error {
	r := &s.work
	r.queue = append(r.queue, queued{j: j})
	if !j.done {
		if err := s.upload(ctx); err != nil {
			return err
		}
		if len(s.engines) == 1 {
			s.engines[0].score(j)
			if err := s.finish(j); err != nil {
				return err
			}
		} else {
			r.start(s.engines)
			for r.inflight == len(s.engines) {
				if err := s.finish(r.collect()); err != nil {
					return err
				}
			}
			r.inflight++
			r.jobs <- j
		}
	}
	return s.drain(ctx, w)
}

// settle waits for the windows being scored and writes all that waits.
func (s *scorer) settle(ctx context.Context, w *pipe.Writer) error {
	if err := s.keep(); err != nil {
		return err
	}
	return s.drain(ctx, w)
}

// keep waits for the windows being scored, and caches them.
func (s *scorer) keep() error {
	r := &s.work
	var first error
	for r.inflight > 0 {
		if err := s.finish(r.collect()); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// drain writes the queue's head up to the first window not yet scored.
func (s *scorer) drain(ctx context.Context, w *pipe.Writer) error {
	r := &s.work
	for len(r.queue) > 0 {
		q := r.queue[0]
		var err error
		switch {
		case q.j == nil:
			err = w.Pass(&pipe.Record{Raw: q.raw})
		case !q.j.done:
			return nil
		default:
			if err := s.writeRows(q.j); err != nil {
				return err
			}
			err = w.Scores(q.j.sc)
			if err == nil {
				// Each window costs far more than a write: flushing it at
				// once stops the run at the first failed write (downstream
				// gone) instead of scoring on until the buffer fills.
				err = w.Flush()
			}
		}
		if err != nil {
			return s.written(ctx, err)
		}
		r.queue[0] = queued{}
		r.queue = r.queue[1:]
		if q.j != nil {
			s.report(false)
		}
	}
	return nil
}

// start starts one worker per engine, once.
func (r *windowRun) start(engines []engine) {
	if r.jobs != nil {
		return
	}
	r.jobs, r.results = make(chan *job, len(engines)), make(chan *job, len(engines))
	for _, e := range engines {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			for j := range r.jobs {
				e.score(j)
				r.results <- j
			}
		}()
	}
}

// collect waits for the next window an engine finishes.
func (r *windowRun) collect() *job {
	j := <-r.results
	r.inflight--
	return j
}

// stop ends the workers after the windows they are scoring, so that no
// model is closed under one.
func (r *windowRun) stop() {
	if r.jobs == nil {
		return
	}
	close(r.jobs)
	r.workers.Wait()
	r.jobs = nil
}

// deviceNames lists the engines' devices ("cuda:0,cuda:1").
func (s *scorer) deviceNames() string {
	names := make([]string, len(s.engines))
	for i, e := range s.engines {
		names[i] = e.m.Device().Name
	}
	return strings.Join(names, ",")
}
