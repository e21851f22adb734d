// Command ppl-aggregate: see package ppl.dev/aggregate/cli for its manual.
package main

import (
	"os"

	"ppl.dev/aggregate/cli"
)

func main() { os.Exit(cli.Main()) }
