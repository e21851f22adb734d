package model

import (
	"testing"

	"ppl.dev/oracle"
)

func TestKVProbe(t *testing.T) {
	dir := oracle.Require(t)
	for _, kv := range []string{"f32", "f16", "bf16", "fp8", "int8", "k8v4", "nvfp4"} {
		for _, stem := range []string{"tiny-llama-spm-f16", "tiny-llama-spm-q8_0"} {
			f, _ := oracle.Read(oracle.Golden(dir, stem, "mixed-unicode", "disjoint"))
			m := oracleModel(t, dir, stem, kv)
			d := scoreFile(t, m, f, -1)
			e, _ := oracle.Read(oracle.Exact(dir, stem, "mixed-unicode", "disjoint"))
			d2 := scoreFile(t, m, e, -1)
			t.Logf("%s %s: vs llama.cpp %v | vs exact %v", kv, stem, &d, &d2)
		}
	}
}
