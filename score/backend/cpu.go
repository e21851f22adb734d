package backend

import (
	"fmt"
	"runtime"

	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// The CPU reference (package model) as a backend: float32 activations and
// products, float64 where the reference uses it.
func init() { Register("cpu", cpuBackend{}) }

type cpuBackend struct{}

func (cpuBackend) Open(path string, opts model.Options, index int) (Model, error) {
	if index != 0 {
		return nil, fmt.Errorf("device cpu:%d: the CPU backend has one device", index)
	}
	m, err := model.Load(path, opts)
	if err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &CPU{Model: m, threads: threads}, nil
}

// CPU is a model.Model as a backend Model.
type CPU struct {
	*model.Model
	threads int
}

// ScoreWith scores against ref, which must be a CPU model too (the CPU is
// one device: the same-device path).
func (m *CPU) ScoreWith(tokens []int32, scoreFrom int, ref Model) (*model.Result, error) {
	r, ok := ref.(*CPU)
	if !ok {
		return nil, fmt.Errorf("reference model on %s, model on cpu: a reference must be on the CPU too", ref.Device().Name)
	}
	return m.Model.ScoreWith(tokens, scoreFrom, r.Model)
}

// Device reports the CPU, its threads and the activation mode, the digest
// of Go's math library on this machine (nn.GoMath), and for the int8 modes
// the ggml whose arithmetic they copy.
func (m *CPU) Device() Device {
	d := Device{Name: "cpu", Activations: m.Info().Activations, Threads: m.threads, Extra: map[string]any{"math": nn.GoMath()}}
	if d.Activations != model.ActFP32 {
		d.Extra["arithmetic"] = model.Int8Arithmetic
	}
	return d
}
