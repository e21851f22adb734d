// Package cli implements ppl-tokenize.
package cli

import (
	"fmt"
	"os"
)

// Main runs ppl-tokenize with os.Args and returns its exit status.
func Main() int {
	fmt.Fprintln(os.Stderr, "ppl-tokenize: not implemented yet")
	return 1
}
