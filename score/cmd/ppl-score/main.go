// Command ppl-score: see package ppl.dev/score/cli for its manual.
package main

import (
	"os"

	"ppl.dev/score/cli"
)

func main() { os.Exit(cli.Main()) }
