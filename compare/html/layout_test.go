package html

import (
	"bytes"
	"context"
	"encoding/binary"
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

// layoutCheck, appended to the page under test only, records in
// body[data-layout] "ok" or what overflows: the page wider than the
// window, an SVG wider than the window, a chart text outside its SVG's
// viewBox (a clipped label), a missing legend.
const layoutCheck = `<script>
(function () {
  var bad = [], de = document.documentElement;
  if (de.scrollWidth > window.innerWidth) bad.push("page " + de.scrollWidth + "px wide in a " + window.innerWidth + "px window");
  document.querySelectorAll("svg").forEach(function (svg, i) {
    var vb = svg.viewBox.baseVal, r = svg.getBoundingClientRect();
    if (r.right > window.innerWidth + 0.5) bad.push("svg " + i + " overflows the window");
    svg.querySelectorAll("text").forEach(function (t) {
      var b = t.getBBox();
      if (b.x < vb.x - 0.5 || b.x + b.width > vb.x + vb.width + 0.5) bad.push("svg " + i + " text \"" + t.textContent + "\" clipped: x " + b.x.toFixed(1) + " to " + (b.x + b.width).toFixed(1) + " of " + vb.width);
    });
  });
  if (!document.querySelector(".curves .legend .swatch")) bad.push("the NLL curves have no legend");
  document.body.dataset.layout = bad.length ? bad.join("; ") : "ok";
})();
</script>
</body>`

// layoutPage is a comparison with what used to overflow: long labels, a
// 64-hex tokenizer id, KLD columns, and PPLs close together.
func layoutPage(t *testing.T) []byte {
	t.Helper()
	tok := strings.Repeat("0123456789abcdef", 4)
	var inputs []compare.Input
	for i, label := range []string{"20261201T063926Z-tiny-llama-spm-q8_0", "20261201T063928Z-tiny-llama-spm-q8_0-kv-nvfp4", "20261201T063931Z-tiny-llama-spm-q8_0-kv-int8"} {
		s := reporttest.Default()
		s.SHA256, s.Tokenizer, s.Jitter, s.KLD = strings.Repeat(string(rune('1'+i)), 64), tok, 0.002*float64(i), i > 0
		s.Model = label + ".gguf"
		inputs = append(inputs, compare.Input{Path: label + "/report.json", Label: label, Report: reporttest.Build(t, s)})
	}
	res, err := compare.Compare(inputs, compare.Options{Resamples: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, res, inputs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// At 1280 and 1920 px the page fits the window (tables scroll inside
// their box), no chart label is clipped, the curves have a legend, and a
// screenshot of the window's width can be taken.
func TestChromiumLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: headless chromium takes seconds")
	}
	bin := chromium(t)
	dir := t.TempDir()
	page := bytes.Replace(layoutPage(t), []byte("</body>"), []byte(layoutCheck), 1)
	path := filepath.Join(dir, "layout.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{1280, 1920} {
		size := "--window-size=" + itoa(width) + ",1000"
		dom := chromiumRun(t, bin, size, "--dump-dom", "file://"+path)
		m := regexp.MustCompile(`data-layout="([^"]*)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("%d px: the layout check did not run:\n%.500s", width, dom)
		}
		if m[1] != "ok" {
			t.Errorf("%d px: %s", width, m[1])
		}
		shot := filepath.Join(dir, "shot-"+itoa(width)+".png")
		chromiumRun(t, bin, size, "--hide-scrollbars", "--screenshot="+shot, "file://"+path)
		png, err := os.ReadFile(shot)
		if err != nil {
			t.Fatalf("%d px: no screenshot: %v", width, err)
		}
		// PNG: 8-byte signature, IHDR length and type, then width, height.
		if len(png) < 24 || string(png[1:4]) != "PNG" || int(binary.BigEndian.Uint32(png[16:20])) != width {
			t.Errorf("%d px: the screenshot is not a PNG %d px wide", width, width)
		}
	}
}

func chromiumRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// Close PPLs get an axis that does not start at 0, and says so.
func TestBarsZoom(t *testing.T) {
	d := compare.Domain{Name: "en", Rows: []compare.Row{{Report: "a", Present: true, PPL: 100}, {Report: "b", Present: true, PPL: 100.2}}}
	if s := string(bars(d, "chart")); !strings.Contains(s, "(axis not from 0)") {
		t.Errorf("close values drawn from 0:\n%s", s)
	}
	d.Rows[1].PPL = 300
	if s := string(bars(d, "chart")); !strings.Contains(s, `class="tick axis-from">0<`) {
		t.Errorf("far apart values not drawn from 0:\n%s", s)
	}
}
