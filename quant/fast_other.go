//go:build !amd64 && !arm64

package quant

func archInit() {}
