package main

import (
	"fmt"
	"os"
	"strings"

	"ppl.dev/gguf"
)

func main() {
	f, err := gguf.Open(os.Args[1])
	if err != nil {
		panic(err)
	}
	for _, kv := range f.Metadata {
		if !strings.HasPrefix(kv.Key, "tokenizer") && !strings.HasPrefix(kv.Key, "general") {
			continue
		}
		v := kv.Value
		if v.Len() > 0 {
			fmt.Printf("%s: array len %d\n", kv.Key, v.Len())
			continue
		}
		fmt.Printf("%s: %v\n", kv.Key, v.Any())
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	cnt := map[int32]int{}
	for i, t := range types {
		cnt[t]++
		if t == 4 || (t == 3 && cnt[t] < 30) {
			fmt.Printf("type %d id %d %q\n", t, i, toks[i])
		}
	}
	fmt.Println(cnt)
	if len(os.Args) > 2 {
		// ▁ check
		n := 0
		for _, t := range toks {
			i := strings.Index(t[1:], "▁")
			for j := 1; j < len(t); {
				k := strings.Index(t[j:], "▁")
				if k < 0 {
					break
				}
				p := j + k
				if !strings.HasSuffix(t[:p], "▁") {
					n++
					if n < 20 {
						fmt.Printf("mid-▁ token %q\n", t)
					}
					break
				}
				j = p + 3
			}
			_ = i
		}
		fmt.Println("tokens with ▁ after non-▁:", n)
	}
}
