// Package cli implements ppl-aggregate.
package cli

import (
	"fmt"
	"os"
)

// Main runs ppl-aggregate with os.Args and returns its exit status.
func Main() int {
	fmt.Fprintln(os.Stderr, "ppl-aggregate: not implemented yet")
	return 1
}
