package html

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"ppl.dev/compare"
	"ppl.dev/compare/internal/reporttest"
)

func testPage(t *testing.T) ([]byte, int) {
	t.Helper()
	base := reporttest.Default()
	cand := reporttest.Default()
	cand.SHA256, cand.Shift, cand.KLD = "2", 0.2, true
	third := reporttest.Default()
	third.SHA256, third.Jitter, third.Model = "3", 0.1, `q<"&'>.gguf` // must be escaped
	inputs := []compare.Input{
		{Path: "base.json", Label: "base", Report: reporttest.Build(t, base)},
		{Path: "cand.json", Label: "cand", Report: reporttest.Build(t, cand)},
		{Path: "x.json", Label: "<script>alert(1)</script>", Report: reporttest.Build(t, third)},
	}
	res, err := compare.Compare(inputs, compare.Options{Resamples: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, res, inputs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), len(res.Domains) - 1
}

// The page is self-contained: no URL that a browser would fetch, one bar
// chart per domain, and every text escaped.
func TestPageStructure(t *testing.T) {
	b, domains := testPage(t)
	s := string(b)
	if n := strings.Count(s, `<svg class="chart domain-chart"`); n != domains {
		t.Errorf("%d domain charts, want %d", n, domains)
	}
	for _, want := range []string{`<svg class="chart overall-chart"`, `<svg class="chart kld-histogram"`,
		`data-stream="en-1"`, `data-stream="en-2"`, `data-stream="zh-1"`, "Content-Security-Policy"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(s, "<script>alert") || strings.Contains(s, `q<"&`) {
		t.Error("a label or model name is not escaped")
	}
	// The SVG namespace is a name, not a resource.
	rest := strings.ReplaceAll(s, `xmlns="http://www.w3.org/2000/svg"`, "")
	if m := regexp.MustCompile(`(?i)\b(src|href)\s*=|https?:|@import|url\(`).FindString(rest); m != "" {
		t.Errorf("page refers to an external resource: %q", m)
	}
}

// chromium returns the path of Debian's chromium, or skips.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipping: chromium not installed (apt-get install -y chromium)")
	return ""
}

// render loads a file in headless Chromium and returns the DOM after its
// scripts ran, and the console messages it logged.
func render(t *testing.T, bin, path string) (dom string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+t.TempDir(),
		"--enable-logging=stderr", "--v=0", "--dump-dom", "file://"+path)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	// Chromium logs every console message (errors, CSP violations,
	// uncaught exceptions) as "INFO:CONSOLE(...)" or "INFO:CONSOLE:N]".
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return out.String(), console
}

// The page loads in a real browser without a console message and its
// script counts one chart per domain.
func TestChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: headless chromium takes seconds")
	}
	bin := chromium(t)
	dir := t.TempDir()

	// First prove that the harness sees console errors at all.
	bad := filepath.Join(dir, "bad.html")
	os.WriteFile(bad, []byte(`<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'"></head><body><script>nosuchfunction()</script></body></html>`), 0o644)
	if _, console := render(t, bin, bad); len(console) == 0 {
		t.Fatal("a page with an uncaught exception logged nothing: the console check would be blind")
	}

	b, domains := testPage(t)
	good := filepath.Join(dir, "compare.html")
	if err := os.WriteFile(good, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dom, console := render(t, bin, good)
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Errorf("the page's script did not run to its end:\n%.500s", dom)
	}
	m := regexp.MustCompile(`data-domain-charts="(\d+)"`).FindStringSubmatch(dom)
	if m == nil || m[1] != strconv.Itoa(domains) {
		t.Errorf("rendered page counts %v domain charts, want %d", m, domains)
	}
}
