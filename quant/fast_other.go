//go:build !amd64

package quant

func archInit() {}
