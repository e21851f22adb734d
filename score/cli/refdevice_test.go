package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"ppl.dev/command"
	"ppl.dev/pipe"
	"ppl.dev/score/backend"
	"ppl.dev/score/model"
)

// --reference-device and --reference-devices: every bad combination is a
// usage error naming the flag.
func TestReferenceDeviceUsage(t *testing.T) {
	ref := []string{"--model", "m.gguf", "--reference", "r.gguf"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "m.gguf", "--reference-device", "cuda:1"}, "--reference-device needs --reference"},
		{[]string{"--model", "m.gguf", "--devices", "0,1", "--reference-devices", "2,3"}, "--reference-devices needs --reference"},
		{append(ref, "--reference-device", "cuda:x"), `--reference-device: bad device "cuda:x"`},
		{append(ref, "--reference-device", "tpu:1"), "--reference-device tpu:1: no such device (have cpu, cuda, zgroup)"},
		{append(ref, "--reference-device", "auto"), "--reference-device auto: no such device"},
		{append(ref, "--device", "cpu", "--reference-device", "cuda:1"), "--reference-device cuda:1 with --device cpu: the reference must be on a device of the model's kind (cpu)"},
		{append(ref, "--device", "cuda:0", "--reference-device", "cpu"), "--reference-device cpu with --device cuda:0: the reference must be on a device of the model's kind (cuda)"},
		{append(ref, "--devices", "0,1", "--reference-device", "cuda:2"), "--reference-device cuda:2 names one device; with --devices give --reference-devices, one per engine"},
		{append(ref, "--reference-devices", "2,3"), "--reference-devices needs --devices (one reference device per engine); for one engine give --reference-device"},
		{append(ref, "--devices", "0,1", "--reference-devices", "2"), "--reference-devices 2: want 2 indices, one per engine of --devices 0,1"},
		{append(ref, "--devices", "0,1", "--reference-devices", "2,3,4"), "--reference-devices 2,3,4: want 2 indices, one per engine of --devices 0,1"},
		{append(ref, "--devices", "0,1", "--reference-devices", "2,x"), `--reference-devices 2,x: "x" is not a device index`},
	} {
		var out, errb bytes.Buffer
		err := runArgs(t, tc.args, nil, &out, &errb)
		var u command.UsageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error %q", tc.args, err, tc.want)
		}
	}
}

// fakeModel is a backend.Model that only describes its device.
type fakeModel struct {
	backend.Model
	dev backend.Device
}

func (f fakeModel) Device() backend.Device { return f.dev }
func (f fakeModel) Info() model.Info       { return model.Info{KVDtype: "bf16"} }

func gpu(name, kind string) fakeModel {
	return fakeModel{dev: backend.Device{Name: name, Activations: "fp16", Extra: map[string]any{"gpu": kind, "compute_capability": "9.0", "driver": "570", "cublas": "12"}}}
}

// A reference on another GPU: the header says where it ran, and the cache
// key is that of the same device unless the other GPU differs (another
// type), whose properties then enter the key and the header.
func TestReferenceDeviceKey(t *testing.T) {
	run := func(m fakeModel, refs ...fakeModel) *scorer {
		s := &scorer{f: flags{Model: "m.gguf", Reference: "r.gguf"}, m: &loaded{Model: m}, ref: &loaded{Model: refs[0]}, tokHeader: &pipe.Tokenizer{}}
		for _, r := range refs {
			s.engines = append(s.engines, engine{m: m, ref: r})
		}
		return s
	}
	same := run(gpu("cuda:0", "H200"), gpu("cuda:0", "H200"))
	apart := run(gpu("cuda:0", "H200"), gpu("cuda:1", "H200"))
	other := run(gpu("cuda:0", "H200"), gpu("cuda:1", "A100"))
	if same.cacheSettings() != apart.cacheSettings() {
		t.Errorf("a reference on another H200 changes the cache key:\n%s\n%s", same.cacheSettings(), apart.cacheSettings())
	}
	if other.cacheSettings() == apart.cacheSettings() || !strings.Contains(other.cacheSettings(), `"gpu":"A100"`) {
		t.Errorf("a reference on an A100 keeps the key of an H200's: %s", other.cacheSettings())
	}
	for _, tc := range []struct {
		s         *scorer
		device    string
		refGPU    any
		logPrefix string
	}{
		{same, "", nil, "reference r.gguf on the model's device (cuda:0)"},
		{apart, "cuda:1", nil, "reference r.gguf on cuda:1, the model on cuda:0: the two run at once"},
		{other, "cuda:1", "A100", "reference r.gguf on cuda:1, the model on cuda:0: the two run at once"},
	} {
		sc := tc.s.header().Score
		if sc.RefDevice != tc.device || sc.Extra["reference_gpu"] != tc.refGPU {
			t.Errorf("header: reference_device %q, reference_gpu %v; want %q, %v", sc.RefDevice, sc.Extra["reference_gpu"], tc.device, tc.refGPU)
		}
		if l := tc.s.refLine(); !strings.HasPrefix(l, tc.logPrefix) {
			t.Errorf("log %q, want %q", l, tc.logPrefix)
		}
	}
	// Two engines, each with its reference on another GPU.
	two := run(gpu("cuda:0", "H200"), gpu("cuda:4", "H200"), gpu("cuda:5", "H200"))
	if sc := two.header().Score; sc.RefDevice != "cuda:4,cuda:5" {
		t.Errorf("two engines: reference_device %q", sc.RefDevice)
	}
}

// A window replays only under the same numerics: the kernels' digest and
// Go's math library's (nn.GoMath) are part of the cache key.
func TestCacheKeyNumerics(t *testing.T) {
	for _, k := range []string{"kernels", "math"} {
		key := func(digest string) string {
			m := gpu("cuda:0", "H200")
			m.dev.Extra[k] = digest
			s := &scorer{f: flags{Model: "m.gguf"}, m: &loaded{Model: m}, tokHeader: &pipe.Tokenizer{}}
			return s.cacheSettings()
		}
		a, b := key("0123456789ab"), key("ba9876543210")
		if a == b || !strings.Contains(a, `"`+k+`":"0123456789ab"`) {
			t.Errorf("cache keys with other %s:\n%s\n%s", k, a, b)
		}
	}
}
