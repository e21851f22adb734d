// Package qemutest runs a package's tests built for arm64 under
// qemu-aarch64 (Debian's qemu-user), so that an amd64 machine, CI's,
// also checks the arm64 kernels (score/nn's NEON level) against the plain
// Go ones: each such test compares every kernel level of the CPU it runs
// on, and under qemu that CPU is an arm64 one.
package qemutest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Env is set to 1 in the emulated tests' environment: qemu-aarch64's CPU
// has every extension the kernels use (FEAT_DotProd among them), so a test
// can require them there.
const Env = "PPL_UNDER_QEMU"

// Run builds the package in the current directory (a test's) for arm64
// and runs the tests named under qemu-aarch64, failing unless each of them
// passes. It skips on arm64 (the tests run natively), under -short, and
// without qemu-aarch64 unless PPL_REQUIRE_QEMU=1 (CI) makes that a failure.
func Run(t *testing.T, tests ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the package for arm64 and emulates it; run without -short")
	}
	if runtime.GOARCH == "arm64" {
		t.Skip("on arm64 the tests run natively")
	}
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		msg := "no qemu-aarch64 (Debian: qemu-user) to run the arm64 tests"
		if os.Getenv("PPL_REQUIRE_QEMU") == "1" {
			t.Fatal(msg + ", and PPL_REQUIRE_QEMU=1")
		}
		t.Skip(msg)
	}
	bin := filepath.Join(t.TempDir(), "arm64.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c for arm64: %v\n%s", err, out)
	}
	run := exec.Command(qemu, bin, "-test.v", "-test.run", "^("+strings.Join(tests, "|")+")$")
	run.Env = append(os.Environ(), Env+"=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the arm64 tests under qemu-aarch64: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass under qemu-aarch64:\n%s", name, out)
		}
	}
}
