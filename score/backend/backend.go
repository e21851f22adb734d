// Package backend is where ppl-score finds the devices it can score on: each
// backend (the CPU reference here, CUDA in ppl.dev/score/cuda) registers
// itself by name, and the tool asks the registry, so adding a device
// touches no switch statement elsewhere.
//
// A backend loads a GGUF model onto one of its devices and scores windows
// with it. Every backend must give the CPU reference's numbers within the
// tolerances its parity tests state; the Device it reports (and the cache
// keys built from it) say which arithmetic produced a score.
package backend

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"

	"ppl.dev/score/model"
)

// Model is a model loaded on a device.
type Model interface {
	// Score runs tokens from an empty cache and scores targets
	// [scoreFrom, len(tokens)), as model.Model.Score.
	Score(tokens []int32, scoreFrom int) (*model.Result, error)
	// ScoreWith also scores against ref, a model of the same backend, as
	// model.Model.ScoreWith; on another device of it (another GPU) as
	// model.Model.ScoreWithApart, with the same numbers.
	ScoreWith(tokens []int32, scoreFrom int, ref Model) (*model.Result, error)
	// ScoreVisit is Score, and visit sees each target's logits on the
	// host, as model.Model.ScoreVisit.
	ScoreVisit(tokens []int32, scoreFrom int, visit func(j int, logits []float32)) (*model.Result, error)
	// Info describes the model and its settings.
	Info() model.Info
	// Vocab is the vocabulary size.
	Vocab() int
	// Device says where and how the model runs.
	Device() Device
	// Close releases the model.
	Close() error
}

// Device describes where a model runs, for result headers and cache keys.
type Device struct {
	Name        string         // "cpu", "cuda:0"
	Activations string         // the arithmetic of activations and products: "fp32", "bf16"
	Threads     int            // CPU worker threads; 0 on accelerators
	Extra       map[string]any // e.g. the GPU's name, driver and CUDA versions, memory
}

// Reporter is implemented by models that have something to say when a run
// ends (peak GPU memory, say).
type Reporter interface {
	Report() string
}

// Backend loads models onto its devices.
type Backend interface {
	// Open loads the model at path onto device index (0 for the CPU).
	Open(path string, opts model.Options, index int) (Model, error)
}

// Uploader is a model whose weights reach its device at the first window
// computed, not at load (the CUDA backend's: a rerun served by the cache
// copies nothing). Upload copies them now, once; later calls return the
// first's error.
type Uploader interface {
	Upload() error
}

// Grouper is a backend that loads a model on several of its devices at
// once (ppl-score --devices), one Model each, sharing what the devices can
// share: the CUDA backend keeps one copy of the weights per device, or,
// with spread or for a model larger than one device, one copy spread over
// all of them. Each Model scores as one loaded alone would.
type Grouper interface {
	OpenGroup(path string, opts model.Options, indices []int, spread bool) ([]Model, error)
}

var (
	mu       sync.RWMutex
	backends = map[string]Backend{}
)

// Register makes a backend available under name ("cpu", "cuda"). Backends
// call it from init.
func Register(name string, b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := backends[name]; dup {
		panic(fmt.Sprintf("backend: %q registered twice", name))
	}
	backends[name] = b
}

// Get returns the backend called name.
func Get(name string) (Backend, bool) {
	mu.RLock()
	defer mu.RUnlock()
	b, ok := backends[name]
	return b, ok
}

// Names lists the registered backends, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n := range backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var deviceRe = regexp.MustCompile(`^([a-z]+)(?::([0-9]+))?$`)

// ParseDevice splits a --device value ("cpu", "cuda", "cuda:1") into the
// backend name and device index (0 when absent).
func ParseDevice(s string) (name string, index int, err error) {
	m := deviceRe.FindStringSubmatch(s)
	if m == nil {
		return "", 0, fmt.Errorf("bad device %q (want auto, cpu, cuda or cuda:N)", s)
	}
	if m[2] != "" {
		index, err = strconv.Atoi(m[2])
		if err != nil || index > 1<<16 {
			return "", 0, fmt.Errorf("bad device index in %q", s)
		}
	}
	return m[1], index, nil
}
