package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every source has its PTX, made from the current sources by the command
// its header names.
func TestPTXUpToDate(t *testing.T) {
	srcs, _ := filepath.Glob("*.cu")
	if len(srcs) == 0 {
		t.Fatal("no .cu files")
	}
	headers, _ := filepath.Glob("*.cuh")
	sort.Strings(headers)
	var hdr []byte
	for _, h := range headers {
		b, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		hdr = append(hdr, b...)
	}
	shaRe := regexp.MustCompile(`(?m)^// Sources sha256: ([0-9a-f]{64})`)
	for _, src := range srcs {
		name := strings.TrimSuffix(src, ".cu")
		cu, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p, err := PTX(name)
		if err != nil {
			t.Errorf("%s: %v (run make kernels)", src, err)
			continue
		}
		text := string(p)
		for _, want := range []string{"// Command: nvcc -arch=compute_80 -ptx " + src, "// nvcc: ", ".target sm_80", "\x00"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s.ptx lacks %q", name, want)
			}
		}
		m := shaRe.FindStringSubmatch(text)
		sum := sha256.Sum256(append(append([]byte(nil), cu...), hdr...))
		if m == nil || m[1] != hex.EncodeToString(sum[:]) {
			t.Errorf("%s.ptx was not made from the current %s and headers: run make kernels", name, src)
		}
	}
	if got, want := len(Modules()), len(srcs); got != want {
		t.Errorf("%d PTX modules for %d sources: %v", got, want, Modules())
	}
}

func TestPTXUnknown(t *testing.T) {
	if _, err := PTX("nope"); err == nil || !strings.Contains(err.Error(), "attention") {
		t.Errorf("PTX(nope): %v", err)
	}
}
