package driver

import (
	"errors"
	"testing"
)

// Load needs no GPU, only libcuda.so.1; machines without it get ErrNoDriver.
func TestLoad(t *testing.T) {
	err := Load()
	if err != nil {
		if !errors.Is(err, ErrNoDriver) {
			t.Fatalf("Load: %v (not ErrNoDriver)", err)
		}
		t.Skipf("skipping: %v", err)
	}
	for _, s := range symbols {
		if *s.addr == 0 {
			t.Errorf("%s not resolved", s.name)
		}
	}
	if v, err := DriverVersion(); err != nil || v <= 0 {
		t.Errorf("DriverVersion() = %d, %v", v, err)
	}
	// Without a GPU cuInit fails with a named error, never a panic.
	if err := Init(); err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Call != "cuInit" || e.Name == "" {
			t.Errorf("Init: %v", err)
		}
		t.Logf("cuInit: %v", err)
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	if got, want := e.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !IsOutOfMemory(e) {
		t.Error("IsOutOfMemory = false")
	}
}
