package pipe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// Writer writes the records of one stage, and passes upstream records
// through, to an underlying writer. It counts the stage's own records for
// the end trailer. Records are encoded by hand for the hot types so that
// floats are exactly strconv 'g' -1 and encoding needs no reflection.
type Writer struct {
	w     *bufio.Writer
	stage string
	n     int
	buf   []byte
}

// NewWriter returns a Writer for records of stage.
func NewWriter(w io.Writer, stage string) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 1<<20), stage: stage}
}

// Pass copies an upstream record's line through unchanged.
func (w *Writer) Pass(r *Record) error {
	if _, err := w.w.Write(r.Raw); err != nil {
		return err
	}
	return w.w.WriteByte('\n')
}

// Header writes the stage's header; Type, V and Stage are filled in.
func (w *Writer) Header(h Header) error {
	h.Type, h.V, h.Stage = TypeHeader, Version, w.stage
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	return w.line(b)
}

// Stream writes a stream record.
func (w *Writer) Stream(s *Stream) error {
	b := append(w.buf[:0], `{"type":"stream","id":`...)
	b = appendString(b, s.ID)
	b = append(b, `,"domain":`...)
	b = appendString(b, s.Domain)
	if s.Source != "" {
		b = append(b, `,"source":`...)
		b = appendString(b, s.Source)
	}
	b = append(b, `,"sha256":`...)
	b = appendString(b, s.SHA256)
	b = appendInt(b, "bytes", s.Bytes)
	if s.Words != 0 {
		b = appendInt(b, "words", s.Words)
	}
	b = appendInt(b, "n_tokens", int64(s.NTokens))
	if s.Replaced != 0 {
		b = appendInt(b, "replaced", int64(s.Replaced))
	}
	return w.line(append(b, '}'))
}

// Tokens writes a tokens record; at most MaxTokensPerRecord ids.
func (w *Writer) Tokens(t *Tokens) error {
	if len(t.IDs) > MaxTokensPerRecord {
		return fmt.Errorf("tokens record of %d ids exceeds %d", len(t.IDs), MaxTokensPerRecord)
	}
	b := append(w.buf[:0], `{"type":"tokens","stream":`...)
	b = appendString(b, t.Stream)
	b = appendInt(b, "offset", int64(t.Offset))
	b = append(b, `,"ids":[`...)
	for i, id := range t.IDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return w.line(append(b, "]}"...))
}

// Window writes a window record.
func (w *Writer) Window(win *Window) error {
	b := append(w.buf[:0], `{"type":"window",`...)
	b = appendSpan(b, win.Stream, win.Index, win.Begin, win.End, win.ScoreFrom, win.BOS)
	return w.line(append(b, '}'))
}

// Scores writes a scores record. A NaN or infinite value is an error:
// it must never reach a report.
func (w *Writer) Scores(s *Scores) error {
	b := append(w.buf[:0], `{"type":"scores",`...)
	b = appendSpan(b, s.Stream, s.Index, s.Begin, s.End, s.ScoreFrom, s.BOS)
	var err error
	if b, err = appendFloats(b, "logprobs", s.Logprobs); err != nil {
		return fmt.Errorf("window %d of %s: %w", s.Index, s.Stream, err)
	}
	if s.Argmax != nil {
		b = append(b, `,"argmax":[`...)
		for i, id := range s.Argmax {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	if s.KLD != nil {
		if b, err = appendFloats(b, "kld", s.KLD); err != nil {
			return fmt.Errorf("window %d of %s: %w", s.Index, s.Stream, err)
		}
	}
	if s.RefLogprobs != nil {
		if b, err = appendFloats(b, "ref_logprobs", s.RefLogprobs); err != nil {
			return fmt.Errorf("window %d of %s: %w", s.Index, s.Stream, err)
		}
	}
	if s.Top1Agree != nil {
		b = append(b, `,"top1_agree":[`...)
		for i, a := range s.Top1Agree {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(b, a)
		}
		b = append(b, ']')
	}
	return w.line(append(b, '}'))
}

// End writes the stage's trailer with the count of its records so far.
func (w *Writer) End() error {
	b := append(w.buf[:0], `{"type":"end","stage":`...)
	b = appendString(b, w.stage)
	b = appendInt(b, "records", int64(w.n))
	w.n-- // the trailer is not counted
	return w.line(append(b, '}'))
}

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error { return w.w.Flush() }

func (w *Writer) line(b []byte) error {
	w.buf = b[:0]
	w.n++
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	return w.w.WriteByte('\n')
}

func appendSpan(b []byte, stream string, index, begin, end, from int, bos bool) []byte {
	b = append(b, `"stream":`...)
	b = appendString(b, stream)
	b = appendInt(b, "index", int64(index))
	b = appendInt(b, "begin", int64(begin))
	b = appendInt(b, "end", int64(end))
	b = appendInt(b, "score_from", int64(from))
	if bos {
		b = append(b, `,"bos":true`...)
	}
	return b
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendFloats(b []byte, key string, v []float64) ([]byte, error) {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, f := range v {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return b, fmt.Errorf("%s[%d] is %v", key, i, f)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// appendString appends s as a JSON string, escaping as encoding/json does
// (without HTML escaping); invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&15])
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
