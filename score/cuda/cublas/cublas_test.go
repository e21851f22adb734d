package cublas

import (
	"strings"
	"testing"
)

// Load needs no GPU: it opens the library and resolves the bound symbols.
func TestLoad(t *testing.T) {
	if err := Load(); err != nil {
		if !strings.Contains(err.Error(), "cuBLAS not found") {
			t.Fatalf("Load: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	if Library() == "" || fn.create == 0 || fn.gemmEx == 0 || fn.gemmBatchedEx == 0 || fn.version == 0 {
		t.Fatalf("loaded %q with unresolved symbols: %+v", Library(), fn)
	}
	t.Logf("cuBLAS from %s", Library())
}

func TestErrorNames(t *testing.T) {
	e := &Error{Call: "cublasGemmEx", Status: 7}
	if got := e.Error(); got != "cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (7)" {
		t.Errorf("Error() = %q", got)
	}
}
