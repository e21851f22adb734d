package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOtherPlatforms builds every package and test of ppl for the
// platforms its users run besides Linux on amd64: macOS on Apple silicon
// (until 2026-12-07 the progress log asked Linux's ioctl whether stderr is
// a terminal, and nothing built there) and Linux on arm64. go vet builds
// the tests too and checks the assembly's frames against its Go
// declarations (score/nn's NEON kernels on arm64).
func TestOtherPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles every package")
	}
	root, pkgs := pplPackages(t)
	for _, p := range [][]string{{"GOOS=darwin", "GOARCH=arm64"}, {"GOOS=linux", "GOARCH=arm64"}} {
		t.Run(strings.Join(p, ","), func(t *testing.T) {
			vet := exec.Command("go", append([]string{"vet"}, pkgs...)...)
			vet.Dir = root
			vet.Env = append(append(os.Environ(), "CGO_ENABLED=0"), p...)
			if out, err := vet.CombinedOutput(); err != nil {
				t.Fatalf("go vet for %s: %v\n%s", strings.Join(p, " "), err, out)
			}
		})
	}
}
