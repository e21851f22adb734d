package pretokenize

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

const (
	exprGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	exprLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	exprQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	exprKana   = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	exprDSV3   = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
	exprBloom  = " ?[^(\\s|.,!?…。，、।۔،)]+"
	contr      = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	// the cased word alternatives of youtu and tiny_aya (llama.cpp 0.7.0
	// collapses \p{Lu}, \p{Ll}, ... all to its letter class)
	exprCased = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` + contr +
		`?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` + contr + `?|`
)

// refExprs are llama-vocab.cpp's expression lists (llm_tokenizer_bpe), as
// written there, for the pre-tokenizers whose expressions llama.cpp runs
// (or dispatches to a custom splitter: GPT-2, Llama-3, AFMoE's digits).
var refExprs = map[string][]string{
	"default":    {`[\p{P}\$\+<=>\^~\|]+`, exprGPT2, `\p{N}+`, `[0-9][0-9][0-9]`},
	"falcon":     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", exprGPT2, `[0-9][0-9][0-9]`},
	"starcoder":  {`\p{N}`, exprGPT2},
	"gpt-2":      {exprGPT2},
	"llama-bpe":  {exprLlama3},
	"glm4":       {exprLlama3},
	"qwen2":      {exprQwen2},
	"grok-2":     {exprQwen2},
	"bailingmoe": {`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`},
	"qwen35":     {contr + `|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"seed-coder": {contr + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"ufakzeka":   {`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"jais-2": {contr + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+` +
		`|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`},
	"minicpm5":       {`\p{N}{1,3}`, contr + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"laguna":         {`[^\n]+|[\n]+`, exprQwen2},
	"deepseek-coder": {"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", `\p{N}`},
	"deepseek-v3":    {`\p{N}{1,3}`, exprKana, exprDSV3},
	"spark2_5": {`\p{N}{1,3}`, exprKana,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
		`\p{N}`},
	"afmoe": {`\p{AFMoE_digits}`,
		"[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+",
		exprDSV3},
	"youtu": {"[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
		exprCased + `\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"tiny_aya":   {`\p{AFMoE_digits}`, exprCased + `\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"exaone-moe": {contr + `|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`},
	"bloom":      {exprBloom},
	"viking":     {exprBloom, `\p{N}`},
	"chameleon":  {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", `\p{N}`, "[\\p{P}!-/:-@\\[-`{-~]", exprGPT2},
	"superbpe":   {`\p{N}+`, `(?=(\d{3})+(?!\d))`},
	"gpt-4o": {`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+` + contr + `?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*` + contr +
		`?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"tekken": {`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
}

func init() {
	refCustom[`\p{AFMoE_digits}`] = afmoeDigits
}

// refAlphabet holds code points of every class the expressions tell apart.
var refAlphabet = []rune(" \t\n\r\v\u00a0\u3000\u0085'sStTrReEvVlLmMdDaAzZIGB0159\u0663\u00bd\u2167.,!?~$`+/(|)-_<>:@[]{}^\\\"#" +
	"\u00e9\u00c9\u00df\u4e16\u754c\u3042\u30a2\u00b5\uac00\u0e40\u0301\u0308\u200d\U0001F600\u2026\u3002\uff0c\u3001\u0964\u060c\u00ab\u2018\uff01\u0378\ue000\U00020000\u017f\u212a")

func randText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if rng.IntN(8) == 0 { // runs make the quantifiers work
			r := refAlphabet[rng.IntN(len(refAlphabet))]
			for k := rng.IntN(6); k >= 0; k-- {
				b.WriteRune(r)
			}
			continue
		}
		b.WriteRune(refAlphabet[rng.IntN(len(refAlphabet))])
	}
	return b.String()
}

func checkAgainstRef(t *testing.T, name, s string) bool {
	t.Helper()
	var txt Text
	txt.Reset([]byte(s))
	want, err := refSplit(refExprs[name], &txt)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := p.Split(nil, &txt, nil)
	if len(got) == 0 {
		got = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s %q:\n got %q\nwant %q", name, s, pieces(&txt, got), pieces(&txt, want))
		return false
	}
	return true
}

func pieces(t *Text, bounds []int) []string {
	var out []string
	start := 0
	for _, e := range bounds {
		out = append(out, string(t.Runes[start:e]))
		start = e
	}
	return out
}

// TestSplitReference checks the scanners against llama.cpp's expressions,
// run by the reference matcher, on adversarial and random texts.
func TestSplitReference(t *testing.T) {
	fixed := []string{"", "Hello world", "don't DON'T they'LL", "'s'S 's", "x  \n y", "a\r\n\r\n  b", "end  ",
		"1 12 123 1234 12345 1234567", "\u0663\u0664\u0665\u0666 \u00bd\u00bd", "e\u0301\u0308 \u0301a \u0301", "\u4e16\u754c\u3042\u30a2abc\uac00",
		"HelloWorld ABCdef aBC", "\u00c9COLE\u00e9t\u00e9 \u00df", "x\u200dy \U0001F600\u200d\U0001F600", "a~b ~ ~~", "<sentinel:12> IMGIMGABZ IMGIMGABCDEZ",
		"\t\t    x      y", "a.b, c! d? e\u2026\u3002f", "\u00a0\u00a0x \u3000 y\u0085", "foo's bar'S\n'll", "1234567890123", "a\u0663\u0664b12",
		strings.Repeat(" ", 9) + "x" + strings.Repeat(" ", 600), "$+<=>^`|~", "(a|b)", "/a/b\n/", "x\n\n\ny \r", "\u017fs \u212a"}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 300
	if testing.Short() {
		n = 50
	}
	for name := range refExprs {
		t.Run(name, func(t *testing.T) {
			bad := 0
			for _, s := range fixed {
				if !checkAgainstRef(t, name, s) {
					bad++
				}
			}
			for i := 0; i < n && bad < 5; i++ {
				if !checkAgainstRef(t, name, randText(rng, 1+rng.IntN(24))) {
					bad++
				}
			}
		})
	}
}

// FuzzSplitReference is TestSplitReference's comparison on fuzzed texts.
func FuzzSplitReference(f *testing.F) {
	for _, s := range []string{"Hello world", "don't 123456", "a\r\n b  c\t", "\u4e16\u754c \U0001F600 e\u0301", "IMGIMGAZ <sentinel:1>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64 {
			return // the reference backtracks
		}
		for name := range refExprs {
			checkAgainstRef(t, name, s)
		}
	})
}
