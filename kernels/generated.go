package kernels

import (
	"fmt"
	"os"
)

// CheckGenerated compares the committed header at path with want, the text
// its generator makes now. With update it first rewrites the file, but only
// when the text changed, so that an unchanged header keeps its time and make
// does not rebuild the PTX. regenerate is the command that mends a stale
// header; the error names it.
func CheckGenerated(path, want string, update bool, regenerate string) error {
	got, err := os.ReadFile(path)
	if update && string(got) != want {
		if err = os.WriteFile(path, []byte(want), 0o644); err == nil {
			got = []byte(want)
		}
	}
	if err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("%s differs from what its generator makes: run %s (then make kernels)\ngot:\n%s\nwant:\n%s", path, regenerate, got, want)
	}
	return nil
}
