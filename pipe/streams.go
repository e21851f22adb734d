package pipe

import "fmt"

// Streams assembles each stream's token ids from stream and tokens records
// and checks them: a stream announced once, its chunks in order and
// without gaps, and exactly n_tokens ids in all.
type Streams struct {
	order []string
	byID  map[string]*StreamTokens
}

// StreamTokens is a stream and the ids read for it so far.
type StreamTokens struct {
	Stream
	IDs  []int32
	read int // ids read, which Release does not forget
}

// Complete reports whether all of the stream's ids have been read.
func (s *StreamTokens) Complete() bool { return s.read == s.NTokens }

// Release drops the stream's ids once they are no longer needed, so a
// long corpus is not held in memory; the stream's record and count remain.
func (s *StreamTokens) Release() { s.IDs = nil }

// NewStreams returns an empty assembler.
func NewStreams() *Streams { return &Streams{byID: map[string]*StreamTokens{}} }

// Add takes a stream or tokens record (others are ignored) and returns the
// stream it concerns, or nil for other records.
func (ss *Streams) Add(r *Record) (*StreamTokens, error) {
	switch {
	case r.Stream != nil:
		if _, dup := ss.byID[r.Stream.ID]; dup {
			return nil, fmt.Errorf("stream %q announced twice", r.Stream.ID)
		}
		st := &StreamTokens{Stream: *r.Stream}
		ss.byID[st.ID] = st
		ss.order = append(ss.order, st.ID)
		return st, nil
	case r.Tokens != nil:
		st, ok := ss.byID[r.Tokens.Stream]
		if !ok {
			return nil, fmt.Errorf("tokens for stream %q before its stream record", r.Tokens.Stream)
		}
		if r.Tokens.Offset != st.read {
			return nil, fmt.Errorf("tokens of stream %q at offset %d, expected offset %d", st.ID, r.Tokens.Offset, st.read)
		}
		if st.read+len(r.Tokens.IDs) > st.NTokens {
			return nil, fmt.Errorf("stream %q has more than its n_tokens %d ids", st.ID, st.NTokens)
		}
		st.IDs = append(st.IDs, r.Tokens.IDs...)
		st.read += len(r.Tokens.IDs)
		return st, nil
	}
	return nil, nil
}

// Get returns a stream by id.
func (ss *Streams) Get(id string) (*StreamTokens, bool) {
	st, ok := ss.byID[id]
	return st, ok
}

// All returns the streams in the order they were announced.
func (ss *Streams) All() []*StreamTokens {
	out := make([]*StreamTokens, len(ss.order))
	for i, id := range ss.order {
		out[i] = ss.byID[id]
	}
	return out
}

// CheckComplete returns an error naming the first stream with missing ids.
func (ss *Streams) CheckComplete() error {
	for _, st := range ss.All() {
		if !st.Complete() {
			return fmt.Errorf("stream %q: %d of its %d tokens present", st.ID, st.read, st.NTokens)
		}
	}
	return nil
}
