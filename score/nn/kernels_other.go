//go:build !amd64 && !arm64

package nn

func archInit() {}
