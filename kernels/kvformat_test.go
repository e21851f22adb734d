package kernels

import (
	"flag"
	"testing"
)

var update = flag.Bool("update", false, "rewrite kvids.cuh from KVFormats")

// The committed kvids.cuh is the one KVFormats generates.
func TestKVHeader(t *testing.T) {
	if err := CheckGenerated("kvids.cuh", kvHeader(), *update, "go generate ./kernels"); err != nil {
		t.Error(err)
	}
}
