// Package cli implements ppl-score.
package cli

import (
	"fmt"
	"os"
)

// Main runs ppl-score with os.Args and returns its exit status.
func Main() int {
	fmt.Fprintln(os.Stderr, "ppl-score: not implemented yet")
	return 1
}
