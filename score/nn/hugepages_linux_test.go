package nn

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestArenaHugePages checks that an arena chunk is mapped with the
// kernel's hint for huge pages: its /proc/self/smaps entry has the "hg"
// flag (MADV_HUGEPAGE), which the system honours where transparent huge
// pages are "madvise" or "always".
func TestArenaHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("a kernel without transparent huge pages: %v", err)
	}
	c := chunkAlloc[float32](1 << 21)
	defer chunkFree(c)
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&c[0])))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			found = true
		}
		if found && strings.HasPrefix(line, "VmFlags:") {
			if !strings.Contains(line+" ", " hg ") {
				t.Errorf("the chunk's mapping %s: %s, without hg", start, line)
			}
			return
		}
	}
	t.Fatalf("no mapping starts at %s in /proc/self/smaps", start)
}
