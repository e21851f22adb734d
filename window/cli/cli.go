// Package cli implements ppl-window.
package cli

import (
	"fmt"
	"os"
)

// Main runs ppl-window with os.Args and returns its exit status.
func Main() int {
	fmt.Fprintln(os.Stderr, "ppl-window: not implemented yet")
	return 1
}
