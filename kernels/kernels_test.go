package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Every source has its PTX, made from the current sources by the command
// its header names.
func TestPTXUpToDate(t *testing.T) {
	srcs, _ := filepath.Glob("*.cu")
	if len(srcs) == 0 {
		t.Fatal("no .cu files")
	}
	headers, _ := filepath.Glob("*.cuh")
	sort.Strings(headers)
	var hdr []byte
	for _, h := range headers {
		b, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		hdr = append(hdr, b...)
	}
	shaRe := regexp.MustCompile(`(?m)^// Sources sha256: ([0-9a-f]{64})`)
	for _, src := range srcs {
		name := strings.TrimSuffix(src, ".cu")
		cu, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p, err := PTX(name)
		if err != nil {
			t.Errorf("%s: %v (run make kernels)", src, err)
			continue
		}
		text := string(p)
		for _, want := range []string{"// Command: nvcc -arch=compute_80 -ptx " + src, "// nvcc: ", ".target sm_80", "\x00"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s.ptx lacks %q", name, want)
			}
		}
		m := shaRe.FindStringSubmatch(text)
		sum := sha256.Sum256(append(append([]byte(nil), cu...), hdr...))
		if m == nil || m[1] != hex.EncodeToString(sum[:]) {
			t.Errorf("%s.ptx was not made from the current %s and headers: run make kernels", name, src)
		}
	}
	if got, want := len(Modules()), len(srcs); got != want {
		t.Errorf("%d PTX modules for %d sources: %v", got, want, Modules())
	}
}

func TestPTXUnknown(t *testing.T) {
	if _, err := PTX("nope"); err == nil || !strings.Contains(err.Error(), "attention") {
		t.Errorf("PTX(nope): %v", err)
	}
}

// Every kernel's static shared memory fits the 48 KiB a launch may use
// without opting in to more (cuFuncSetAttribute): a kernel over it would
// first fail on a GPU, when the driver compiles the PTX. nvcc declares a
// kernel's own __shared__ variables in its body ("demoted") and those of a
// device function that several kernels inline at module scope, which the
// kernels' bodies then name; a template instantiation's (attn_fa_body<256>)
// belong to the kernels that use that instantiation.
func TestPTXSharedMemory(t *testing.T) {
	const limit = 48 << 10
	sharedRe := regexp.MustCompile(`(?m)^\s*\.shared \.align (\d+) \.b8 (\w+)\[(\d+)\];`)
	entryRe := regexp.MustCompile(`(?m)^\.(?:visible |weak )?\.(entry|func) (?:\([^)]*\) )?(\w+)`)
	type shVar struct {
		align, size int
	}
	largest, largestName := 0, ""
	for _, mod := range Modules() {
		p, err := PTX(mod)
		if err != nil {
			t.Fatal(err)
		}
		text := string(p)
		if strings.Contains(text, ".extern .shared") {
			t.Logf("%s.ptx: dynamic shared memory (.extern .shared), not counted here: the launch sizes it", mod)
		}
		vars := map[string]shVar{}
		var order []string
		for _, m := range sharedRe.FindAllStringSubmatch(text, -1) {
			a, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[3])
			vars[m[2]] = shVar{a, n}
			order = append(order, m[2])
		}
		locs := entryRe.FindAllStringSubmatchIndex(text, -1)
		for i, l := range locs {
			end := len(text)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			kind, name, body := text[l[2]:l[3]], text[l[4]:l[5]], text[l[1]:end]
			bytes, used := 0, []string{}
			for _, v := range order {
				if regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`).MatchString(body) {
					a := vars[v].align
					bytes = (bytes+a-1)/a*a + vars[v].size
					used = append(used, v)
				}
			}
			if kind == "func" {
				// a call's shared memory would belong to its callers: the kernels inline every device function
				if bytes > 0 {
					t.Errorf("%s.ptx: device function %s uses shared memory (%v): this test does not follow calls", mod, name, used)
				}
				continue
			}
			if bytes > 0 {
				t.Logf("%s.ptx %s: %d bytes of static shared memory", mod, name, bytes)
			}
			if bytes > limit {
				t.Errorf("%s.ptx %s: %d bytes of static shared memory (%v), more than %d", mod, name, bytes, used, limit)
			}
			if bytes > largest {
				largest, largestName = bytes, name
			}
		}
	}
	// i8mm_g32: two chunks of 64 × (128 + 16) bytes of each operand, with
	// their 64 × 4 scales, minima and activation scales and 64 × 9 sums,
	// and the tile's 64 token rows (int8mm.cu): 1024 bytes under the limit
	if largestName != "i8mm_g32" || largest != 48128 {
		t.Errorf("the largest static shared memory is %s's %d bytes, want i8mm_g32's 48128", largestName, largest)
	}
}
