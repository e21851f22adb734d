package cli

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/bytedance/sonic"

	"ppl.dev/cache"
	"ppl.dev/command"
	"ppl.dev/gguf"
	"ppl.dev/pipe"
	"ppl.dev/progress"
	"ppl.dev/score/backend"
	_ "ppl.dev/score/cuda" // registers the cuda backend
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
	"ppl.dev/tokenize/tokenizer"
)

// scorer is one run of ppl-score: the models, the cache and the counters.
type scorer struct {
	f     flags
	log   *progress.Log
	cache *cache.Cache // nil with --no-cache

	m, ref  *loaded
	base    *kldBase       // --kld-base
	bw      *baseWriter    // --write-kld-base, from its first window
	proto   *pipe.Protocol // the windows'
	engines []engine       // the models on each device: engines[0] holds m and ref
	// group holds the models a backend loaded with the first (a
	// backend.Grouper's OpenGroup) until loadEngines makes them engines:
	// the model's ("model") and the reference's ("reference").
	group        map[string][]backend.Model
	uploaded     bool   // the engines' weights were copied to their devices (upload)
	backend      string // the resolved --device: "cpu", "cuda"
	devIndex     int
	work         windowRun          // the windows being scored, and the output waiting for them
	last         *pipe.StreamTokens // the stream being scored
	tokHeader    *pipe.Tokenizer    // from the tokenize header
	settingsKey  string             // every setting that changes numbers, for cache keys
	total        int                // windows in the input (this shard's), 0 when unknown
	warnings     []string           // about the settings, for the log and the header
	scored       int                // windows computed
	replayed     int                // windows from the cache
	targets      int                // targets written
	computed     int                // targets computed (not replayed)
	start        time.Time
	computedTime time.Duration
	cacheTime    time.Duration // in lookups, replays and writes
}

// loaded is a model, on the device --device chose, with its identity.
type loaded struct {
	backend.Model
	info     pipe.Model
	tok      tokenizer.Tokenizer
	bos      int32
	chunkBOS bool // llama-perplexity's BOS first in each chunk (Window.BOS)
}

func newScorer(f flags, stderr io.Writer) (*scorer, error) {
	level, _ := progress.ParseLevel(f.LogLevel) // kong checked the enum
	s := &scorer{f: f, log: progress.New(stderr, tool, level), start: time.Now()}
	if !f.NoCache {
		dir := f.CacheDir
		if dir == "" {
			d, err := cache.DefaultDir()
			if err != nil {
				return nil, err
			}
			dir = d
		}
		c, err := cache.Open(dir)
		if err != nil {
			return nil, err
		}
		s.cache = c
	}
	return s, nil
}

func (s *scorer) close() {
	s.work.stop()
	for _, e := range s.engines[min(1, len(s.engines)):] {
		e.close()
	}
	for _, ms := range s.group {
		for _, m := range ms {
			m.Close()
		}
	}
	if s.m != nil {
		s.m.Close()
	}
	if s.ref != nil {
		s.ref.Close()
	}
}

// run streams the input to out, scoring each window.
func (s *scorer) run(ctx context.Context, r *pipe.Reader, out io.Writer) error {
	w := pipe.NewWriter(out, pipe.StageScore)
	headers, first, err := readHeaders(r)
	if err != nil {
		return err
	}
	proto, err := s.checkUpstream(r, headers)
	if err != nil {
		return err
	}
	s.total = shardWindows(proto)
	s.proto = proto
	defer s.abortBase() // a failed run writes no --write-kld-base file
	if err := s.load(ctx, proto); err != nil {
		return err
	}
	s.warnings = s.contextWarnings(proto)
	s.warnings = append(s.warnings, unreadWarning(s.m)...)
	if s.ref != nil {
		s.warnings = append(s.warnings, unreadWarning(s.ref)...)
	}
	for _, m := range s.warnings {
		s.log.Warnf("warning: %s", m)
	}
	// Of this machine, not of the scores: logged, not in the header.
	for _, m := range []*loaded{s.m, s.ref} {
		if m != nil {
			if n := amxNotice(m.info.Name, m.Info(), m.Device().Activations, hostAMX()); n != "" {
				s.log.Warnf("warning: %s", n)
			}
		}
	}
	for _, h := range headers {
		if err := w.Pass(h); err != nil {
			return err
		}
	}
	if err := w.Header(s.header()); err != nil {
		return err
	}
	streams := pipe.NewStreams()
	for rec := first; ; {
		if err := s.record(ctx, r, rec, streams, w); err != nil {
			w.Flush()
			return err
		}
		rec, err = r.Next()
		if err != nil && ctx.Err() != nil {
			// Ctrl-C stopped the whole pipeline: upstream died mid-stream.
			s.settle(ctx, w)
			w.Flush()
			return s.interrupted()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			w.Flush()
			return err
		}
	}
	if err := s.settle(ctx, w); err != nil {
		w.Flush()
		return err
	}
	if err := s.closeBase(); err != nil {
		w.Flush()
		return err
	}
	if err := w.End(); err != nil {
		return err
	}
	s.report(true)
	s.log.Done()
	return w.Flush()
}

// readHeaders reads the leading header records and the first other one.
func readHeaders(r *pipe.Reader) ([]*pipe.Record, *pipe.Record, error) {
	var hs []*pipe.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return nil, nil, fmt.Errorf("%s: no records after the headers", r.Name())
		}
		if err != nil {
			return nil, nil, err
		}
		if rec.Header == nil {
			return hs, rec, nil
		}
		rec.Raw = append([]byte(nil), rec.Raw...)
		hs = append(hs, rec)
	}
}

// checkUpstream requires a tokenize and a window stage and no score stage,
// and returns the window protocol.
func (s *scorer) checkUpstream(r *pipe.Reader, hs []*pipe.Record) (*pipe.Protocol, error) {
	var proto *pipe.Protocol
	for _, h := range hs {
		switch h.Header.Stage {
		case pipe.StageTokenize:
			s.tokHeader = h.Header.Tokenizer
		case pipe.StageWindow:
			proto = h.Header.Protocol
		case pipe.StageScore:
			return nil, fmt.Errorf("%s:%d: input is already scored", r.Name(), h.Line)
		}
	}
	if s.tokHeader == nil {
		return nil, fmt.Errorf("%s: no tokenize header with a tokenizer: the input must come from ppl-tokenize | ppl-window", r.Name())
	}
	if proto == nil {
		return nil, fmt.Errorf("%s: no window header: pipe the tokens through ppl-window first", r.Name())
	}
	return proto, nil
}

// load opens the model (and the reference), checking their tokenizers.
func (s *scorer) load(ctx context.Context, proto *pipe.Protocol) error {
	opts, err := s.options(proto)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if s.m, err = s.open(ctx, s.f.Model, opts, s.openModel); err != nil {
		return err
	}
	if s.m.tok.Identity() != s.tokHeader.ID {
		return fmt.Errorf("%s: its tokenizer (%s, id %.12s) is not the one that made the tokens (%s, id %.12s): tokenize with this model",
			s.f.Model, describe(s.m.tok), s.m.tok.Identity(), s.tokHeader.Model, s.tokHeader.ID)
	}
	if s.f.Reference != "" {
		ropts := opts
		ropts.KVDtype = s.f.RefKVDtype
		if s.ref, err = s.open(ctx, s.f.Reference, ropts, s.openRef); err != nil {
			return err
		}
		if s.ref.tok.Identity() != s.m.tok.Identity() {
			return fmt.Errorf("--reference %s: its tokenizer (%s) differs from the model's (%s): KL divergence needs the same vocabulary",
				s.f.Reference, describe(s.ref.tok), describe(s.m.tok))
		}
	}
	if err := s.loadEngines(ctx, opts); err != nil {
		return err
	}
	if s.f.KLDBase != "" {
		if err := s.openKLDBase(ctx, proto); err != nil {
			return err
		}
	}
	if p := s.f.WriteKLDBase; p != "" {
		switch {
		case proto.Mode != "llama.cpp":
			return fmt.Errorf("--write-kld-base %s: llama-perplexity's files hold the chunks of the llama.cpp protocol; the windows are %s's: use ppl-window --protocol llama.cpp", p, proto.Mode)
		case proto.Shard != "":
			return fmt.Errorf("--write-kld-base %s: the file holds every chunk of the text; the windows are shard %s", p, proto.Shard)
		}
		if err := pipe.CheckNotInput(p, s.f.Input, s.f.Model); err != nil {
			return fmt.Errorf("--write-kld-base: %w", err)
		}
	}
	s.settingsKey = s.cacheSettings()
	s.log.Infof("loaded %s (%s, %d layers, %d-token vocabulary) in %s; KV cache %s, %s",
		filepath.Base(s.f.Model), s.m.info.Arch, s.m.Info().HParams.Layers, s.m.Vocab(), time.Since(t0).Round(time.Millisecond), s.m.Info().KVDtype, s.deviceLine())
	if s.ref != nil {
		s.log.Infof("%s", s.refLine())
	}
	return nil
}

// refLine says where the reference runs, for the log.
func (s *scorer) refLine() string {
	name := filepath.Base(s.f.Reference)
	if devs, _ := s.refDevice(); devs != "" {
		return fmt.Sprintf("reference %s on %s, the model on %s: the two run at once, the reference's logits copied to the model's device", name, devs, s.deviceNames())
	}
	where := "the model's device"
	if len(s.engines) > 1 {
		where = "each engine's device"
	}
	return fmt.Sprintf("reference %s on %s (%s): the two run one after the other", name, where, s.deviceNames())
}

func describe(t tokenizer.Tokenizer) string {
	if t.Pre() != "" {
		return t.Model() + "/" + t.Pre()
	}
	return t.Model()
}

// options maps the flags onto model options; YaRN's factor depends on the
// protocol's context.
func (s *scorer) options(proto *pipe.Protocol) (model.Options, error) {
	o := model.Options{Threads: s.f.Threads, KVDtype: s.f.KVDtype, Activations: s.f.Activations, RopeFreqBase: s.f.RopeFreqBase, RopeOrigCtx: s.f.RopeOrigCtx}
	if n := len(s.f.devices); n > 1 && s.f.Device == "cpu" {
		// CPU engines share the cores.
		o.Threads = max(1, cmp.Or(s.f.Threads, runtime.GOMAXPROCS(0))/n)
	}
	o.SSMStateDtype = s.f.SSMStateDtype
	o.Context = proto.Context
	switch {
	case s.f.RopeScaleFactor > 0:
		o.RopeScaling, o.RopeScaleFactor = "linear", s.f.RopeScaleFactor
	case s.f.RopeYarnFactor > 0:
		o.RopeScaling, o.RopeScaleFactor = "yarn", s.f.RopeYarnFactor
	case s.f.RopeYarn:
		native := s.f.RopeOrigCtx
		if native == 0 {
			f, err := gguf.Open(s.f.Model)
			if err != nil {
				return o, err
			}
			arch, _ := f.String("general.architecture")
			n, err := f.Uint(arch + ".context_length")
			f.Close()
			if err != nil {
				return o, fmt.Errorf("--rope-yarn: %w; give --rope-scaling-original-context", err)
			}
			native = int(n)
		}
		o.RopeScaling, o.RopeOrigCtx = "yarn", native
		o.RopeScaleFactor = max(1, float64(proto.Context)/float64(native))
	}
	return o, nil
}

// open loads the model at path with on (openOn, or openRef for the
// reference) and reads its identity.
func (s *scorer) open(ctx context.Context, path string, opts model.Options, on func(string, model.Options) (backend.Model, error)) (*loaded, error) {
	// A model is read at random: a FIFO or a device would block the
	// open (and Ctrl-C with it) waiting for a writer.
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file: a model must be a GGUF file", path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	meta := metadata(f)
	tok, err := tokenizer.Load(f)
	shards := f.Shards
	f.Close()
	if err != nil {
		return nil, err // it names the file
	}
	if len(shards) > 1 {
		s.log.Infof("%s: a model split into %d shards", filepath.Base(path), len(shards))
	}
	sum, err := s.cache.FileSHA256(ctx, cache.LogHashing(s.log.Infof, filepath.Base(path)), shards...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted while hashing %s: nothing was scored", path)
		}
		return nil, err
	}
	m, err := s.openCtx(ctx, path, func() (backend.Model, error) { return on(path, opts) })
	if err != nil {
		return nil, err
	}
	info := m.Info()
	meta.Name, meta.SHA256, meta.Arch, meta.WeightTypes = filepath.Base(path), sum, info.Arch, info.WeightTypes
	if abs, err := filepath.Abs(path); err == nil {
		// For ppl-cache: its score/<sha256> group shown and pruned by name.
		if err := s.cache.RememberModel(cache.ModelInfo{SHA256: sum, Name: meta.Name, Path: abs, GeneralName: meta.GeneralName}); err != nil {
			s.log.Warnf("%v", err)
		}
	}
	return &loaded{Model: m, tok: tok, bos: tok.BOS(), chunkBOS: tok.ChunkBOS(), info: meta}, nil
}

// metadata reads the model's name and dimensions from its GGUF metadata,
// for the header and the report; a key the file lacks stays zero.
func metadata(f *gguf.File) pipe.Model {
	var m pipe.Model
	m.GeneralName, _ = f.String("general.name")
	arch, _ := f.String("general.architecture")
	get := func(key string) int {
		n, err := f.Uint(arch + "." + key)
		if err != nil {
			return 0
		}
		return int(n)
	}
	m.Layers, m.Embedding, m.Heads = get("block_count"), get("embedding_length"), get("attention.head_count")
	m.KVHeads, m.ContextLength = get("attention.head_count_kv"), get("context_length")
	return m
}

// openCtx runs open, a model's load, and returns at once when ctx is
// cancelled: a backend reads and converts gigabytes without looking at a
// context, so the load goes on in a goroutine that the exiting process
// abandons.
func (s *scorer) openCtx(ctx context.Context, path string, open func() (backend.Model, error)) (backend.Model, error) {
	type result struct {
		m   backend.Model
		err error
	}
	c := make(chan result, 1)
	go func() {
		m, err := open()
		c <- result{m, err}
	}()
	select {
	case r := <-c:
		return r.m, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("interrupted while loading %s: nothing was scored", path)
	}
}

// openModel loads the model on the device --device names (openOn).
func (s *scorer) openModel(path string, opts model.Options) (backend.Model, error) {
	return s.openOn("model", path, opts)
}

// openOn loads a model, role's, on the device --device names. The first
// call resolves auto: a CUDA GPU when one is usable, else the CPU, with a
// notice saying why; the reference model then goes where the model went.
// With --devices it loads on all of them at once when the backend shares
// between them (openGroup).
func (s *scorer) openOn(role, path string, opts model.Options) (backend.Model, error) {
	if s.backend == "" {
		if s.f.Device == "auto" {
			if b, ok := backend.Get("cuda"); ok {
				m, err := b.Open(path, opts, 0)
				if err == nil {
					s.backend = "cuda"
					return m, nil
				}
				s.log.Infof("not scoring on a GPU (%v); scoring on the CPU", err)
			}
			s.backend = "cpu"
		} else {
			name, index, err := backend.ParseDevice(s.f.Device)
			if err != nil {
				return nil, command.Usagef("--device %s: %v", s.f.Device, err)
			}
			s.backend, s.devIndex = name, index
			if len(s.f.devices) > 0 {
				s.devIndex = s.f.devices[0]
			}
		}
	}
	b, ok := backend.Get(s.backend)
	if !ok {
		return nil, command.Usagef("--device %s: no such device (have auto, %s)", s.f.Device, strings.Join(backend.Names(), ", "))
	}
	if len(s.f.devices) > 1 {
		if _, ok := b.(backend.Grouper); ok {
			return s.openGroup(role, "--devices "+s.f.Devices, path, opts, s.f.devices)
		}
	}
	m, err := b.Open(path, opts, s.devIndex)
	if err != nil && s.backend != "cpu" {
		return nil, fmt.Errorf("--device %s: %w", s.f.Device, err)
	}
	return m, err
}

// openRef loads the reference model on --reference-device (with --devices,
// on --reference-devices' first), which must be of the model's kind; by
// default on the model's device.
func (s *scorer) openRef(path string, opts model.Options) (backend.Model, error) {
	switch {
	case len(s.f.refDevices) > 0:
		b, _ := backend.Get(s.backend) // the model's: it exists
		if _, ok := b.(backend.Grouper); ok {
			return s.openGroup("reference", "--reference-devices "+s.f.RefDevices, path, opts, s.f.refDevices)
		}
		return s.openAt("--reference-devices", path, opts, s.f.refDevices[0])
	case s.f.RefDevice != "":
		name, index, _ := backend.ParseDevice(s.f.RefDevice) // validated
		if name != s.backend {
			return nil, command.Usagef("--reference-device %s: the model is on %s (--device %s): the reference must be on a device of the model's kind", s.f.RefDevice, s.m.Device().Name, s.f.Device)
		}
		return s.openAt("--reference-device", path, opts, index)
	}
	return s.openOn("reference", path, opts)
}

// openGroup loads the model at path on every device of indices (flag,
// with its value, lists them) at once, through the backend's OpenGroup
// (engines on one device share its copy of the weights; --spread-weights,
// or a model larger than one device, spreads one copy over all), and keeps
// all but the first model for loadEngines under role.
func (s *scorer) openGroup(role, flag, path string, opts model.Options, indices []int) (backend.Model, error) {
	b, _ := backend.Get(s.backend)
	ms, err := b.(backend.Grouper).OpenGroup(path, opts, indices, s.f.SpreadWeights)
	if err != nil {
		return nil, fmt.Errorf("%s: %s on %s: %w", flag, path, s.backend, err)
	}
	if s.group == nil {
		s.group = map[string][]backend.Model{}
	}
	s.group[role] = ms[1:]
	return ms[0], nil
}

// deviceLine describes where the model runs, for the log.
func (s *scorer) deviceLine() string {
	d := s.m.Device()
	if d.Threads > 0 {
		line := fmt.Sprintf("%d threads, %v kernels, %s activations", d.Threads, nn.CurrentLevel(), d.Activations)
		if d.Activations != model.ActFP32 && !nn.CurrentLevel().IntegerVectors() {
			line += " (their integer products in plain Go on this CPU: far slower than fp32)"
		}
		return line
	}
	if g, ok := d.Extra["gpu"]; ok {
		line := fmt.Sprintf("%s (%v), %s activations", d.Name, g, d.Activations)
		if w, ok := d.Extra["weight_storage"]; ok { // which matrices stay quantized, which take a host copy
			line += fmt.Sprintf(", weights %v", w)
		}
		return line
	}
	return d.Name
}

// header is ppl-score's header record.
func (s *scorer) header() pipe.Header {
	info, dev := s.m.Info(), s.m.Device()
	if len(s.engines) > 1 {
		dev.Name = s.deviceNames()
	}
	sc := &pipe.Score{Tokenizer: s.tokHeader.ID, Device: dev.Name, Threads: dev.Threads, KVDtype: info.KVDtype, Activations: dev.Activations, RoPE: ropeMap(info.Rope), ALiBi: info.ALiBi, Extra: dev.Extra}
	sc.SSMStateDtype = info.SSMStateDtype
	sc.Warnings = s.warnings
	if s.base != nil {
		ref := s.base.info
		sc.Reference = &ref
	}
	if s.ref != nil {
		ref := s.ref.info
		sc.Reference, sc.RefKVDtype = &ref, s.ref.Info().KVDtype
		var differs map[string]any
		sc.RefDevice, differs = s.refDevice()
		if differs != nil {
			extra := map[string]any{} // the model's own map stays as it is
			maps.Copy(extra, sc.Extra)
			sc.Extra = extra
			for k, v := range differs {
				sc.Extra["reference_"+k] = v
			}
		}
	}
	m := s.m.info
	return pipe.Header{Tool: tool, Version: pipe.ToolVersion, Flags: s.headerFlags(), Model: &m, Score: sc}
}

func ropeMap(r model.RopeInfo) map[string]any {
	if r == (model.RopeInfo{}) {
		return nil
	}
	var m map[string]any
	b, _ := sonic.Marshal(r)
	sonic.Unmarshal(b, &m)
	return m
}

// headerFlags records the flags that were given.
func (s *scorer) headerFlags() map[string]any {
	m := map[string]any{"model": s.f.Model, "kv_dtype": s.f.KVDtype, "device": s.f.Device}
	if s.f.Devices != "" {
		m["devices"] = s.f.Devices
	}
	if s.f.Reference != "" {
		m["reference"], m["reference_kv_dtype"] = s.f.Reference, s.f.RefKVDtype
	}
	if s.f.RefDevice != "" {
		m["reference_device"] = s.f.RefDevice
	}
	if s.f.KLDBase != "" {
		m["kld_base"] = s.f.KLDBase
	}
	if s.f.WriteKLDBase != "" {
		m["write_kld_base"] = s.f.WriteKLDBase
	}
	if s.f.RefDevices != "" {
		m["reference_devices"] = s.f.RefDevices
	}
	if s.f.Threads > 0 {
		m["threads"] = s.f.Threads
	}
	if s.f.Activations != "fp32" {
		m["activations"] = s.f.Activations
	}
	if s.f.SSMStateDtype != "f32" {
		m["ssm_state_dtype"] = s.f.SSMStateDtype
	}
	for k, v := range map[string]float64{"rope_freq_base": s.f.RopeFreqBase, "rope_scaling_factor": s.f.RopeScaleFactor, "rope_yarn_factor": s.f.RopeYarnFactor} {
		if v != 0 {
			m[k] = v
		}
	}
	if s.f.RopeYarn {
		m["rope_yarn"] = true
	}
	if s.f.RopeOrigCtx != 0 {
		m["rope_scaling_original_context"] = s.f.RopeOrigCtx
	}
	return m
}

// numerics are the properties of a device (its Extra) that decide a
// window's numbers besides the settings (pipe.ExtraArithmetic and
// pipe.ExtraMachine: on an accelerator the products' precision, the weight
// storage, the device, its driver and libraries, the kernels' digest and
// the attention kernel chosen; in the CPU's int8 modes the ggml whose
// arithmetic they copy; everywhere the digest of Go's math library,
// nn.GoMath). A window replays from the cache only under the same ones,
// and the engines of --devices must all have the same (loadEngines).
var numerics = append(append([]string(nil), pipe.ExtraArithmetic...), pipe.ExtraMachine...)

// differs names the first of a device's Activations and numerics in which b
// differs from a ("gpu NVIDIA A100-SXM4-80GB, not NVIDIA H200"), or "".
func differs(a, b backend.Device) string {
	if a.Activations != b.Activations {
		return fmt.Sprintf("activations %s, not %s", b.Activations, a.Activations)
	}
	for _, k := range numerics {
		if va, vb := fmt.Sprint(a.Extra[k]), fmt.Sprint(b.Extra[k]); va != vb {
			return fmt.Sprintf("%s %s, not %s", k, vb, va)
		}
	}
	return ""
}

// cacheSettings is everything besides the tokens that decides a window's
// scores: a key part for the cache.
func (s *scorer) cacheSettings() string {
	info, dev := s.m.Info(), s.m.Device()
	kind, _, _ := strings.Cut(dev.Name, ":") // cuda:0 and cuda:1 compute alike
	key := map[string]any{
		"tool": pipe.ToolVersion, "revision": model.Revision, "model": s.m.info.SHA256, "kv": info.KVDtype, "rope": info.Rope,
		"device": kind, "activations": dev.Activations, "precision": dev.Extra["precision"], "ref": s.refKey(),
	}
	for _, k := range numerics {
		if v, ok := dev.Extra[k]; ok {
			key[k] = v
		}
	}
	addSSM(key, info)
	b, _ := sonic.ConfigStd.Marshal(key)
	return string(b)
}

func (s *scorer) refKey() any {
	if s.base != nil {
		return map[string]any{"kld_base": s.base.info.SHA256}
	}
	if s.ref == nil {
		return nil
	}
	info := s.ref.Info()
	key := map[string]any{"model": s.ref.info.SHA256, "kv": info.KVDtype, "rope": info.Rope}
	addSSM(key, info)
	// A reference on another GPU of the same kind, driver and libraries
	// computes what it would on the model's (its logits are copied to the
	// model's GPU bit for bit and scored there): the key stays that of the
	// same device, and such a run replays the other's windows. A GPU that
	// differs puts its properties in the key.
	_, differs := s.refDevice()
	for k, v := range differs {
		key[k] = v
	}
	return key
}

// refNumerics are the properties of a reference's device that can change
// its numbers when it runs apart from the model (the kernels' choice and
// cuBLAS's algorithms depend on them).
var refNumerics = []string{"gpu", "compute_capability", "driver", "cublas"}

// refDevice says where the reference runs when not on the model's device
// (of every engine): its devices' names ("cuda:1", "cuda:4,cuda:5"), and
// those of its device's refNumerics that differ from the model's device's;
// "" and nil when it runs beside the model.
func (s *scorer) refDevice() (string, map[string]any) {
	if s.ref == nil {
		return "", nil
	}
	apart := false
	names := make([]string, len(s.engines))
	for i, e := range s.engines {
		names[i] = e.ref.Device().Name
		apart = apart || names[i] != e.m.Device().Name
	}
	if !apart {
		return "", nil
	}
	var differs map[string]any
	md, rd := s.m.Device(), s.ref.Device()
	for _, k := range refNumerics {
		if v, ok := rd.Extra[k]; ok && fmt.Sprint(v) != fmt.Sprint(md.Extra[k]) {
			if differs == nil {
				differs = map[string]any{}
			}
			differs[k] = v
		}
	}
	return strings.Join(names, ","), differs
}

// addSSM adds the recurrent state dtype to a cache key, for models with
// recurrent layers only (the keys of others stay as they were).
func addSSM(key map[string]any, info model.Info) {
	if info.SSMStateDtype != "" {
		key["ssm"] = info.SSMStateDtype
	}
}

// record handles one input record after the headers.
func (s *scorer) record(ctx context.Context, r *pipe.Reader, rec *pipe.Record, streams *pipe.Streams, w *pipe.Writer) error {
	st, err := streams.Add(rec)
	if err != nil {
		return r.Errorf("%v", err)
	}
	if rec.Stream != nil && s.last != nil {
		s.last.Release() // windows follow their stream's tokens: the previous stream is done
	}
	if st != nil {
		s.last = st
	}
	if err := s.pass(w, rec); err != nil {
		return err
	}
	if rec.End != nil && rec.End.Stage == pipe.StageTokenize {
		if err := streams.CheckComplete(); err != nil {
			return r.Errorf("%v", err)
		}
	}
	if rec.Window == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.settle(ctx, w) // what the engines are scoring is kept, and written when it can be
		return s.interrupted()
	}
	j, err := s.window(r, rec.Window, streams)
	if err != nil {
		return err
	}
	return s.submit(ctx, w, j)
}

// written is the error of a failed write of output.
func (s *scorer) written(ctx context.Context, err error) error {
	command.Settle(ctx, err) // an interrupt before the reader left has cancelled ctx by now
	if ctx.Err() != nil {
		// Ctrl-C stopped the whole pipeline: downstream is gone, and what
		// matters is what was kept.
		s.keep()
		return s.interrupted()
	}
	return fmt.Errorf("write: %w", err)
}

// interrupted is the error of a run stopped by SIGINT or SIGTERM: what was
// kept and how to resume.
func (s *scorer) interrupted() error {
	s.log.Done()
	if s.cache == nil {
		return fmt.Errorf("interrupted after %d windows (%d scored, %d from the cache); with --no-cache nothing was kept",
			s.scored+s.replayed, s.scored, s.replayed)
	}
	return fmt.Errorf("interrupted after %d windows (%d scored, %d from the cache); they are cached: rerun the same command to resume",
		s.scored+s.replayed, s.scored, s.replayed)
}

// window prepares one window's job: its scores from the cache when it can,
// else the tokens to score.
func (s *scorer) window(r *pipe.Reader, win *pipe.Window, streams *pipe.Streams) (*job, error) {
	st, ok := streams.Get(win.Stream)
	if !ok {
		return nil, r.Errorf("window %d of unknown stream %q", win.Index, win.Stream)
	}
	if !st.Complete() || win.End > st.NTokens {
		return nil, r.Errorf("window %d of stream %q: [%d,%d) beyond the tokens read", win.Index, win.Stream, win.Begin, win.End)
	}
	if len(st.IDs) != st.NTokens {
		return nil, r.Errorf("window %d of stream %q comes after the next stream began: windows must follow their stream's tokens, as ppl-window writes them", win.Index, win.Stream)
	}
	tokens := append([]int32(nil), st.IDs[win.Begin:win.End]...)
	if win.BOS && s.m.chunkBOS {
		tokens[0] = s.m.bos
	}
	from := win.ScoreFrom - win.Begin
	key := s.windowKey(tokens, from)
	group := "score/" + s.m.info.SHA256
	sc := &pipe.Scores{Stream: win.Stream, Index: win.Index, Begin: win.Begin, End: win.End, ScoreFrom: win.ScoreFrom, BOS: win.BOS}
	if s.cache != nil && s.f.WriteKLDBase == "" { // the file needs every window's logits
		t0 := time.Now()
		payload, ok, err := s.cache.Get(group, key)
		if err != nil {
			s.log.Warnf("%v; scoring the window again", err)
		}
		if ok && !s.fromCache(payload, sc) {
			ok = false
			if err := s.cache.Remove(group, key); err != nil {
				s.log.Warnf("%v", err)
			}
		}
		s.cacheTime += time.Since(t0)
		if ok {
			s.replayed++
			s.targets += len(sc.Logprobs)
			return &job{sc: sc, done: true}, nil
		}
	}
	j := &job{sc: sc, tokens: tokens, from: from, group: group, key: key}
	var err error
	switch {
	case s.base != nil:
		err = s.baseJob(j, win, st.IDs[win.Begin:win.End])
	case s.f.WriteKLDBase != "":
		err = s.writeJob(j, win, st, s.proto)
	}
	if err != nil {
		return nil, r.Errorf("%v", err)
	}
	return j, nil
}

// finish takes a computed window's results: counts them and caches them.
func (s *scorer) finish(j *job) error {
	sc := j.sc
	if j.err != nil {
		return fmt.Errorf("window %d of %s [%d,%d): %w", sc.Index, sc.Stream, sc.Begin, sc.End, j.err)
	}
	// Engines score side by side: the time a window takes them together.
	s.computedTime += j.dur / time.Duration(len(s.engines))
	res := j.res
	sc.Logprobs, sc.Argmax, sc.KLD, sc.RefLogprobs, sc.Top1Agree = res.Logprobs, res.Argmax, res.KLD, res.RefLogprobs, res.Top1Agree
	s.scored++
	s.targets += len(sc.Logprobs)
	s.computed += len(sc.Logprobs)
	if s.cache != nil {
		t0 := time.Now()
		if err := s.toCache(j.group, j.key, sc); err != nil {
			return err
		}
		s.cacheTime += time.Since(t0)
	}
	j.done = true
	return nil
}

// windowKey hashes the settings, the tokens and where scoring starts.
func (s *scorer) windowKey(tokens []int32, from int) string {
	b := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
	}
	return cache.Key("score-window", s.settingsKey, fmt.Sprint(from), string(b))
}

// cached is what the cache keeps of a window: the results only, since the
// same tokens may come back under another stream or index.
type cached struct {
	Logprobs    []float64 `json:"logprobs"`
	Argmax      []int32   `json:"argmax"`
	KLD         []float64 `json:"kld,omitempty"`
	RefLogprobs []float64 `json:"ref_logprobs,omitempty"`
	Top1Agree   []bool    `json:"top1_agree,omitempty"`
}

// fromCache fills sc from a cache entry after checking it as the reader
// checks a scores record (one finite log-prob <= 0 and one argmax per
// target, ...) and that it holds the reference fields exactly when there is
// a reference model; a bad entry is reported and false returned.
func (s *scorer) fromCache(payload []byte, sc *pipe.Scores) bool {
	var c cached
	err := sonic.Unmarshal(payload, &c)
	if err == nil {
		sc.Logprobs, sc.Argmax, sc.KLD, sc.RefLogprobs, sc.Top1Agree = c.Logprobs, c.Argmax, c.KLD, c.RefLogprobs, c.Top1Agree
		err = s.checkReplay(sc)
	}
	if err != nil {
		sc.Logprobs, sc.Argmax, sc.KLD, sc.RefLogprobs, sc.Top1Agree = nil, nil, nil, nil, nil
		s.log.Warnf("bad cache entry for window %d of %s (%v): removed; scoring it again", sc.Index, sc.Stream, err)
		return false
	}
	return true
}

func (s *scorer) checkReplay(sc *pipe.Scores) error {
	if sc.Logprobs == nil || sc.Argmax == nil {
		return errors.New("no logprobs or argmax")
	}
	withRef := s.ref != nil || s.base != nil
	if (sc.KLD != nil) != withRef || (sc.RefLogprobs != nil) != withRef || (sc.Top1Agree != nil) != withRef {
		return errors.New("reference fields do not match the run")
	}
	if err := pipe.CheckScores(sc); err != nil {
		return err
	}
	for j, a := range sc.Argmax {
		if int(a) >= s.m.Vocab() {
			return fmt.Errorf("argmax[%d] = %d is beyond the vocabulary of %d", j, a, s.m.Vocab())
		}
	}
	return nil
}

func (s *scorer) toCache(group, key string, sc *pipe.Scores) error {
	b, err := sonic.Marshal(cached{sc.Logprobs, sc.Argmax, sc.KLD, sc.RefLogprobs, sc.Top1Agree})
	if err != nil {
		return err
	}
	return s.cache.Put(group, key, b)
}

// contextWarnings warns of a context beyond the model's training context
// without RoPE scaling (positions past it were never trained: PPL says
// little about the model), and of a YaRN flag that changes nothing at a
// context within it.
func (s *scorer) contextWarnings(p *pipe.Protocol) []string {
	native := s.m.info.ContextLength
	if s.f.RopeOrigCtx > 0 {
		native = s.f.RopeOrigCtx
	}
	if native <= 0 {
		return nil
	}
	scaled := s.f.RopeScaleFactor > 0 || s.f.RopeYarn || s.f.RopeYarnFactor > 0
	switch {
	case p.Context > native && !scaled:
		return []string{fmt.Sprintf("context %d is beyond the model's training context %d: positions past %d are extrapolated; scale RoPE with --rope-yarn (YaRN, factor %d/%d) or --rope-scaling-factor %g (linear)",
			p.Context, native, native, p.Context, native, float64(p.Context)/float64(native))}
	case p.Context <= native && s.f.RopeYarn:
		return []string{fmt.Sprintf("--rope-yarn changes nothing: context %d is within the training context %d, so the YaRN factor is 1", p.Context, native)}
	}
	return nil
}

// unreadWarning warns of the tensors of m's file that its architecture
// does not read (model.Info.Unread): ones llama.cpp may compute with, or
// that it refuses the file for.
func unreadWarning(m *loaded) []string {
	u := m.Info().Unread
	if len(u) == 0 {
		return nil
	}
	list := strings.Join(u[:min(len(u), 4)], ", ")
	if len(u) > 4 {
		list += fmt.Sprintf(" and %d more", len(u)-4)
	}
	return []string{fmt.Sprintf("%s: %d tensors that ppl's %s does not read (%s): llama.cpp 0.7.0 computes with them, or refuses the file", m.info.Name, len(u), m.Info().Arch, list)}
}

// shardWindows is how many windows the input holds, from the window
// header's count (of every shard's windows) and the shard; 0 when the
// header does not say (ppl-window read a pipe).
func shardWindows(p *pipe.Protocol) int {
	k, n, ok := parseShard(p.Shard)
	switch {
	case p.Windows <= 0:
		return 0
	case !ok:
		return p.Windows
	case p.Split != nil && len(p.Split.Windows) == n:
		return p.Split.Windows[k-1]
	default: // round-robin: the windows of global ordinal g with g%n == k-1
		return max(0, (p.Windows-k+n)/n)
	}
}

// parseShard reads "k/n"; ok is false for no shard or a malformed one.
func parseShard(s string) (k, n int, ok bool) {
	if _, err := fmt.Sscanf(s, "%d/%d", &k, &n); err != nil || k < 1 || k > n {
		return 0, 0, false
	}
	return k, n, true
}

// report shows progress: windows done of the total (when the window header
// gives it), throughput of computed windows, elapsed and time left.
func (s *scorer) report(final bool) {
	done := s.scored + s.replayed
	var msg string
	if final {
		rate := 0.0
		if sec := s.computedTime.Seconds(); sec > 0 {
			rate = float64(s.computed) / sec
		}
		msg = fmt.Sprintf("%d windows (%d scored, %d from the cache), %d targets, %.0f targets/s scored, %s elapsed",
			done, s.scored, s.replayed, s.targets, rate, time.Since(s.start).Round(time.Second))
	} else {
		msg = s.progressLine(done)
	}
	if final {
		s.log.Done()
		s.log.Infof("%s", msg)
		if s.cache != nil {
			s.log.Infof("window cache: %s in lookups, replays and writes (%.2f%% of the run)",
				s.cacheTime.Round(time.Microsecond), 100*s.cacheTime.Seconds()/time.Since(s.start).Seconds())
		}
		if r, ok := s.m.Model.(backend.Reporter); ok && s.scored > 0 {
			s.log.Infof("%s", r.Report())
			if devs, _ := s.refDevice(); devs != "" {
				if r, ok := s.ref.Model.(backend.Reporter); ok {
					s.log.Infof("reference: %s", r.Report())
				}
			}
		}
		return
	}
	s.log.Progress(false, "%s", msg)
}

// progressLine is the transient line, the most useful facts first, since
// a narrow terminal cuts the end off: "12/59 windows, 1m10s left, 24s
// elapsed, 652 targets/s, 3 from the cache".
func (s *scorer) progressLine(done int) string {
	var b strings.Builder
	if s.total > 0 {
		fmt.Fprintf(&b, "%d/%d windows", done, s.total)
	} else {
		fmt.Fprintf(&b, "%d windows", done) // from a pipe: the total is unknown
	}
	if s.total > 0 && s.scored > 0 && done < s.total {
		// The windows left cost what the computed ones did.
		left := time.Duration(float64(s.computedTime) / float64(s.scored) * float64(s.total-done))
		fmt.Fprintf(&b, ", %s left", left.Round(time.Second))
	}
	fmt.Fprintf(&b, ", %s elapsed, %s", time.Since(s.start).Round(time.Second), progress.Rate(s.computed, s.computedTime, "targets"))
	if s.replayed > 0 {
		fmt.Fprintf(&b, ", %d from the cache", s.replayed)
	}
	return b.String()
}
