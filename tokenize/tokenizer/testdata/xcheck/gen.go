package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
)

var pool = []string{
	"a", "b", "e", "s", "t", "z", "A", "B", "S", "T", "Z", "hello", "World", "HTTPServer", "camelCase", "don", "état", "Straße",
	"0", "1", "7", "1234567", "42", " ", " ", " ", " ", "  ", "\t", "\n", "\n", "\r", "\r\n", "\v", "\f",
	".", ",", ";", ":", "!", "?", "'", "\"", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "|", "-", "_", "+", "=", "*", "&", "^", "%", "$", "#", "@", "~", "`",
	"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "'x",
	"é", "É", "ß", "ø", "Ω", "ω", "Ж", "ж", "ı", "İ", "ǅ", "ʰ", "ª", "µ", "ſ",
	"世", "界", "天", "。", "、", "「", "」", "한", "국", "の", "カ", "ー",
	"\u0301", "\u0308", "क", "\u093F", "ก", "\u0E31", "٣", "３", "²", "Ⅻ", "½", "Ａ", "ａ", "！", "，", "“", "”", "‘", "’",
	"\u00A0", "\u3000", "\u2003", "\u2028", "\u0085", "\u1680", "\u202F",
	"😀", "👩\u200d💻", "🇯🇵", "👍🏽", "\uFE0F", "\x00", "\x1b", "\x7f", "\u200B", "\uFEFF", "\uE000", "\u0378", "\uFFFD", "\U00010400", "\U0001E900", "\U00020000",
	"<|endoftext|>", "<|begin_of_text|>", "<s>", "</s>", "<think>", "<|im_start|>", "<tool_call>", "<|fim_prefix|>", "<unk>",
	"\u2581", "▁▁", "...", "--", "://", "0x1F", "3.14", "1,000",
}

func main() {
	r := rand.New(rand.NewSource(20261129))
	var texts []string
	crafted := []string{
		"", " ", "  ", "a", "\n", " \n ", "Hello world", "Hello  world  ", "don't DON'T they'll I'M we've",
		"12345678901234", " 123 4567 ", "x1y22z333", "HTTPServerError parseJSON XMLHttpRequest", "ÉCOLE école ÉcOlE",
		"ABCé abcÉ", "a/b/c\n//\r\n/", "  \t\n\n  x", "trailing \n", "\r\n\r\n\r\n", "e\u0301 e\u0301\u0301", "😀😀😀 👍🏽",
		"世界你好，世界！", "한국어 텍스트", "Straße Ωmega", "\u3000\u3000x", "a\u00a0b", "$100 + 5% = ~", "a`b", "（全角）",
	}
	texts = append(texts, crafted...)
	nrand := 400
	if s := os.Getenv("NRAND"); s != "" {
		fmt.Sscan(s, &nrand)
	}
	if s := os.Getenv("SEED"); s != "" {
		var seed int64
		fmt.Sscan(s, &seed)
		r = rand.New(rand.NewSource(seed))
	}
	for i := 0; i < nrand; i++ {
		n := 1 + r.Intn(30)
		var b strings.Builder
		for j := 0; j < n; j++ {
			b.WriteString(pool[r.Intn(len(pool))])
		}
		texts = append(texts, b.String())
	}
	// Each oracle text named on the command line is tokenized by its first
	// 3,000 bytes (cut back to a character boundary), but only its name,
	// that length and the SHA-256 of those bytes go into the test data
	// (oracle texts may not be copied into the repository): they are
	// written to stderr, one JSON object per line, for the "oracle_texts"
	// field, and the texts themselves stay in stdout, which llama.cpp reads.
	for _, f := range os.Args[1:] {
		d, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		if len(d) > 3000 {
			n := 3000
			for n > 0 && d[n]&0xC0 == 0x80 {
				n--
			}
			d = d[:n]
		}
		texts = append(texts, string(d))
		sum := sha256.Sum256(d)
		ref, _ := json.Marshal(map[string]any{"text": strings.TrimSuffix(filepath.Base(f), ".txt"), "bytes": len(d), "sha256": hex.EncodeToString(sum[:])})
		fmt.Fprintln(os.Stderr, string(ref))
	}
	for _, t := range texts {
		j, _ := json.Marshal(t)
		fmt.Println(string(j))
	}
}
