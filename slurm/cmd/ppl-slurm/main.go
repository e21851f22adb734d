// Command ppl-slurm: see package ppl.dev/slurm/cli for its manual.
package main

import (
	"os"

	"ppl.dev/slurm/cli"
)

func main() { os.Exit(cli.Main()) }
