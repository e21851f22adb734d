// Command ppl-cache: see package ppl.dev/cache/cli for its manual.
package main

import (
	"os"

	"ppl.dev/cache/cli"
)

func main() { os.Exit(cli.Main()) }
