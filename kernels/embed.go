// Package kernels holds ppl's CUDA kernels: CUDA C sources, one file per
// operation (embed.cu, rmsnorm.cu, rope.cu, swiglu.cu, add.cu,
// elementwise.cu, experts.cu, logsoftmax.cu, kvstore.cu, attention.cu,
// fwht.cu, random.cu, dequant.cu: weights from their GGUF blocks; int8mm.cu: the
// int8 mode's quantized activations and integer products; recurrent.cu,
// latent.cu, gemma4.cu, altup.cu, rwkv.cu, attnres.cu, lightning.cu,
// sparse.cu: package ml's extension interfaces), and
// the PTX that nvcc made from them, which the CUDA backend
// (ppl.dev/score/cuda) embeds and the driver compiles for whatever GPU it
// finds. The KV cache format ids live in kvformat.go, which generates
// kvids.cuh for the kernels.
//
// Why PTX made ahead: building ppl needs no CUDA toolkit, and one PTX file
// targeting compute_80 runs on Ampere, Ada and Hopper (the driver compiles
// it at module load and caches the result). `make kernels` regenerates the
// PTX with nvcc (Debian non-free's nvidia-cuda-toolkit 11.8 is enough); each
// module's PTX starts with the command, the nvcc version and the sha256 of
// its sources, and a test fails when a source changed without `make
// kernels`. The PTX is committed gzipped (NAME.ptx.gz, a tenth of its
// text): the repository's files travel with every GPU check's bundle,
// whose room they would otherwise take.
//
// Each kernel's comment names its CPU reference in package ppl.dev/score
// (nn, kvcache, model); the parity tests in ppl.dev/score/cuda compare them
// on a GPU. Shared device code lives in common.cuh and kvformat.cuh.
package kernels

import (
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"sync"
)

//go:embed *.ptx.gz
var ptx embed.FS

// Modules returns the names of the embedded PTX modules ("attention" for
// attention.ptx.gz), sorted.
func Modules() []string {
	ents, _ := fs.ReadDir(ptx, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".ptx.gz"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// PTX returns the PTX text of module name, NUL-terminated as
// cuModuleLoadData wants it.
func PTX(name string) ([]byte, error) {
	b, err := text(name)
	if err != nil {
		return nil, err
	}
	return append(b, 0), nil
}

// text returns module name's PTX, unzipped.
func text(name string) ([]byte, error) {
	f, err := ptx.Open(name + ".ptx.gz")
	if err != nil {
		return nil, fmt.Errorf("kernels: no module %q (have %s)", name, strings.Join(Modules(), ", "))
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("kernels: %s.ptx.gz: %w", name, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("kernels: %s.ptx.gz: %w", name, err)
	}
	return b, nil
}

// Digest identifies the embedded kernels: the first 16 hex digits of the
// sha256 of every PTX module, in Modules' order. The CUDA backend puts it
// in the cache key, so that a window computed by other kernels (other
// numbers, in the last places) does not replay.
var Digest = sync.OnceValue(func() string {
	h := sha256.New()
	for _, m := range Modules() {
		b, _ := text(m)
		fmt.Fprintf(h, "%s %d\n", m, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})
