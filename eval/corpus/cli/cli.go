// Package cli implements ppl-corpus, the maintenance tool of the evaluation
// corpora: it rebuilds built corpora from the Debian archive, verifies any
// corpus against its manifest, and pins a manifest to its texts.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"ppl.dev/command"
	"ppl.dev/eval/corpus"
)

const name = "ppl-corpus"

type cacheFlags struct {
	Cache   string `help:"Directory of downloaded .deb files (default: $$PPL_CACHE_DIR/debs, else the user cache directory's ppl/debs)." placeholder:"DIR"`
	Offline bool   `help:"Use only .deb files already in the cache."`
}

type buildCmd struct {
	cacheFlags
	Force    bool   `help:"Rewrite streams even when they already match the manifest."`
	Manifest string `arg:"" help:"The corpus manifest.json." type:"path"`
}

type verifyCmd struct {
	Quick    bool   `help:"Check only the quick stream of each domain."`
	Manifest string `arg:"" help:"The corpus manifest.json." type:"path"`
}

type pinCmd struct {
	cacheFlags
	Manifest string `arg:"" help:"The corpus manifest.json, rewritten in place." type:"path"`
}

type listCmd struct {
	Quick    bool   `help:"List only the quick stream of each domain."`
	Manifest string `arg:"" help:"The corpus manifest.json." type:"path"`
}

type cliArgs struct {
	Build  buildCmd  `cmd:"" help:"Recreate a built corpus's missing or modified streams from the Debian archive and check their sha256."`
	Verify verifyCmd `cmd:"" help:"Check every stream against the manifest's sha256."`
	Pin    pinCmd    `cmd:"" help:"Snap build ranges to whole lines and record sha256, bytes and words (maintainers only)."`
	List   listCmd   `cmd:"" help:"Print the streams: id, domain, bytes, words, quick."`
}

const description = "Build, verify and pin the evaluation corpora (eval/corpora/*/manifest.json)."

// Main runs ppl-corpus with os.Args and returns its exit status.
func Main() int {
	return Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
}

// Run is Main with explicit arguments and output.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command.Exit(name, run(ctx, args, stdout, stderr), stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var a cliArgs
	kctx, err := command.ParseCommand(name, "", description, &a, args, stdout, stderr)
	if err != nil {
		return err
	}
	switch kctx.Command() {
	case "build <manifest>":
		m, err := corpus.Load(a.Build.Manifest)
		if err != nil {
			return err
		}
		f, err := a.Build.fetcher(stderr)
		if err != nil {
			return err
		}
		if err := m.Build(ctx, corpus.BuildOptions{Fetcher: f, Force: a.Build.Force}); err != nil {
			return err
		}
		if err := m.VerifyAll(false); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d streams match the manifest\n", m.Name, len(m.Streams))
	case "verify <manifest>":
		m, err := corpus.Load(a.Verify.Manifest)
		if err != nil {
			return err
		}
		sel, err := m.Select(a.Verify.Quick, nil)
		if err != nil {
			return err
		}
		if err := m.VerifyAll(a.Verify.Quick); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d streams match the manifest\n", m.Name, len(sel))
	case "pin <manifest>":
		m, err := corpus.Load(a.Pin.Manifest)
		if err != nil {
			return err
		}
		f, err := a.Pin.fetcher(stderr)
		if err != nil {
			return err
		}
		if err := m.Pin(ctx, f); err != nil {
			return err
		}
		return m.Save(a.Pin.Manifest)
	case "list <manifest>":
		m, err := corpus.Load(a.List.Manifest)
		if err != nil {
			return err
		}
		sel, err := m.Select(a.List.Quick, nil)
		if err != nil {
			return err
		}
		for _, s := range sel {
			fmt.Fprintf(stdout, "%s\t%s\t%d\t%d\t%v\n", s.ID, s.Domain, s.Bytes, s.Words, s.Quick)
		}
	default:
		return command.Usagef("unknown command %q", kctx.Command())
	}
	return nil
}

func (c *cacheFlags) fetcher(log io.Writer) (corpus.Fetcher, error) {
	dir := c.Cache
	if dir == "" {
		if d := os.Getenv("PPL_CACHE_DIR"); d != "" {
			dir = filepath.Join(d, "debs")
		} else {
			d, err := os.UserCacheDir()
			if err != nil {
				return corpus.Fetcher{}, fmt.Errorf("no cache directory: %w (use --cache)", err)
			}
			dir = filepath.Join(d, "ppl", "debs")
		}
	}
	return corpus.Fetcher{Cache: dir, Offline: c.Offline, Log: log}, nil
}
