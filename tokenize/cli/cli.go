// Package cli implements ppl-tokenize, the first stage of the ppl pipeline:
// it turns text into the token ids a model reads, exactly as llama.cpp's
// llama_tokenize does for that model.
//
//	ppl-tokenize --model M.gguf --corpus MANIFEST | ppl-window ... | ppl-score ... | ppl-aggregate
//
// A perplexity is a property of a token sequence, so every number the
// pipeline produces rests on this stage. The tokenizer comes from the GGUF
// file's tokenizer.ggml.* metadata (package ppl.dev/tokenize/tokenizer:
// SentencePiece for "llama", byte-level BPE with its pre-tokenizer for
// "gpt2"); its identity, a hash of everything that decides the tokens, goes
// into the header, so later stages can refuse tokens made by another
// tokenizer.
//
// # Input
//
// Either a corpus, --corpus eval/corpora/NAME/manifest.json: its streams, in
// manifest order (--quick: the quick stream of each domain; --streams a,b:
// those streams), each checked against the manifest's size and sha256 before
// anything is written, or --text FILE...: each file one stream, with id the
// file's base name without extension and domain "text". The model, the
// manifest, text files and corpus streams must be regular files (not a
// directory, a FIFO or a device such as /dev/zero); a corpus stream that
// links outside the corpus directory is refused, and no stream is read
// past its manifest size. --text - reads standard input, as stream "stdin".
// An empty stream (no bytes) stops the run: there is nothing to measure.
//
// Each stream is tokenized as one text: BOS at its start and EOS at its end
// when the model adds them, and special-token text in it (such as "<s>")
// tokenized as plain text. Text must be UTF-8; with --utf8 replace, bytes that
// are not are replaced by U+FFFD and counted in the stream record instead of
// stopping the run.
//
// # Output
//
// To standard output (or --output FILE, written atomically, zstd-compressed
// when FILE ends in .zst): the tokenize header (tool, flags, model name and
// sha256, tokenizer identity, corpus), then per stream a stream record
// followed by tokens records of at most 65,536 ids, and the end trailer
// (format: docs/format.md). An --output that is one of the inputs (the
// model, a text file, the manifest or a stream) is refused.
//
// Each tokenized stream is cached (--cache-dir, --no-cache) under the
// text's sha256, the tokenizer identity, the UTF-8 mode and the tool
// version; an entry replays only under its own key and with ids of the
// vocabulary, else it is reported, removed and the stream tokenized again.
//
//	$ ppl-tokenize --model tiny.gguf --text hello.txt
//	{"type":"header","v":1,"stage":"tokenize","tool":"ppl-tokenize","version":"0.1.0","flags":{...},"model":{"name":"tiny.gguf","sha256":"…","arch":"llama","params":…},"tokenizer":{"model":"llama","pre":"default","id":"…","n_vocab":32000,"add_bos":true,"add_eos":false,"bos":1},"corpus":{"name":"text","streams":["hello"]}}
//	{"type":"stream","id":"hello","domain":"text","source":"hello.txt","sha256":"…","bytes":12,"words":2,"n_tokens":4}
//	{"type":"tokens","stream":"hello","offset":0,"ids":[1,15043,29892,3186]}
//	{"type":"end","stage":"tokenize","records":3}
//
// Progress and a summary go to standard error (--log-level debug, info,
// warn or error).
//
// # Exit status
//
// 0 on success; 2 for a usage error (a missing --model, both or neither of
// --corpus and --text, --quick or --streams without --corpus); 1 for any
// other failure, with a one-line message, for example
//
//	ppl-tokenize: corpus ppl-mixed-v1: stream "en-ref-fhs" (eval/corpora/ppl-mixed-v1/streams/en-ref-fhs.txt) is missing; rebuild the corpus with `make corpus`
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/bytedance/sonic"

	"ppl.dev/cache"
	"ppl.dev/command"
	"ppl.dev/gguf"
	"ppl.dev/pipe"
	"ppl.dev/progress"
	"ppl.dev/tokenize/corpus"
	"ppl.dev/tokenize/spm"
	"ppl.dev/tokenize/tokenizer"
)

const tool = "ppl-tokenize"

// flags are ppl-tokenize's command line; --help prints them.
type flags struct {
	Model    string           `required:"" placeholder:"M.gguf" help:"The model whose tokenizer to use (GGUF)."`
	Corpus   string           `placeholder:"MANIFEST" help:"Tokenize the streams of this corpus manifest (eval/corpora/NAME/manifest.json)."`
	Quick    bool             `help:"With --corpus: only the quick stream of each domain."`
	Streams  []string         `placeholder:"ID" help:"With --corpus: only these streams (comma-separated ids)."`
	Text     bool             `help:"Tokenize the FILE arguments instead: each file one stream, id = base name without extension, domain \"text\"; - reads standard input (stream \"stdin\")."`
	Files    []string         `arg:"" optional:"" name:"file" help:"Text files to tokenize (with --text)."`
	UTF8     string           `name:"utf8" default:"strict" enum:"strict,replace" help:"Invalid UTF-8: strict (default) stops with its byte offset; replace writes U+FFFD for each bad byte and counts them."`
	Output   string           `short:"o" placeholder:"FILE" help:"Write to FILE instead of standard output (atomically; .zst compresses)."`
	CacheDir string           `placeholder:"DIR" help:"Cache of tokenized streams and the model's sha256 (default $$PPL_CACHE_DIR, else the user cache dir)."`
	NoCache  bool             `help:"Neither read nor write the cache: tokenize every stream and hash the model in full."`
	LogLevel string           `default:"info" enum:"debug,info,warn,error" help:"Least severe message to show on stderr: debug, info, warn, error."`
	Version  kong.VersionFlag `help:"Print the version and exit."`
}

const description = `Tokenize text with a GGUF model's tokenizer, exactly as llama.cpp does:
stage 1 of ppl-tokenize | ppl-window | ppl-score | ppl-aggregate. Writes a
tokenize header, then per stream a stream record and its tokens records (at most
65,536 ids each), and an end record.

Input is a corpus (--corpus MANIFEST [--quick] [--streams a,b]; every stream is
checked against the manifest's sha256 first) or text files (--text FILE...). BOS
and EOS are added once per stream as the model says; special-token text in the
input is tokenized as plain text.

Example:
  ppl-tokenize --model m.gguf --corpus eval/corpora/ppl-heldout-v1/manifest.json \
      --quick > tok.ndjson`

// Main runs ppl-tokenize with os.Args and returns its exit status.
func Main() int {
	return command.Exit(tool, run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr)
}

// source is one stream to tokenize.
type source struct {
	id, domain, origin string // origin: the manifest's source, or the file path
	file               string
	words              int64 // from the manifest; -1: count
	cs                 *corpus.Stream
}

// job is a validated command line.
type job struct {
	f       flags
	sources []source
	m       *corpus.Manifest
	header  *pipe.Corpus
	replace bool
	cache   *cache.Cache // nil with --no-cache
	stdin   []byte       // the text of --text -, read once
}

func parse(args []string, stdout, stderr io.Writer) (*job, error) {
	var f flags
	if err := command.Parse(tool, pipe.ToolVersion, description, &f, args, stdout, stderr); err != nil {
		return nil, err
	}
	j := &job{f: f, replace: f.UTF8 == "replace"}
	switch {
	case f.Corpus != "" && f.Text:
		return nil, command.Usagef("--corpus and --text exclude each other")
	case f.Corpus == "" && !f.Text:
		return nil, command.Usagef("nothing to tokenize: give --corpus MANIFEST or --text FILE...")
	case f.Text && len(f.Files) == 0:
		return nil, command.Usagef("--text: no files given")
	case !f.Text && len(f.Files) > 0:
		return nil, command.Usagef("unexpected argument %q: text files need --text", f.Files[0])
	case f.Text && (f.Quick || len(f.Streams) > 0):
		return nil, command.Usagef("--quick and --streams select corpus streams; they need --corpus")
	}
	if f.Text {
		seen := map[string]string{}
		for _, p := range f.Files {
			if p == "-" { // standard input: stream "stdin"
				if q, dup := seen["stdin"]; dup {
					return nil, command.Usagef("--text %s and %s: both would be stream %q", q, p, "stdin")
				}
				seen["stdin"] = p
				j.sources = append(j.sources, source{id: "stdin", domain: "text", origin: "<stdin>", file: "-", words: -1})
				continue
			}
			base := filepath.Base(p)
			id := strings.TrimSuffix(base, filepath.Ext(base))
			if id == "" || id == "." || id == string(filepath.Separator) {
				return nil, command.Usagef("--text %s: cannot name a stream after it", p)
			}
			if q, dup := seen[id]; dup {
				return nil, command.Usagef("--text %s and %s: both would be stream %q", q, p, id)
			}
			seen[id] = p
			j.sources = append(j.sources, source{id: id, domain: "text", origin: p, file: p, words: -1})
		}
		ids := make([]string, len(j.sources))
		for i, s := range j.sources {
			ids[i] = s.id
		}
		j.header = &pipe.Corpus{Name: "text", Streams: ids}
	}
	return j, nil
}

// loadCorpus reads the manifest, selects the streams and verifies each one
// against it before anything is written.
func (j *job) loadCorpus(log *progress.Log) error {
	if err := pipe.CheckRegular(j.f.Corpus); err != nil {
		return fmt.Errorf("--corpus: %w", err)
	}
	m, err := corpus.Load(j.f.Corpus)
	if err != nil {
		return err
	}
	var ids []string
	for _, s := range j.f.Streams {
		for _, id := range strings.Split(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	sel, err := m.Select(j.f.Quick, ids)
	if err != nil {
		return err
	}
	for _, s := range sel {
		if err := m.Verify(s); err != nil {
			return err
		}
		j.sources = append(j.sources, source{id: s.ID, domain: s.Domain, origin: s.Source, file: m.File(s), words: s.Words, cs: s})
	}
	log.Debugf("corpus %s version %s: %d of %d streams verified", m.Name, m.Version, len(sel), len(m.Streams))
	j.m = m
	j.header = &pipe.Corpus{Name: m.Name, Version: m.Version, Manifest: j.f.Corpus, Quick: j.f.Quick, Streams: ids}
	return nil
}

// headerFlags are the flags recorded in the header.
func (j *job) headerFlags() map[string]any {
	m := map[string]any{"model": j.f.Model, "utf8": j.f.UTF8}
	if j.f.Corpus != "" {
		m["corpus"] = j.f.Corpus
		if j.f.Quick {
			m["quick"] = true
		}
		if len(j.header.Streams) > 0 {
			m["streams"] = j.header.Streams
		}
	} else {
		m["text"] = j.f.Files
	}
	return m
}

// run is ppl-tokenize without the process: args are the command line
// without the program name.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	j, err := parse(args, stdout, stderr)
	if err != nil {
		return err
	}
	level, _ := progress.ParseLevel(j.f.LogLevel) // kong checked the enum
	log := progress.New(stderr, tool, level)
	defer log.Done()
	if j.f.Corpus != "" {
		if err := j.loadCorpus(log); err != nil {
			return err
		}
	}
	if err := j.checkOutput(); err != nil {
		return err
	}
	for _, src := range j.sources {
		if src.file == "-" && src.cs == nil {
			if j.stdin, err = io.ReadAll(stdin); err != nil {
				return fmt.Errorf("--text -: standard input: %w", err)
			}
		}
	}
	if err := j.precheck(); err != nil {
		return err
	}
	tok, model, err := j.open(log)
	if err != nil {
		return err
	}
	out := stdout
	var af *pipe.AtomicFile
	if j.f.Output != "" {
		if af, err = pipe.Create(j.f.Output); err != nil {
			return err
		}
		defer af.Close() // removes the file unless committed
		out = af
	}
	w := pipe.NewWriter(out, pipe.StageTokenize)
	if err := j.tokenize(ctx, log, tok, model, w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if af != nil {
		if err := af.Commit(); err != nil {
			return fmt.Errorf("write %s: %w", j.f.Output, err)
		}
	}
	return nil
}

// open loads the tokenizer and describes the model for the header.
func (j *job) open(log *progress.Log) (tokenizer.Tokenizer, *pipe.Model, error) {
	t0 := time.Now()
	f, err := gguf.Open(j.f.Model)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tok, err := tokenizer.Load(f)
	if err != nil {
		return nil, nil, err
	}
	model := &pipe.Model{Name: filepath.Base(j.f.Model)}
	model.Arch, _ = f.String("general.architecture")
	for _, t := range f.Tensors {
		model.Params += t.Elements()
	}
	var c *cache.Cache
	defer func() { j.cache = c }()
	if !j.f.NoCache {
		dir := j.f.CacheDir
		if dir == "" {
			dir, err = cache.DefaultDir()
		}
		if err == nil {
			c, err = cache.Open(dir)
		}
		if err != nil {
			log.Warnf("no cache (%v): hashing the model in full", err)
			c = nil
		}
	}
	if model.SHA256, err = c.FileSHA256(context.Background(), cache.LogHashing(log.Infof, model.Name), f.Shards...); err != nil {
		return nil, nil, err
	}
	pre := tok.Model()
	if tok.Model() == "gpt2" {
		pre += "/" + tok.Pre()
	}
	log.Infof("%s: %s tokenizer, %d tokens, add BOS %v, EOS %v, id %.12s (%v)",
		model.Name, pre, tok.NVocab(), tok.AddBOS(), tok.AddEOS(), tok.Identity(), time.Since(t0).Round(time.Millisecond))
	return tok, model, nil
}

func (j *job) tokenize(ctx context.Context, log *progress.Log, tok tokenizer.Tokenizer, model *pipe.Model, w *pipe.Writer) error {
	h := pipe.Header{
		Tool:    tool,
		Version: pipe.ToolVersion,
		Flags:   j.headerFlags(),
		Model:   model,
		Tokenizer: &pipe.Tokenizer{Model: tok.Model(), Pre: tok.Pre(), ID: tok.Identity(), NVocab: tok.NVocab(),
			AddBOS: tok.AddBOS(), AddEOS: tok.AddEOS(), BOS: tok.BOS()},
		Corpus: j.header,
	}
	if tok.Model() != "gpt2" {
		h.Tokenizer.Pre = ""
	}
	if err := w.Header(h); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	start := time.Now()
	var nBytes, nTokens int64
	hits := 0
	for i, src := range j.sources {
		if err := ctx.Err(); err != nil {
			return err
		}
		text, err := j.read(src)
		if err != nil {
			return err
		}
		st := pipe.Stream{ID: src.id, Domain: src.domain, Source: src.origin, SHA256: corpus.SHA256(text),
			Bytes: int64(len(text)), Words: src.words}
		if st.Words < 0 {
			st.Words = corpus.Words(text)
		}
		if j.replace {
			text, st.Replaced = tokenizer.Sanitize(text)
			if st.Replaced > 0 {
				log.Warnf("stream %q (%s): replaced %d invalid UTF-8 bytes with U+FFFD", src.id, src.file, st.Replaced)
			}
		}
		ids, hit, err := j.encode(log, tok, &st, text)
		if err != nil {
			return fmt.Errorf("stream %q (%s): %w%s", src.id, src.file, err, encodeHint(err, text))
		}
		if hit {
			hits++
		}
		st.NTokens = len(ids)
		if err := w.Stream(&st); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		for off := 0; off < len(ids); off += pipe.MaxTokensPerRecord {
			chunk := ids[off:min(off+pipe.MaxTokensPerRecord, len(ids))]
			if err := w.Tokens(&pipe.Tokens{Stream: src.id, Offset: off, IDs: chunk}); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		nBytes += st.Bytes
		nTokens += int64(len(ids))
		log.Debugf("stream %s: %d bytes, %d tokens", src.id, st.Bytes, len(ids))
		if i+1 < len(j.sources) {
			log.Progress(false, "%d/%d streams, %d tokens, %s left", i+1, len(j.sources), nTokens, progress.ETA(start, i+1, len(j.sources)))
		}
	}
	if err := w.End(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	log.Done()
	d := time.Since(start)
	log.Infof("%d streams (%d from the cache), %d bytes, %d tokens (%.2f bytes/token) in %v (%.1f MB/s)", len(j.sources), hits, nBytes, nTokens,
		float64(nBytes)/float64(max(nTokens, 1)), d.Round(time.Millisecond), float64(nBytes)/1e6/max(d.Seconds(), 1e-9))
	return nil
}

// encode tokenizes a stream's text, or replays it from the cache, keyed by
// the text's sha256, the tokenizer's identity, the UTF-8 mode and the tool
// version. A corrupt entry is reported and rebuilt.
func (j *job) encode(log *progress.Log, tok tokenizer.Tokenizer, st *pipe.Stream, text []byte) ([]int32, bool, error) {
	group, key := "tokenize/"+tok.Identity(), cache.Key("tokenize-stream", pipe.ToolVersion, tok.Identity(), j.f.UTF8, st.SHA256)
	if j.cache != nil {
		payload, ok, err := j.cache.Get(group, key)
		if err != nil {
			log.Warnf("stream %q: %v; tokenizing it again", st.ID, err)
		}
		if ok {
			ids, err := replayIDs(payload, tok.NVocab())
			if err == nil {
				return ids, true, nil
			}
			log.Warnf("stream %q: bad cache entry (%v): removed; tokenizing it again", st.ID, err)
			if err := j.cache.Remove(group, key); err != nil {
				log.Warnf("%v", err)
			}
		}
	}
	ids, err := tok.Encode(text)
	if err != nil {
		return nil, false, err
	}
	if j.cache != nil {
		b := make([]byte, 0, 8*len(ids)+2)
		b = append(b, '[')
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		if err := j.cache.Put(group, key, append(b, "]\n"...)); err != nil {
			return nil, false, err
		}
	}
	return ids, false, nil
}

// encodeHint says what may fix an encoding error: --utf8 replace helps
// only with invalid UTF-8, not with a vocabulary that lacks byte tokens.
func encodeHint(err error, text []byte) string {
	var be *spm.ByteError
	switch {
	case errors.As(err, &be):
		return "; the model's vocabulary has no byte-fallback tokens, so it cannot tokenize this text"
	case tokenizer.ValidUTF8(text) != nil:
		return "; fix the text or use --utf8 replace"
	}
	return ""
}

// replayIDs decodes a cache entry's ids and checks each is a token of the
// vocabulary, as ppl-score would.
func replayIDs(payload []byte, nVocab int) ([]int32, error) {
	if bytes.Contains(payload, []byte("null")) {
		return nil, errors.New("null id")
	}
	var ids []int32
	if err := sonic.Unmarshal(payload, &ids); err != nil {
		return nil, errors.New("unreadable")
	}
	for i, id := range ids {
		if id < 0 || int(id) >= nVocab {
			return nil, fmt.Errorf("ids[%d] = %d is not a token of the %d-token vocabulary", i, id, nVocab)
		}
	}
	return ids, nil
}

// checkOutput refuses an -o that is one of the inputs: the model, the
// manifest or a stream.
func (j *job) checkOutput() error {
	in := []string{j.f.Model, j.f.Corpus}
	for _, src := range j.sources {
		in = append(in, src.file)
	}
	if err := pipe.CheckNotInput(j.f.Output, in...); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}

// precheck reads every stream once before anything is written, so that a
// missing file or (with --utf8 strict) invalid UTF-8 stops the run with no
// output rather than halfway through it.
func (j *job) precheck() error {
	for _, src := range j.sources {
		if src.cs != nil && j.replace {
			continue // verified against the manifest already
		}
		text, err := j.read(src)
		if err != nil {
			return err
		}
		if len(text) == 0 {
			// Stop here rather than at the window or the score stage,
			// where an empty stream only shows as no windows.
			return fmt.Errorf("stream %q (%s): empty: there is no text to measure", src.id, src.file)
		}
		if !j.replace {
			if err := tokenizer.ValidUTF8(text); err != nil {
				return fmt.Errorf("stream %q (%s): %w; fix the text or use --utf8 replace", src.id, src.file, err)
			}
		}
	}
	return nil
}

// read returns a stream's text; corpus streams are checked again against
// the manifest as they are read.
func (j *job) read(src source) ([]byte, error) {
	if src.cs != nil {
		return j.m.Read(src.cs)
	}
	if src.file == "-" {
		return j.stdin, nil
	}
	if err := pipe.CheckRegular(src.file); err != nil { // not /dev/zero, not a FIFO
		return nil, fmt.Errorf("--text: %w", err)
	}
	b, err := os.ReadFile(src.file)
	if err != nil {
		return nil, fmt.Errorf("--text: %w", err)
	}
	return b, nil
}
