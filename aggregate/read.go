package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// Source is one input: a name for messages ("<stdin>", a path) and its
// records.
type Source struct {
	Name string
	R    io.Reader
}

type wkey struct {
	stream string
	index  int
}

// input is what one source contributed.
type input struct {
	name    string
	headers map[string]*pipe.Header
	raw     map[string][]byte // normalized header JSON, by stage
	shard   protocol.Shard
	windows map[wkey]pipe.Window // window records
	scores  map[wkey]bool
	checked bool // headers checked against the other inputs
}

// scored is one window's scores and where they came from.
type scored struct {
	pipe.Scores
	input string
	line  int
}

type streamData struct {
	pipe.Stream
	from    string // the input that announced it first
	windows map[int]*scored
	ordered []*scored // by index, after checkComplete
}

// corpus is everything read from all inputs.
type corpus struct {
	inputs  []*input
	streams map[string]*streamData
	order   []string
	// Whether the scores carry each optional field; decided by the first
	// scores record, then required of all.
	fields *optional
	proto  pipe.Protocol // without shard
}

type optional struct {
	kld, top1, ref bool
	first          string // where the first scores record was
}

func (c *corpus) read(src Source) error {
	in := &input{name: src.Name, headers: map[string]*pipe.Header{}, raw: map[string][]byte{},
		windows: map[wkey]pipe.Window{}, scores: map[wkey]bool{}}
	r := pipe.NewReader(src.R, src.Name)
	seen := map[string]bool{}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case rec.Header != nil:
			in.headers[rec.Header.Stage] = rec.Header
			raw, err := normalizeHeader(rec.Raw, rec.Header.Stage)
			if err != nil {
				return r.Errorf("header: %v", err)
			}
			in.raw[rec.Header.Stage] = raw
		case rec.Stream != nil:
			if seen[rec.Stream.ID] {
				return r.Errorf("stream %q announced twice", rec.Stream.ID)
			}
			seen[rec.Stream.ID] = true
			if err := c.addStream(in.name, rec.Stream); err != nil {
				return r.Errorf("%v", err)
			}
		case rec.Window != nil:
			k := wkey{rec.Window.Stream, rec.Window.Index}
			if _, dup := in.windows[k]; dup {
				return r.Errorf("window %d of stream %q appears twice", k.index, k.stream)
			}
			in.windows[k] = *rec.Window
		case rec.Scores != nil:
			if !in.checked && in.headers[pipe.StageTokenize] != nil && in.headers[pipe.StageWindow] != nil && in.headers[pipe.StageScore] != nil {
				// Refuse a foreign input before its windows can look like duplicates.
				if err := c.checkHeaders(in); err != nil {
					return err
				}
			}
			if err := c.addScores(in, rec, seen); err != nil {
				return r.Errorf("%v", err)
			}
		}
	}
	if err := c.finishInput(in); err != nil {
		return err
	}
	c.inputs = append(c.inputs, in)
	return nil
}

func (c *corpus) addStream(from string, s *pipe.Stream) error {
	if old, ok := c.streams[s.ID]; ok {
		for _, f := range []struct {
			name     string
			was, now any
		}{
			{"domain", old.Domain, s.Domain},
			{"sha256", old.SHA256, s.SHA256},
			{"bytes", old.Bytes, s.Bytes},
			{"words", old.Words, s.Words},
			{"n_tokens", old.NTokens, s.NTokens},
		} {
			if f.was != f.now {
				return fmt.Errorf("stream %q: %s %v differs from %v in %s", s.ID, f.name, f.now, f.was, old.from)
			}
		}
		return nil
	}
	c.streams[s.ID] = &streamData{Stream: *s, from: from, windows: map[int]*scored{}}
	c.order = append(c.order, s.ID)
	return nil
}

func (c *corpus) addScores(in *input, rec *pipe.Record, seen map[string]bool) error {
	s := rec.Scores
	if !seen[s.Stream] {
		return fmt.Errorf("scores for stream %q, which has no stream record in this input", s.Stream)
	}
	sd := c.streams[s.Stream]
	if prev, dup := sd.windows[s.Index]; dup {
		return fmt.Errorf("window %d of stream %q scored twice: here and in %s:%d", s.Index, s.Stream, prev.input, prev.line)
	}
	have := optional{kld: s.KLD != nil, top1: s.Top1Agree != nil, ref: s.RefLogprobs != nil}
	where := fmt.Sprintf("%s:%d", in.name, rec.Line)
	if c.fields == nil {
		have.first = where
		c.fields = &have
	} else {
		for _, f := range []struct {
			name      string
			want, got bool
		}{
			{"kld", c.fields.kld, have.kld},
			{"top1_agree", c.fields.top1, have.top1},
			{"ref_logprobs", c.fields.ref, have.ref},
		} {
			if f.want != f.got {
				return fmt.Errorf("window %d of stream %q %s %s, but the scores at %s %s", s.Index, s.Stream,
					hasWord(f.got), f.name, c.fields.first, hasWord(f.want))
			}
		}
	}
	in.scores[wkey{s.Stream, s.Index}] = true
	sd.windows[s.Index] = &scored{Scores: *s, input: in.name, line: rec.Line}
	return nil
}

func hasWord(b bool) string {
	if b {
		return "has"
	}
	return "has no"
}

// finishInput checks that an input is a complete scored pipeline on its
// own: all three stages, and a scores record for each window record.
func (c *corpus) finishInput(in *input) error {
	if !in.checked {
		if err := c.checkHeaders(in); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(in.windows) {
		if !in.scores[k] {
			return fmt.Errorf("%s: window %d of stream %q has no scores record", in.name, k.index, k.stream)
		}
		w := in.windows[k]
		if got := c.streams[k.stream].windows[k.index].WindowSpec(); got != w {
			return fmt.Errorf("%s: window %d of stream %q: scores for [%d,%d) from %d, but the window record asks for [%d,%d) from %d",
				in.name, k.index, k.stream, got.Begin, got.End, got.ScoreFrom, w.Begin, w.End, w.ScoreFrom)
		}
	}
	for k := range in.scores {
		if _, ok := in.windows[k]; !ok {
			return fmt.Errorf("%s: scores for window %d of stream %q, which has no window record", in.name, k.index, k.stream)
		}
	}
	return nil
}

// checkHeaders checks that the input has all three stages and a valid
// protocol, and that its provenance agrees with the first input's.
func (c *corpus) checkHeaders(in *input) error {
	in.checked = true
	for _, st := range []struct{ stage, hint string }{
		{pipe.StageTokenize, "ppl-tokenize"},
		{pipe.StageWindow, "ppl-window"},
		{pipe.StageScore, "ppl-score"},
	} {
		if in.headers[st.stage] == nil {
			return fmt.Errorf("%s: no %s stage (no header from %s): the input must be the output of ppl-tokenize | ppl-window | ppl-score",
				in.name, st.stage, st.hint)
		}
	}
	if sc, tok := in.headers[pipe.StageScore].Score, in.headers[pipe.StageTokenize].Tokenizer; sc != nil && sc.Tokenizer != "" {
		if tok == nil || tok.ID != sc.Tokenizer {
			id := ""
			if tok != nil {
				id = tok.ID
			}
			return fmt.Errorf("%s: the tokenize header's tokenizer id %q is not the %q ppl-score checked: the headers come from different runs", in.name, id, sc.Tokenizer)
		}
	}
	wh := in.headers[pipe.StageWindow]
	if wh.Protocol == nil {
		return fmt.Errorf("%s: the window header has no protocol", in.name)
	}
	p := *wh.Protocol
	if err := protocol.Validate(p); err != nil {
		return fmt.Errorf("%s: window header: protocol: %v", in.name, err)
	}
	sh, err := protocol.ParseShard(p.Shard)
	if err != nil {
		return fmt.Errorf("%s: window header: %v", in.name, err)
	}
	in.shard = sh
	if len(c.inputs) == 0 {
		c.proto = pipe.Protocol{Mode: p.Mode, Context: p.Context, Stride: p.Stride, MaxWindows: p.MaxWindows}
		return nil
	}
	if err := sameProvenance(c.inputs[0], in); err != nil {
		return err
	}
	if sh.N > 0 {
		for _, o := range c.inputs {
			if o.shard == sh {
				return fmt.Errorf("%s: shard %s was already read from %s", in.name, sh, o.name)
			}
		}
	}
	return nil
}

func sortedKeys(m map[wkey]pipe.Window) []wkey {
	keys := make([]wkey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b wkey) int {
		if c := strings.Compare(a.stream, b.stream); c != 0 {
			return c
		}
		return a.index - b.index
	})
	return keys
}

// provenance lists the fields that must agree between the inputs of one
// report, with their values in an input.
func provenance(in *input) []struct{ field, value string } {
	tok, win, sc := in.headers[pipe.StageTokenize], in.headers[pipe.StageWindow], in.headers[pipe.StageScore]
	var model, tokID, corpus, kv, ref, refKV string
	if sc.Model != nil {
		model = sc.Model.SHA256
	}
	if tok.Tokenizer != nil {
		tokID = tok.Tokenizer.ID
	}
	for _, h := range []*pipe.Header{tok, win, sc} {
		if h.Corpus != nil && corpus == "" {
			corpus = h.Corpus.Name
			if h.Corpus.Version != "" {
				corpus += " " + h.Corpus.Version
			}
		}
	}
	if sc.Score != nil {
		kv, refKV = sc.Score.KVDtype, sc.Score.RefKVDtype
		if sc.Score.Reference != nil {
			ref = sc.Score.Reference.SHA256
		}
	}
	shards := "none"
	if in.shard.N > 0 {
		shards = strconv.Itoa(in.shard.N)
	}
	p := win.Protocol
	out := []struct{ field, value string }{
		{"model sha256", model},
		{"tokenizer id", tokID},
		{"corpus", corpus},
		{"protocol mode", p.Mode},
		{"protocol context", strconv.Itoa(p.Context)},
		{"protocol stride", strconv.Itoa(p.Stride)},
		{"protocol max windows", strconv.Itoa(p.MaxWindows)},
		{"shard count", shards},
		{"shard split", splitOf(p)},
		{"kv dtype", kv},
		{"reference model sha256", ref},
		{"reference kv dtype", refKV},
	}
	// The arithmetic: shards scored in another mode measure something else.
	if s := sc.Score; s != nil {
		kind, _, _ := strings.Cut(s.Device, ":") // cuda:0 and cuda:1 compute alike
		rope, _ := json.Marshal(s.RoPE)          // keys sorted
		out = append(out, []struct{ field, value string }{
			{"device", kind},
			{"activations", s.Activations},
			{"ssm state dtype", s.SSMStateDtype},
			{"rope", string(rope)},
			{"alibi max bias", strconv.FormatFloat(s.ALiBi, 'g', -1, 64)},
		}...)
		for _, k := range pipe.ExtraArithmetic {
			out = append(out, struct{ field, value string }{k, extraString(s.Extra, k)})
		}
	}
	return out
}

// extraString is a Score.Extra entry as text, "" when absent.
func extraString(extra map[string]any, k string) string {
	v, ok := extra[k]
	if !ok {
		return ""
	}
	return fmt.Sprint(v)
}

func sameProvenance(first, in *input) error {
	a, b := provenance(first), provenance(in)
	for i := range a {
		if a[i].value != b[i].value {
			return fmt.Errorf("%s: %s %q differs from %q in %s: inputs of one report must come from the same run",
				in.name, a[i].field, b[i].value, a[i].value, first.name)
		}
	}
	return nil
}

// normalizeHeader re-encodes a header line with sorted keys, numbers kept
// as written, and, for the window stage, without the shard it names.
func normalizeHeader(raw []byte, stage string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if stage == pipe.StageWindow {
		for _, k := range []string{"protocol", "flags"} {
			if sub, ok := m[k].(map[string]any); ok {
				delete(sub, "shard")
				delete(sub, "split") // how the shards were dealt: provenance checks it
				delete(sub, "split_attention")
			}
		}
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// absentShards returns the shards of the run that are not among the
// inputs ("2/3"), if the inputs are shards.
func (c *corpus) absentShards() []string {
	n := c.inputs[0].shard.N
	if n == 0 {
		return nil
	}
	by := map[int]bool{}
	for _, in := range c.inputs {
		by[in.shard.K] = true
	}
	var missing []string
	for k := 1; k <= n; k++ {
		if !by[k] {
			missing = append(missing, protocol.Shard{K: k, N: n}.String())
		}
	}
	return missing
}

// checkComplete checks the scored windows of every stream against the
// protocol: each window it defines scored exactly once (duplicates were
// refused when read), with the span it defines, and no other.
func (c *corpus) checkComplete() error {
	type gap struct {
		stream  string
		indices []int // the first missing windows, at most maxListed
		n       int   // all missing windows
	}
	var gaps []gap
	total, missing := 0, 0
	for _, id := range c.order {
		sd := c.streams[id]
		count, err := protocol.Count(sd.NTokens, c.proto)
		if errors.Is(err, protocol.ErrTooShort) {
			count = 0 // the protocol gives the stream no window
		} else if err != nil {
			return fmt.Errorf("stream %q: %v", id, err)
		}
		present := make([]int, 0, len(sd.windows))
		for idx := range sd.windows {
			present = append(present, idx)
		}
		slices.Sort(present)
		if k := len(present); k > 0 && present[k-1] >= count {
			sc := sd.windows[present[k-1]]
			return fmt.Errorf("%s:%d: window %d of stream %q: the %s protocol gives this stream of %d tokens only %d windows",
				sc.input, sc.line, sc.Index, id, c.proto.Mode, sd.NTokens, count)
		}
		total += count
		if len(present) < count {
			// Only the gaps are listed: a stream record can claim more
			// windows than any input could hold, so they are never built.
			g := gap{stream: id, n: count - len(present)}
			next := 0
			for _, idx := range append(present, count) {
				for ; next < idx && len(g.indices) < maxListed; next++ {
					g.indices = append(g.indices, next)
				}
				next = idx + 1
			}
			missing += g.n
			gaps = append(gaps, g)
			continue
		}
		// Every window is present, so there are no more spans than records.
		spans, err := protocol.Windows(sd.NTokens, c.proto)
		if err != nil && !errors.Is(err, protocol.ErrTooShort) {
			return fmt.Errorf("stream %q: %v", id, err)
		}
		sd.ordered = make([]*scored, 0, len(spans))
		for idx, sp := range spans {
			sc := sd.windows[idx]
			if sc.Begin != sp.Begin || sc.End != sp.End || sc.ScoreFrom != sp.ScoreFrom || sc.BOS != sp.BOS {
				return fmt.Errorf("%s:%d: window %d of stream %q is [%d,%d) scored from %d (bos %v), but the protocol's is [%d,%d) scored from %d (bos %v)",
					sc.input, sc.line, idx, id, sc.Begin, sc.End, sc.ScoreFrom, sc.BOS, sp.Begin, sp.End, sp.ScoreFrom, sp.BOS)
			}
			sd.ordered = append(sd.ordered, sc)
		}
	}
	if missing == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d windows have no scores", missing, total)
	if absent := c.absentShards(); len(absent) > 0 {
		fmt.Fprintf(&b, " (shard %s not among the inputs%s)", strings.Join(absent, ", "), c.rerunHint(absent))
	}
	b.WriteString(": ")
	const maxStreams = 5
	for i, g := range gaps {
		if i == maxStreams {
			fmt.Fprintf(&b, "; and %d more streams", len(gaps)-maxStreams)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		list := ranges(g.indices)
		if more := g.n - len(g.indices); more > 0 {
			list += fmt.Sprintf(" and %d more", more)
		}
		fmt.Fprintf(&b, "stream %q windows %s", g.stream, list)
	}
	return errors.New(b.String())
}

// maxListed bounds the missing windows listed per stream.
const maxListed = 20

// ranges formats sorted integers as "1, 4-6, 9".
func ranges(xs []int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		} else {
			parts = append(parts, strconv.Itoa(xs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
