package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"ppl.dev/command"
	"ppl.dev/oracle"
	"ppl.dev/score/cuda"
)

// --device: usage errors, and on machines without a GPU the error of
// --device cuda and the CPU fallback of auto, with its notice.
func TestDevice(t *testing.T) {
	for _, dev := range []string{"gpu", "cuda:", "cuda:x", "CPU"} {
		var out, errb bytes.Buffer
		err := runArgs(t, []string{"--model", "m.gguf", "--device", dev}, nil, &out, &errb)
		var u command.UsageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), "--device") {
			t.Errorf("--device %s: %v, want a usage error naming --device", dev, err)
		}
	}

	dir := oracle.Require(t)
	_, gpuErr := cuda.Open(0)
	g, err := oracle.Read(oracle.Golden(dir, "tiny-llama-spm-q8_0", "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	model := oracle.Model(dir, "tiny-llama-spm-q8_0")
	in := pipeline(t, model, g, false)
	var out, errb bytes.Buffer
	err = runArgs(t, []string{"--model", model, "--device", "cuda", "--no-cache"}, in, &out, &errb)
	if gpuErr == nil {
		if err != nil {
			t.Fatalf("--device cuda on a machine with a GPU: %v\n%s", err, errb.String())
		}
		t.Logf("GPU present; stderr:\n%s", errb.String())
	} else if err == nil || !strings.Contains(err.Error(), "--device cuda: no usable NVIDIA GPU") {
		t.Errorf("--device cuda without a GPU: %v", err)
	}

	out.Reset()
	errb.Reset()
	if err := runArgs(t, []string{"--model", model, "--no-cache"}, in, &out, &errb); err != nil {
		t.Fatalf("--device auto: %v\n%s", err, errb.String())
	}
	if gpuErr != nil && !strings.Contains(errb.String(), "scoring on the CPU") {
		t.Errorf("--device auto without a GPU: no notice on stderr:\n%s", errb.String())
	}
	if !bytes.Contains(out.Bytes(), []byte(`"type":"scores"`)) {
		t.Error("--device auto: no scores")
	}
}
