package nn

import (
	"os"
	"runtime"
	"slices"
	"testing"

	"ppl.dev/qemutest"
)

// TestLevelsOfArch checks that an arm64 CPU runs the NEON level, so that
// the tests that compare every level with the plain Go kernels check it
// there, and under qemu that it has the int8 modes' kernels.
func TestLevelsOfArch(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		t.Skipf("the NEON level is arm64's; this is %s", runtime.GOARCH)
	}
	if got, want := Levels(), []Level{Generic, NEON}; !slices.Equal(got, want) {
		t.Fatalf("Levels() = %v, want %v", got, want)
	}
	// The int8 modes' kernels need the dot-product extension.
	t.Logf("NEON's integer kernels on this CPU: %v", NEON.IntegerVectors())
	if os.Getenv(qemutest.Env) == "1" && !NEON.IntegerVectors() {
		t.Fatal("qemu-aarch64's CPU has the dot-product extension, but the NEON level has no integer kernels")
	}
}

// TestNEONUnderQEMU runs the tests of the NEON level's kernels (each at
// every level) on an emulated arm64 CPU.
func TestNEONUnderQEMU(t *testing.T) {
	qemutest.Run(t, "TestLevelsOfArch", "TestFMA32", "TestGemm", "TestGemmAcc", "TestGemmFMA", "FuzzGemm",
		"TestExps", "TestExpSum", "TestExpEdgesLevels", "TestSoftmaxTile", "TestSoftmaxTileAdversarial",
		"TestSwiGLU32", "TestSSMRowsF32", "TestSSMScanLevels", "TestKLD",
		"TestLanesKernels", "TestTiledKernels", "TestKRepackedKernels", "TestMinSumsKernel",
		"TestLinearInt8", "TestInt8Tiles", "TestLinearInt8Lowbit", "TestGGMLProducts", "TestGGMLProductsQ1Q2",
		"TestMaxArg", "TestMaxArgZeros", "TestDotKernels", "TestDotBF16Kernels", "TestBF16Panels",
		"TestPack32Words", "TestGGMLExpfs", "TestQuantActs", "TestLaneSums", "TestGGMLDeltaNet", "TestDeltaRuleGGML",
		"TestSSMRowsGGML", "TestSSMScanGGMLLevels", "TestGGMLMamba2")
}
