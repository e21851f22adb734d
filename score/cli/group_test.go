package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/backend"
	"ppl.dev/score/model"
)

// groupBackend is a backend.Grouper over the CPU's models that records
// what ppl-score asks of it, for TestDevicesGroup; its models are
// backend.Uploaders that count their uploads.
type groupBackend struct {
	mu      sync.Mutex
	calls   []string
	uploads atomic.Int32
	gpus    []string // when set, the "gpu" its i-th model of a group says it has
}

// uploading is a CPU model with an Upload, and the gpu it may say it is.
type uploading struct {
	backend.Model
	g   *groupBackend
	gpu string
}

func (u uploading) Device() backend.Device {
	d := u.Model.Device()
	if u.gpu != "" {
		d.Extra = map[string]any{"gpu": u.gpu}
	}
	return d
}

func (u uploading) Upload() error {
	u.g.uploads.Add(1)
	return nil
}

func (u uploading) ScoreWith(tokens []int32, from int, ref backend.Model) (*model.Result, error) {
	return u.Model.ScoreWith(tokens, from, ref.(uploading).Model)
}

var grouper = &groupBackend{}

func init() { backend.Register("zgroup", grouper) }

func (g *groupBackend) record(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, s)
}

func (g *groupBackend) Open(path string, opts model.Options, index int) (backend.Model, error) {
	g.record(fmt.Sprintf("open %s on %d", filepath.Base(path), index))
	cpu, _ := backend.Get("cpu")
	return cpu.Open(path, opts, 0)
}

func (g *groupBackend) OpenGroup(path string, opts model.Options, indices []int, spread bool) ([]backend.Model, error) {
	g.record(fmt.Sprintf("group %s on %v spread %v", filepath.Base(path), indices, spread))
	cpu, _ := backend.Get("cpu")
	var ms []backend.Model
	for i := range indices {
		m, err := cpu.Open(path, opts, 0)
		if err != nil {
			return nil, err
		}
		u := uploading{Model: m, g: g}
		if i < len(g.gpus) {
			u.gpu = g.gpus[i]
		}
		ms = append(ms, u)
	}
	return ms, nil
}

// TestDevicesGroup: with --devices on a backend that loads groups
// (backend.Grouper: the CUDA backend), ppl-score loads the model and the
// reference each with one OpenGroup over the listed devices (the
// reference's over --reference-devices), passes --spread-weights on, opens
// nothing else, and writes what one engine writes. Before the first window
// computed it has every model copy its weights (backend.Uploader), saying
// so; a rerun served by the cache copies none. Engines that would compute
// differently (another GPU) are refused.
func TestDevicesGroup(t *testing.T) {
	dir := oracle.Require(t)
	stem := "tiny-llama-spm-q8_0"
	g, err := oracle.Read(oracle.Golden(dir, stem, "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	m := oracle.Model(dir, stem)
	in := pipeline(t, m, g, false)
	base := []string{"--model", m, "--reference", m, "--reference-kv-dtype", "f32"}
	var one, errb bytes.Buffer
	if err := runArgs(t, append(base, "--device", "cpu", "--no-cache"), in, &one, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	want := scoresOnly(t, one.Bytes())
	cache := []string{"--cache-dir", t.TempDir()}
	for _, tc := range []struct {
		args    []string
		calls   []string
		uploads int32
	}{
		{[]string{"--devices", "1,2,1", "--no-cache"}, []string{"group " + stem + ".gguf on [1 2 1] spread false", "group " + stem + ".gguf on [1 2 1] spread false"}, 6},
		{append([]string{"--devices", "1,2", "--reference-devices", "3,4", "--spread-weights"}, cache...), []string{"group " + stem + ".gguf on [1 2] spread true", "group " + stem + ".gguf on [3 4] spread true"}, 4},
		{append([]string{"--devices", "1,2", "--reference-devices", "3,4", "--spread-weights"}, cache...), []string{"group " + stem + ".gguf on [1 2] spread true", "group " + stem + ".gguf on [3 4] spread true"}, 0}, // from the cache
	} {
		grouper.calls = nil
		grouper.uploads.Store(0)
		var out, errb bytes.Buffer
		if err := runArgs(t, append(append(base, "--device", "zgroup"), tc.args...), in, &out, &errb); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, errb.String())
		}
		if !slices.Equal(grouper.calls, tc.calls) {
			t.Errorf("%v: the backend was asked %q, want %q", tc.args, grouper.calls, tc.calls)
		}
		if n := strings.Count(errb.String(), " engines: cpu"); n != 1 {
			t.Errorf("%v: the log names the engines %d times:\n%s", tc.args, n, errb.String())
		}
		copying := 0
		if tc.uploads > 0 {
			copying = 1
		}
		if n := grouper.uploads.Load(); n != tc.uploads {
			t.Errorf("%v: %d uploads, want %d", tc.args, n, tc.uploads)
		}
		if n := strings.Count(errb.String(), "ppl-score: copying the weights to cpu (once, at the first window computed)\nppl-score: weights copied in "); n != copying {
			t.Errorf("%v: the log says %d times that the weights are copied, want %d:\n%s", tc.args, n, copying, errb.String())
		}
		if !bytes.Equal(scoresOnly(t, out.Bytes()), want) {
			t.Errorf("%v: the scores differ from one engine's", tc.args)
		}
	}

	// Engines that would compute differently are refused.
	grouper.gpus = []string{"A", "A", "B"}
	defer func() { grouper.gpus = nil }()
	var out bytes.Buffer
	errb.Reset()
	err = runArgs(t, append(base, "--device", "zgroup", "--devices", "1,2,3", "--no-cache"), in, &out, &errb)
	const msg = "--devices: cpu would compute differently from cpu (gpu B, not A): a window's numbers must not depend on the engine that scores it; list devices of one kind"
	if err == nil || err.Error() != msg {
		t.Errorf("engines of two kinds: %v, want %q", err, msg)
	}
}
