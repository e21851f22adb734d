// Command kvtable prints the KV-cache table of bench/kv-dtypes.sh: for each
// report made with --reference on the same model and --reference-kv-dtype
// f32, the PPL ratio against the f32 cache and the KL divergence from it.
//
//	kvtable MODEL DTYPE=report.json...
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/tidwall/gjson"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: kvtable MODEL DTYPE=report.json...")
		os.Exit(2)
	}
	for _, arg := range os.Args[2:] {
		dtype, path, ok := strings.Cut(arg, "=")
		b, err := os.ReadFile(path)
		if !ok || err != nil {
			fmt.Fprintf(os.Stderr, "kvtable: %s: %v\n", arg, err)
			os.Exit(1)
		}
		o := gjson.GetBytes(b, "overall")
		fmt.Printf("| %s | %s | %d | %.6f ± %.6f | %.3g | %.3g | %.2f%% |\n", os.Args[1], dtype,
			o.Get("scored_tokens").Int(), o.Get("reference.ppl_ratio").Float(), o.Get("reference.ppl_ratio_se").Float(),
			o.Get("kld.mean").Float(), o.Get("kld.p99").Float(), 100*o.Get("top1.agreement").Float())
	}
}
