// Command bf16copy writes a copy of a GGUF model with every matrix rounded
// to bf16 as the CUDA backend rounds weights (cuda.WriteBF16Copy): scoring
// the copy on the CPU gives the reference the GPU's scores are checked
// against in tests/gpu/check.sh.
//
//	go run ./tests/gpu/bf16copy IN.gguf OUT.gguf
package main

import (
	"fmt"
	"os"

	"ppl.dev/score/cuda"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: bf16copy IN.gguf OUT.gguf")
		os.Exit(2)
	}
	if err := cuda.WriteBF16Copy(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "bf16copy:", err)
		os.Exit(1)
	}
}
