// Package cli implements ppl-cache, which shows and prunes the cache that
// ppl-tokenize and ppl-score keep of tokenized streams and scored windows.
//
//	ppl-cache stats                      entries and size per group, with model names
//	ppl-cache prune --older-than 30d     remove entries unused for 30 days
//	ppl-cache prune --model M            remove every window scored with a model
//	ppl-cache prune --older-than 0s      remove every entry
//
// --older-than takes days (30d) or a Go duration (720h, 90m). --model takes
// the model's file (its sha256 is computed, or remembered), its sha256 or
// a prefix of it, or its name: the file name (with or without .gguf) or
// its general.name, as ppl-score recorded them in the cache ("models"
// group); a name or prefix that matches several models is refused, naming
// them.
//
// Groups are "tokenize/<tokenizer id>", "score/<model sha256>" and "sha256"
// (remembered file hashes). --cache-dir DIR (default $PPL_CACHE_DIR, else
// the user cache directory) picks the cache; neither command creates it.
// Exit status 2 for usage errors, 1 for failures.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"ppl.dev/cache"
	"ppl.dev/command"
	"ppl.dev/gguf"
	"ppl.dev/pipe"
)

const tool = "ppl-cache"

type flags struct {
	CacheDir string           `placeholder:"DIR" help:"The cache (default $$PPL_CACHE_DIR, else the user cache dir)."`
	LogLevel string           `default:"info" enum:"debug,info,warn,error" help:"Least severe message to show on stderr: debug, info, warn, error."`
	Version  kong.VersionFlag `help:"Print the version and exit."`

	Stats struct{} `cmd:"" help:"Show entries and size per group (tokenizer or model)."`
	Prune struct {
		OlderThan string `placeholder:"AGE" help:"Remove entries not used for this long: days (30d) or a duration (720h)."`
		Model     string `placeholder:"MODEL" help:"Remove the scored windows of this model: its file, its sha256 (or a prefix), or its name."`
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
	ageGiven := command.Given(kctx, "older-than")
	var age time.Duration
	if kctx.Command() == "prune" {
		if !ageGiven && f.Prune.Model == "" {
			return command.Usagef("prune: give --older-than and/or --model")
		}
		if ageGiven {
			if age, err = parseAge(f.Prune.OlderThan); err != nil {
				return err
			}
		}
	}
	// Neither command creates a missing cache: there is nothing to show or remove.
	c, err := cache.OpenExisting(dir)
	if errors.Is(err, os.ErrNotExist) {
		if kctx.Command() == "stats" {
			fmt.Fprintf(stdout, "no cache at %s\n", dir)
		} else {
			fmt.Fprintf(stdout, "removed 0 entries from %s (no cache there)\n", dir)
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch kctx.Command() {
	case "stats":
		return stats(c, stdout)
	default:
		// --older-than 0s removes every entry; without it, age does not count.
		prefix, before := "", time.Now().Add(-age)
		if !ageGiven {
			before = time.Now().Add(100 * 365 * 24 * time.Hour)
		}
		if f.Prune.Model != "" {
			sha, err := resolveModel(c, f.Prune.Model)
			if err != nil {
				return err
			}
			prefix = "score/" + sha + "/"
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
	fmt.Fprintf(tw, "group\tentries\tMB\tlast used\tmodel\t\n")
	var n int
	var b int64
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t\n", g.Name, g.Entries, float64(g.Bytes)/1e6, g.Newest.UTC().Format(time.DateTime), modelName(c, g.Name))
		n += g.Entries
		b += g.Bytes
	}
	fmt.Fprintf(tw, "total\t%d\t%.1f\t\t\n", n, float64(b)/1e6)
	return tw.Flush()
}

// modelName names the model of a score/<sha256> group, as ppl-score
// recorded it: "general.name (file.gguf)", or "-" when unknown.
func modelName(c *cache.Cache, group string) string {
	sha, ok := strings.CutPrefix(group, "score/")
	if !ok {
		return ""
	}
	m, ok := c.Model(sha)
	switch {
	case !ok:
		return "-"
	case m.GeneralName != "":
		return m.GeneralName + " (" + m.Name + ")"
	}
	return m.Name
}

// parseAge reads --older-than: days ("30d") or a Go duration ("720h").
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || math.Abs(n) > 1e6 {
			return 0, command.Usagef("--older-than %q: want days (30d) or a duration (720h)", s)
		}
		d = time.Duration(n * 24 * float64(time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, command.Usagef("--older-than %q: want days (30d) or a duration (720h)", s)
		}
	}
	if d < 0 {
		return 0, command.Usagef("--older-than %v: must not be negative", d)
	}
	return d, nil
}

// resolveModel finds the sha256 that --model names: a model file (the
// first shard of a split one), a full
// sha256, a prefix of the sha256 of a scored model in the cache, or a
// name recorded for one (file name, with or without .gguf, or
// general.name).
func resolveModel(c *cache.Cache, arg string) (string, error) {
	if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
		f, err := gguf.Open(arg) // a split model is hashed whole
		if err != nil {
			return "", err
		}
		shards := f.Shards
		f.Close()
		return c.FileSHA256(context.Background(), nil, shards...)
	}
	if hexSHA.MatchString(arg) {
		return arg, nil
	}
	groups, err := c.Stats()
	if err != nil {
		return "", err
	}
	var matches []string
	for _, g := range groups {
		sha, ok := strings.CutPrefix(g.Name, "score/")
		if !ok {
			continue
		}
		m, known := c.Model(sha)
		if strings.HasPrefix(sha, strings.ToLower(arg)) || known && (m.Name == arg || strings.TrimSuffix(m.Name, ".gguf") == arg || m.GeneralName == arg) {
			matches = append(matches, sha)
		}
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("--model %s: no such file, and no scored model in the cache has that name or sha256 prefix (ppl-cache stats lists them)", arg)
	case 1:
		return matches[0], nil
	}
	var names []string
	for _, sha := range matches {
		names = append(names, sha[:12]+" "+modelName(c, "score/"+sha))
	}
	return "", fmt.Errorf("--model %s: matches %d models (%s): give more of the sha256", arg, len(matches), strings.Join(names, ", "))
}

var hexSHA = regexp.MustCompile(`^[0-9a-f]{64}$`)
