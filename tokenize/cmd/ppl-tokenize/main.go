// Command ppl-tokenize: see package ppl.dev/tokenize/cli for its manual.
package main

import (
	"os"

	"ppl.dev/tokenize/cli"
)

func main() { os.Exit(cli.Main()) }
