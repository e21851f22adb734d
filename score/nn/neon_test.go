package nn

import (
	"runtime"
	"slices"
	"testing"

	"ppl.dev/score/internal/qemutest"
)

// TestLevelsOfArch checks that an arm64 CPU runs the NEON level, so that
// the tests that compare every level with the plain Go kernels check it
// there.
func TestLevelsOfArch(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		t.Skipf("the NEON level is arm64's; this is %s", runtime.GOARCH)
	}
	if got, want := Levels(), []Level{Generic, NEON}; !slices.Equal(got, want) {
		t.Fatalf("Levels() = %v, want %v", got, want)
	}
}

// TestNEONUnderQEMU runs the tests of the NEON level's kernels (each at
// every level) on an emulated arm64 CPU.
func TestNEONUnderQEMU(t *testing.T) {
	qemutest.Run(t, "TestLevelsOfArch", "TestFMA32", "TestGemm", "TestGemmAcc", "TestGemmFMA", "FuzzGemm",
		"TestExps", "TestExpSum", "TestExpEdgesLevels", "TestSoftmaxTile", "TestSoftmaxTileAdversarial",
		"TestSwiGLU32", "TestSSMRowsF32", "TestSSMScanLevels", "TestKLD")
}
