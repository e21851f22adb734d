// Package progress is how the ppl tools talk to the person running them:
// leveled log lines and a progress report on stderr, never on stdout,
// which carries data.
//
// On a terminal the progress line is transient (rewritten in place with a
// carriage return); when stderr is redirected to a file or a pipe, a plain
// line is written at most every 10 seconds, so logs of an overnight run stay
// readable.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Levels, in increasing severity.
const (
	Debug = iota
	Info
	Warn
	Error
)

// Levels lists the names accepted by ParseLevel (for --log-level).
var Levels = []string{"debug", "info", "warn", "error"}

// ParseLevel maps a level name to its value.
func ParseLevel(s string) (int, error) {
	for i, l := range Levels {
		if s == l {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown log level %q (want one of %s)", s, strings.Join(Levels, ", "))
}

// Log writes a tool's messages to stderr.
type Log struct {
	mu       sync.Mutex
	w        io.Writer
	tool     string
	level    int
	terminal bool
	// width returns the terminal's width in columns (0: unknown); a
	// transient line is cut to width-1 so that it never wraps.
	width    func() int
	interval time.Duration
	last     time.Time
	pending  bool // a transient line is on screen
}

// New returns a Log for tool writing to w at the given level. Whether w is
// a terminal decides how progress is shown.
func New(w io.Writer, tool string, level int) *Log {
	l := &Log{w: w, tool: tool, level: level, interval: 10 * time.Second}
	if f, ok := w.(*os.File); ok {
		fd := int(f.Fd())
		_, err := unix.IoctlGetTermios(fd, ioctlReadTermios)
		l.terminal = err == nil
		l.width = func() int {
			ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
			if err != nil {
				return 0
			}
			return int(ws.Col)
		}
	}
	if l.terminal {
		l.interval = 200 * time.Millisecond
	}
	return l
}

// Printf logs a message at level.
func (l *Log) Printf(level int, format string, args ...any) {
	if level < l.level {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
	fmt.Fprintf(l.w, "%s: %s\n", l.tool, fmt.Sprintf(format, args...))
}

// Infof logs at Info level.
func (l *Log) Infof(format string, args ...any) { l.Printf(Info, format, args...) }

// Warnf logs at Warn level.
func (l *Log) Warnf(format string, args ...any) { l.Printf(Warn, format, args...) }

// Debugf logs at Debug level.
func (l *Log) Debugf(format string, args ...any) { l.Printf(Debug, format, args...) }

// Progress shows a progress line if enough time has passed since the last
// one; force shows it regardless (use it for the final state).
func (l *Log) Progress(force bool, format string, args ...any) {
	if l.level > Info {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(l.last) < l.interval {
		return
	}
	l.last = now
	msg := fmt.Sprintf(format, args...)
	if l.terminal {
		line := l.tool + ": " + msg
		if l.width != nil {
			line = Fit(line, l.width())
		}
		fmt.Fprintf(l.w, "\r\033[K%s", line)
		l.pending = true
		return
	}
	fmt.Fprintf(l.w, "%s: %s\n", l.tool, msg)
}

// Done ends a transient progress line, if one is on screen.
func (l *Log) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending {
		fmt.Fprintln(l.w)
		l.pending = false
	}
}

func (l *Log) clear() {
	if l.pending {
		fmt.Fprint(l.w, "\r\033[K")
		l.pending = false
	}
}

// Fit cuts line to fewer than width columns (one per rune), ending it with
// "…" when it was cut, so that a transient line never wraps: a wrapped
// line would leave a stale copy behind every update. A width of 0
// (unknown) leaves the line as it is.
func Fit(line string, width int) string {
	if width <= 1 || utf8.RuneCountInString(line) < width {
		return line
	}
	r := []rune(line)
	return string(r[:width-2]) + "…"
}

// Rate formats a throughput: n units done in d.
func Rate(n int, d time.Duration, unit string) string {
	if d <= 0 || n == 0 {
		return "- " + unit + "/s"
	}
	return fmt.Sprintf("%.0f %s/s", float64(n)/d.Seconds(), unit)
}

// ETA formats the time left for done of total units at the rate since start.
func ETA(start time.Time, done, total int) string {
	if done <= 0 || done >= total {
		return "-"
	}
	el := time.Since(start)
	left := time.Duration(float64(el) / float64(done) * float64(total-done))
	return left.Round(time.Second).String()
}
