//go:build unix && !linux

package nn

// adviseHuge leaves the pages as the system gives them.
func adviseHuge([]byte) {}
