package cuda

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"ppl.dev/kernels"
)

// The kernels' parameter lists as the PTX declares them (.u64 for
// pointers and 64-bit integers, .u32 for int, .f32, .f64), so that the
// simulator can check every launch's Go argument types against the real
// kernel's: a C int passed where a long long is expected would otherwise
// only show on a GPU, as garbage.
var (
	ptxSigOnce sync.Once
	ptxSigs    map[string][]string
	ptxSigErr  error
)

var (
	entryRe = regexp.MustCompile(`(?s)\.visible \.entry (\w+)\((.*?)\)`)
	paramRe = regexp.MustCompile(`\.param \.(\w+) `)
)

func ptxSignatures() (map[string][]string, error) {
	ptxSigOnce.Do(func() {
		ptxSigs = map[string][]string{}
		for _, mod := range kernels.Modules() {
			src, err := kernels.PTX(mod)
			if err != nil {
				ptxSigErr = err
				return
			}
			for _, m := range entryRe.FindAllStringSubmatch(string(src), -1) {
				var types []string
				for _, p := range paramRe.FindAllStringSubmatch(m[2], -1) {
					types = append(types, p[1])
				}
				ptxSigs[m[1]] = types
			}
		}
	})
	return ptxSigs, ptxSigErr
}

// ptxType is the PTX parameter type a Go kernel argument passes as.
func ptxType(a any) string {
	switch a.(type) {
	case ptr, buf, int64, uint64:
		return "u64"
	case int, int32:
		return "u32"
	case float32:
		return "f32"
	case float64:
		return "f64"
	}
	return fmt.Sprintf("%T", a)
}

// checkSignature reports a launch whose arguments do not match the PTX.
func checkSignature(kernel string, args []any) error {
	sigs, err := ptxSignatures()
	if err != nil {
		return err
	}
	want, ok := sigs[kernel]
	if !ok {
		return fmt.Errorf("no kernel %s in the embedded PTX", kernel)
	}
	got := make([]string, len(args))
	for i, a := range args {
		got[i] = ptxType(a)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("arguments (%s) do not match the PTX's parameters (%s)", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return nil
}

// Every kernel the engine loads is in the PTX, and the simulator knows it
// with the same parameter count.
func TestPTXSignatures(t *testing.T) {
	sigs, err := ptxSignatures()
	if err != nil {
		t.Fatal(err)
	}
	for mod, names := range kernelModules {
		for _, n := range names {
			sig, ok := sigs[n]
			if !ok {
				t.Errorf("kernel %s (module %s) not in the PTX", n, mod)
				continue
			}
			if k, ok := simKernels[n]; !ok || k.nargs != len(sig) {
				t.Errorf("kernel %s: %d PTX parameters, simulator takes %d (known %v)", n, len(sig), k.nargs, ok)
			}
		}
	}
	if len(sigs) != len(simKernels) {
		t.Errorf("%d kernels in the PTX, %d in the simulator", len(sigs), len(simKernels))
	}
}
