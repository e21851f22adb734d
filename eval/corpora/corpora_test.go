package corpora

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestHeldoutEmbedded checks that the embedded corpus is the one on disk
// and passes its own manifest.
func TestHeldoutEmbedded(t *testing.T) {
	m, err := Heldout()
	if err != nil {
		t.Fatal(err)
	}
	texts, err := m.Texts(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != 9 {
		t.Fatalf("%d streams", len(texts))
	}
	for i, s := range m.Streams {
		disk, err := os.ReadFile(filepath.Join("ppl-heldout-v1", filepath.FromSlash(s.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(disk, texts[i]) {
			t.Errorf("%s: embedded copy differs from the file", s.ID)
		}
	}
}
