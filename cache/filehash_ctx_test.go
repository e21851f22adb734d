package cache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Hashing stops when its context is cancelled (Ctrl-C while ppl-score
// hashes a large model), and nothing is remembered.
func TestFileSHA256Cancelled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.FileSHA256(ctx, nil, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	sum, err := c.FileSHA256(context.Background(), nil, path)
	if err != nil || sum != "30e14955ebf1352266dc2ff8067e68104607e750abb9d3b36582b8af909fcb58" {
		t.Fatalf("got %q, %v", sum, err)
	}
}
