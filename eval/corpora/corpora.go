// Package corpora embeds the committed evaluation corpus ppl-heldout-v1, so
// that programs and tests built from this repository can use it without
// knowing where the repository is (ppl-mkmodel trains its default
// vocabulary on it). The files on disk under eval/corpora are the same
// bytes; ppl-tokenize reads those.
//
// Built corpora such as ppl-mixed-v1 are not embedded: they are not
// committed.
package corpora

import (
	"embed"

	"ppl.dev/eval/corpus"
)

//go:embed ppl-heldout-v1
var heldout embed.FS

// HeldoutManifest is the path of the held-out corpus's manifest inside the
// embedded file system, and relative to eval/corpora on disk.
const HeldoutManifest = "ppl-heldout-v1/manifest.json"

// Heldout returns the embedded ppl-heldout-v1 manifest; its streams are
// read (and checked against their sha256) from the embedded copy.
func Heldout() (*corpus.Manifest, error) {
	return corpus.LoadFS(heldout, HeldoutManifest)
}
