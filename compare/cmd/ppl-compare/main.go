// Command ppl-compare: see package ppl.dev/compare/cli for its manual.
package main

import (
	"os"

	"ppl.dev/compare/cli"
)

func main() { os.Exit(cli.Main()) }
