package cuda

import (
	"os"
	"path/filepath"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

func TestExpRounding(t *testing.T) {
	dir := oracle.Require(t)
	for _, stem := range []string{"tiny-llama-spm-q8_0", "tiny-llama3-q8_0"} {
		path := oracle.Model(dir, stem)
		bf := filepath.Join(t.TempDir(), "bf.gguf")
		WriteBF16Copy(path, bf)
		info, _ := model.Load(path, model.Options{})
		toks := e2eTokens(dir, stem, info.Vocab(), 512)
		for _, mode := range []string{"", "hb", "att", "act", "q", "hb,att,act,q"} {
			os.Setenv("SIMEXACT", mode)
			e := newSimEngine()
			e.dev.(*simDevice).bf16Attention = !contains(mode, "q")
			s := e2eCase(t, e, path, bf, "bf16", []e2eWindow{{0, 256, 1}, {100, 356, 228}}, toks, false)
			t.Logf("%s exact=%q: %v", stem, mode, s)
		}
	}
}
