package cuda

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"ppl.dev/kernels"
	"ppl.dev/score/nn"
)

//go:generate go test -run ^TestLibmHeader$ -update .

var update = flag.Bool("update", false, "rewrite kernels/libmdata.cuh from nn.LibmData")

// libmHeader is the text of kernels/libmdata.cuh: glibc's expf and logf
// data as nn's ports hold them, so that the device's ports (libm.cuh) read
// the same numbers from one source.
func libmHeader() string {
	exp2f, logf, poly := nn.LibmData()
	hex := func(f float64) string { return strconv.FormatFloat(f, 'x', -1, 64) }
	var b strings.Builder
	b.WriteString("// Generated from score/nn/libm.go (nn.LibmData) by go generate: do not edit.\n")
	b.WriteString("// glibc's expf and logf data (ARM's optimized routines) for libm.cuh.\n")
	b.WriteString("#pragma once\n\n")
	b.WriteString("// __exp2f_data.tab (N = 32): the bits of 2^(i/32) minus i << 47.\n")
	b.WriteString("__constant__ u64 exp2f_tab[32] = {\n")
	for i := 0; i < len(exp2f); i += 4 {
		fmt.Fprintf(&b, "    %#016xull, %#016xull, %#016xull, %#016xull,\n", exp2f[i], exp2f[i+1], exp2f[i+2], exp2f[i+3])
	}
	b.WriteString("};\n\n")
	b.WriteString("// __logf_data.tab: per subinterval of [0x3f330000, 2·0x3f330000) 1/c and\n// log(c).\n")
	b.WriteString("__constant__ double logf_tab[16][2] = {\n")
	for _, r := range logf {
		fmt.Fprintf(&b, "    {%s, %s},\n", hex(r[0]), hex(r[1]))
	}
	b.WriteString("};\n\n")
	b.WriteString("// __logf_data.poly: the log1p polynomial's coefficients past the first.\n")
	fmt.Fprintf(&b, "__constant__ double logf_poly[3] = {%s, %s, %s};\n", hex(poly[0]), hex(poly[1]), hex(poly[2]))
	return b.String()
}

// The committed kernels/libmdata.cuh is the one nn.LibmData generates.
func TestLibmHeader(t *testing.T) {
	if err := kernels.CheckGenerated("../../kernels/libmdata.cuh", libmHeader(), *update, "go generate ./score/cuda"); err != nil {
		t.Error(err)
	}
}
