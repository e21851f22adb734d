// Package command holds what every ppl tool's main does the same way:
// parse the command line with kong, and turn the outcome into one line on
// stderr and an exit status (0 success, 1 failure, 2 usage error), the
// message starting with the tool's name.
package command

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/alecthomas/kong"
)

// ErrExited means --help or --version was printed: exit 0.
var ErrExited = errors.New("exited")

// UsageError is a bad command line: exit status 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

// Parse fills flags (a kong grammar struct) from args. --help and --version
// print to stdout and return ErrExited; a parse error is a UsageError.
func Parse(tool, version, description string, flags any, args []string, stdout, stderr io.Writer) error {
	_, err := ParseCommand(tool, version, description, flags, args, stdout, stderr)
	return err
}

// ParseCommand is Parse for a grammar with subcommands: the returned
// context names the one selected.
func ParseCommand(tool, version, description string, flags any, args []string, stdout, stderr io.Writer) (*kong.Context, error) {
	exited := false
	parser, err := kong.New(flags,
		kong.Name(tool),
		kong.Description(description),
		kong.Vars{"version": tool + " " + version},
		kong.Writers(stdout, stderr),
		kong.Exit(func(int) { exited = true }),
		kong.ConfigureHelp(kong.HelpOptions{NoExpandSubcommands: true}),
	)
	if err != nil {
		return nil, fmt.Errorf("flags: %w", err) // a bug in the grammar
	}
	kctx, perr := parser.Parse(args)
	if exited {
		return nil, ErrExited
	}
	if perr != nil {
		return nil, UsageError{perr.Error()}
	}
	if err := checkEmpty(kctx); err != nil {
		return nil, err
	}
	return kctx, nil
}

// checkEmpty refuses a string flag given an empty value (--output=""),
// which would otherwise read as the flag's absence. Flags whose enum
// allows "" are exempt.
func checkEmpty(kctx *kong.Context) error {
	for _, f := range kctx.Flags() {
		v := f.Value
		if !v.Set || v.Enum != "" || v.Target.Kind() != reflect.String || v.Target.String() != "" || !given(kctx, f) {
			continue
		}
		return Usagef("--%s: empty value", f.Name)
	}
	return nil
}

// given reports whether the flag is on the command line (not just a default).
func given(kctx *kong.Context, f *kong.Flag) bool {
	for _, a := range kctx.Args {
		if a == "--" {
			break
		}
		if a == "--"+f.Name || strings.HasPrefix(a, "--"+f.Name+"=") ||
			(f.Short != 0 && (a == "-"+string(f.Short) || strings.HasPrefix(a, "-"+string(f.Short)+"="))) {
			return true
		}
	}
	return false
}

// Given reports whether the flag named name (without dashes) was given on
// the command line, telling an explicit zero (--older-than 0s) from absence.
func Given(kctx *kong.Context, name string) bool {
	for _, f := range kctx.Flags() {
		if f.Name == name {
			return given(kctx, f)
		}
	}
	return false
}

// Exit reports err on stderr as one line starting with tool and returns the
// exit status.
func Exit(tool string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, ErrExited) {
		return 0
	}
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
	fmt.Fprintf(stderr, "%s: %s\n", tool, msg)
	var u UsageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}
