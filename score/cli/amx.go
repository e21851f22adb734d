package cli

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/cpu"

	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// llama.cpp's CPU backend built for a CPU with AMX-INT8 (nn.AMXTaken)
// multiplies some matrices in its AMX kernels' order, not its AVX-512 or
// AVX2 build's: llama-perplexity's figures on such a machine are those of
// --activations int8-amx, not of int8 or int8-avx2. amxNotice says so,
// naming the matrices, so that a user comparing the two knows why they
// part and which mode gives llama.cpp's figures there.

// amxNotice is the warning for a model scored in activation mode act on a
// CPU with AMX-INT8 (amx) whose matrices llama.cpp would multiply with
// its AMX kernels; "" when there is nothing to say.
func amxNotice(name string, info model.Info, act string, amx bool) string {
	build := map[string]string{model.ActInt8: "AVX-512", model.ActInt8AVX2: "AVX2"}[act]
	if !amx || build == "" {
		return ""
	}
	var n int
	var roles, types []string
	tied := slices.Contains(info.Shared, "output=token_embd")
	for _, w := range info.Matrices {
		if w.Name == "token_embd.weight" && !tied {
			continue // read by row only
		}
		if nn.AMXTaken(w.Type, w.In, w.Out, w.Experts > 0) {
			n++
			role := model.Role(w.Name)
			if role == "token_embd" {
				role = "output" // the tied head
			}
			roles = append(roles, role)
			types = append(types, w.Type.String())
		}
	}
	if n == 0 {
		return ""
	}
	slices.Sort(roles)
	slices.Sort(types)
	return fmt.Sprintf("this CPU has AMX-INT8: llama.cpp built for it (Debian's sapphirerapids backend, or -march=native) multiplies %d of %s's matrices (%s; %s) with its AMX kernels, whose sums are not those of its %s build, which --activations %s reproduces: llama-perplexity's figures on this machine are --activations int8-amx's",
		n, name, strings.Join(slices.Compact(types), ", "), strings.Join(slices.Compact(roles), ", "), build, act)
}

// hostAMX says whether this CPU has AMX-INT8 (and its tiles).
func hostAMX() bool { return cpu.X86.HasAMXInt8 && cpu.X86.HasAMXTile }
