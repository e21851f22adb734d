package nn

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// TestGeneratedUpToDate checks that the committed assembly kernels and
// their declarations are what the generator (./gen) prints, as
// kernels_test.go in ppl.dev/kernels does for the PTX: an edit of the
// template that was not regenerated (go generate) fails here.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the generator; run without -short")
	}
	for _, c := range []struct {
		file string
		args []string
	}{
		{"kernels_amd64.s", []string{"run", "./gen"}},
		{"kernels_decl_amd64.go", []string{"run", "./gen", "-decl"}},
		{"kernels_arm64.s", []string{"run", "./gen", "-arm64"}},
		{"kernels_decl_arm64.go", []string{"run", "./gen", "-arm64", "-decl"}},
	} {
		want, err := exec.Command("go", c.args...).Output()
		if err != nil {
			t.Fatalf("go %v: %v", c.args, err)
		}
		got, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what go %v prints: run go generate in score/nn", c.file, c.args)
		}
	}
}
