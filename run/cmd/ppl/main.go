// Command ppl: see package ppl.dev/run/cli for its manual.
package main

import (
	"os"

	"ppl.dev/run/cli"
)

func main() { os.Exit(cli.Main()) }
