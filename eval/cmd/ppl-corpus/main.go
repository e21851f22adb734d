// Command ppl-corpus builds, verifies and pins the evaluation corpora.
//
//	ppl-corpus build eval/corpora/ppl-mixed-v1/manifest.json
//
// downloads each stream's Debian package at the exact version its manifest
// names (apt-get download; nothing is installed), reads the named file out
// of the package (dpkg-deb --fsys-tarfile), applies the recipe's filters
// (gunzip, strip-ansi), cuts the pinned byte range and writes the stream,
// refusing any result whose sha256 differs from the manifest's. Packages are
// cached in --cache (default $PPL_CACHE_DIR/debs or ~/.cache/ppl/debs), so a
// second build needs no network. Running it twice gives the same bytes.
//
//	ppl-corpus verify [--quick] MANIFEST
//
// checks every stream (or each domain's quick stream) against its sha256.
//
//	ppl-corpus list [--quick] MANIFEST
//
// prints id, domain, bytes, words and quick for each stream.
//
//	ppl-corpus pin MANIFEST
//
// is for maintainers changing a manifest: it snaps each recipe's byte range
// to whole lines, records the .deb's sha256, writes the streams and fills in
// sha256, bytes and words (for committed streams, from the files).
package main

import (
	"os"

	"ppl.dev/eval/corpus/cli"
)

func main() { os.Exit(cli.Main()) }
