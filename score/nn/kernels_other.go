//go:build !amd64

package nn

func archInit() {}
