package quant

import (
	"testing"

	"ppl.dev/qemutest"
)

// TestNEONUnderQEMU runs the tests of the NEON level's dequantizers (each
// level against the reference) on an emulated arm64 CPU.
func TestNEONUnderQEMU(t *testing.T) {
	qemutest.Run(t, "TestFastDequantize", "TestFastDecodeInt8", "TestDecodeCodes", "TestSetLevel", "TestZooDequantize")
}
