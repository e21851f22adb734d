package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fusedInsn matches, in the compiler's -S listing, a fused multiply-add
// instruction of arm64 (FMADDD, FNMSUBS, ...) or amd64 (VFMADD231SD,
// VFNMADD231SS, ...) and the source line it came from.
var fusedInsn = regexp.MustCompile(`^\s+0x[0-9a-f]+ \d+ \(([^)]+):(\d+)\)\s+(V?FN?M(?:ADD|SUB)\w*)\s`)

// Go may fuse a*b+c into one fused multiply-add, rounded once (the spec
// allows it; an explicit conversion float32(a*b) or float64(a*b) forbids
// it). It does so always on arm64 and on amd64 built with GOAMD64=v3, and
// never in the default amd64 build, so a fused site gives other numbers on
// those machines than on the machine that checked them against llama.cpp:
// ggml's exact arithmetic (TestGGMLArithmetic) breaks, and the same model
// and windows score differently on a laptop and on a server. So ppl fuses
// only where it says so: every fused instruction the compiler makes for
// arm64 and for amd64 v3 from ppl's packages must come from a line that
// calls math.FMA (or a helper named fma). A product rounded before it is
// added is written float32(a*b) or float64(a*b), also where it reaches the
// sum through a variable or an inlined call.
func TestNoImplicitFMA(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles every package for arm64 and amd64 v3")
	}
	for _, env := range [][]string{{"GOARCH=arm64"}, {"GOARCH=amd64", "GOAMD64=v3"}} {
		t.Run(strings.Join(env, ","), func(t *testing.T) { checkFusion(t, env) })
	}
}

// pplPackages returns the repository's root and the patterns of all its
// modules' packages (ppl.dev/score/..., ...), for cross-builds of
// everything.
func pplPackages(t *testing.T) (root string, pkgs []string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Path}}/...")
	list.Dir = root
	mods, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return root, strings.Fields(string(mods))
}

// checkFusion builds ppl's packages for the target env names and fails on
// each fused instruction from a line that does not name an FMA.
func checkFusion(t *testing.T, env []string) {
	root, pkgs := pplPackages(t)
	args := append([]string{"build", "-o", os.DevNull, "-gcflags=ppl.dev/...=-S"}, pkgs...)
	build := exec.Command("go", args...)
	build.Dir = root
	build.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	var listing bytes.Buffer
	build.Stdout, build.Stderr = &listing, &listing
	if err := build.Run(); err != nil {
		t.Fatalf("go build (%s): %v\n%s", env, err, tail(listing.Bytes(), 2000))
	}
	seen, fused := map[string]bool{}, 0
	lines := map[string][]string{}
	sc := bufio.NewScanner(&listing)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := fusedInsn.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[1], root+string(filepath.Separator)) {
			continue
		}
		fused++
		site := m[1] + ":" + m[2]
		if seen[site] {
			continue
		}
		seen[site] = true
		if lines[m[1]] == nil {
			b, err := os.ReadFile(m[1])
			if err != nil {
				t.Fatal(err)
			}
			lines[m[1]] = strings.Split(string(b), "\n")
		}
		n, _ := strconv.Atoi(m[2])
		src := strings.TrimSpace(lines[m[1]][n-1])
		if !strings.Contains(strings.ToLower(src), "fma") {
			rel, _ := filepath.Rel(root, m[1])
			t.Errorf("%s:%d: fused into one %s (%s), rounded once where the default amd64 build rounds the product first: %s\n\twrite the product feeding this sum as float32(a*b) or float64(a*b) (or math.FMA where ggml fuses)", rel, n, m[3], strings.Join(env, " "), src)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if fused == 0 {
		t.Fatal("no fused instruction in the listing: the check no longer reads the compiler's output")
	}
	t.Logf("%d fused instructions at %d lines", fused, len(seen))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return fmt.Sprintf("...%s", b)
}
