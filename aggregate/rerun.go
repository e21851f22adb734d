package aggregate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// splitOf describes how a window header's shards were dealt, for the
// provenance check: shards dealt differently do not partition one run.
func splitOf(p *pipe.Protocol) string {
	if p.Shard == "" {
		return "none"
	}
	if p.Split == nil {
		return "count"
	}
	b, _ := json.Marshal(p.Split)
	return string(b)
}

// rerunHint names the command that makes the absent shards, rebuilt from
// the flags in the first input's headers: "; rerun it with: ppl-tokenize
// ... | ppl-window ... --shard 2/3 | ppl-score ... > shard-2.ndjson".
func (c *corpus) rerunHint(absent []string) string {
	in := c.inputs[0]
	tok, win, sc := in.headers[pipe.StageTokenize], in.headers[pipe.StageWindow], in.headers[pipe.StageScore]
	if tok == nil || win == nil || sc == nil || len(tok.Flags) == 0 || len(win.Flags) == 0 || len(sc.Flags) == 0 {
		return ""
	}
	shard, out, which := "K/"+fmt.Sprint(in.shard.N), "shard-K.ndjson", "each (K = "
	if len(absent) == 1 {
		sh, _ := protocol.ParseShard(absent[0])
		shard, out, which = absent[0], fmt.Sprintf("shard-%d.ndjson", sh.K), "it"
	} else {
		ks := make([]string, len(absent))
		for i, a := range absent {
			ks[i], _, _ = strings.Cut(a, "/")
		}
		which += strings.Join(ks, ", ") + ")"
	}
	winFlags := map[string]any{}
	for k, v := range win.Flags {
		winFlags[k] = v
	}
	winFlags["shard"] = shard
	var text []string
	tokFlags := map[string]any{}
	for k, v := range tok.Flags {
		if k == "text" { // the files are arguments after --text
			if files, ok := v.([]any); ok {
				for _, f := range files {
					text = append(text, fmt.Sprint(f))
				}
				tokFlags["text"] = true
				continue
			}
		}
		tokFlags[k] = v
	}
	cmd := "ppl-tokenize" + cmdFlags(tokFlags) + strings.Join(append([]string{""}, shellQuote(text)...), " ") +
		" | ppl-window" + cmdFlags(winFlags) + " | ppl-score" + cmdFlags(sc.Flags) + " > " + out
	return "; rerun " + which + " with: " + cmd
}

// cmdFlags writes header flags back as command-line flags, in name order:
// " --context 4 --stride 2".
func cmdFlags(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		name := " --" + strings.ReplaceAll(k, "_", "-")
		switch v := m[k].(type) {
		case bool:
			if v {
				b.WriteString(name)
			}
		case string:
			if v != "" { // "": the default (reference_kv_dtype)
				b.WriteString(name + " " + shellQuote([]string{v})[0])
			}
		case []any:
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = fmt.Sprint(x)
			}
			b.WriteString(name + " " + shellQuote([]string{strings.Join(parts, ",")})[0])
		case float64:
			b.WriteString(name + " " + strconv.FormatFloat(v, 'f', -1, 64))
		default:
			b.WriteString(name + " " + shellQuote([]string{fmt.Sprint(v)})[0])
		}
	}
	return b.String()
}

// shellQuote quotes the words that a shell would split or expand.
func shellQuote(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return out
}
