// Package cli implements ppl-cache, which shows and prunes the cache that
// ppl-tokenize and ppl-score keep of tokenized streams and scored windows.
//
//	ppl-cache stats                      entries and size per group
//	ppl-cache prune --older-than 720h    remove entries unused for 30 days
//	ppl-cache prune --model SHA256       remove every window scored with a model
//
// Groups are "tokenize/<tokenizer id>", "score/<model sha256>" and "sha256"
// (remembered file hashes). --cache-dir DIR (default $PPL_CACHE_DIR, else
// the user cache directory) picks the cache. Exit status 2 for usage errors,
// 1 for failures.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"ppl.dev/cache"
	"ppl.dev/command"
	"ppl.dev/pipe"
)

const tool = "ppl-cache"

type flags struct {
	CacheDir string           `placeholder:"DIR" help:"The cache (default $$PPL_CACHE_DIR, else the user cache dir)."`
	Version  kong.VersionFlag `help:"Print the version and exit."`

	Stats struct{} `cmd:"" help:"Show entries and size per group (tokenizer or model)."`
	Prune struct {
		OlderThan time.Duration `placeholder:"DURATION" help:"Remove entries not used for this long (e.g. 720h)."`
		Model     string        `placeholder:"SHA256" help:"Remove the scored windows of this model (its sha256, as in report.json)."`
	} `cmd:"" help:"Remove entries by age and/or model."`
}

const description = `Show or prune the cache of tokenized streams and scored windows.`

// Main runs ppl-cache with os.Args and returns its exit status.
func Main() int {
	return command.Exit(tool, run(context.Background(), os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
}

func run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var f flags
	kctx, err := command.ParseCommand(tool, pipe.ToolVersion, description, &f, args, stdout, stderr)
	if err != nil {
		return err
	}
	dir := f.CacheDir
	if dir == "" {
		if dir, err = cache.DefaultDir(); err != nil {
			return err
		}
	}
	c, err := cache.Open(dir)
	if err != nil {
		return err
	}
	switch kctx.Command() {
	case "stats":
		return stats(c, stdout)
	default:
		if f.Prune.OlderThan <= 0 && f.Prune.Model == "" {
			return command.Usagef("prune: give --older-than and/or --model")
		}
		prefix, before := "", time.Now().Add(-f.Prune.OlderThan)
		if f.Prune.Model != "" {
			prefix = "score/" + f.Prune.Model + "/"
		}
		n, err := c.Prune(prefix, before)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %d entries from %s\n", n, dir)
		return nil
	}
}

func stats(c *cache.Cache, w io.Writer) error {
	groups, err := c.Stats()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "group\tentries\tMB\tlast used\t\n")
	var n int
	var b int64
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t\n", g.Name, g.Entries, float64(g.Bytes)/1e6, g.Newest.UTC().Format(time.DateTime))
		n += g.Entries
		b += g.Bytes
	}
	fmt.Fprintf(tw, "total\t%d\t%.1f\t\t\n", n, float64(b)/1e6)
	return tw.Flush()
}
