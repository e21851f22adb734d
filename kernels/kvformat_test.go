package kernels

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite kvids.cuh from KVFormats")

// The committed kvids.cuh is the one KVFormats generates.
func TestKVHeader(t *testing.T) {
	want := kvHeader()
	got, err := os.ReadFile("kvids.cuh")
	if *update && string(got) != want { // unchanged, it keeps its time for make
		if err = os.WriteFile("kvids.cuh", []byte(want), 0o644); err == nil {
			got = []byte(want)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("kvids.cuh differs from what KVFormats generates: run go generate ./kernels (then make kernels)\ngot:\n%s\nwant:\n%s", got, want)
	}
}
