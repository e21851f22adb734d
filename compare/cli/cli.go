// Package cli implements ppl-compare.
package cli

import (
	"fmt"
	"os"
)

// Main runs ppl-compare with os.Args and returns its exit status.
func Main() int {
	fmt.Fprintln(os.Stderr, "ppl-compare: not implemented yet")
	return 1
}
