// Command ppl-window: see package ppl.dev/window/cli for its manual.
package main

import (
	"os"

	"ppl.dev/window/cli"
)

func main() { os.Exit(cli.Main()) }
