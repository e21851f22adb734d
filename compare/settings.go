package compare

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"ppl.dev/aggregate/report"
	"ppl.dev/pipe"
)

// Setting is a setting that differs between the compared reports: its
// value in each report, in report order (base first), "-" where a report
// does not say. A KV sweep's reports differ in "kv dtype" only, and the
// comparison says so instead of leaving the reader to guess from the
// directory names.
type Setting struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// settingNames lists the settings Differences looks at, in display order.
var settingNames = []string{
	"model", "model sha256", "general.name", "weight types", "kv dtype", "activations", "device",
	"rope", "ssm state dtype", "reference", "reference kv dtype", "protocol", "tokenizer", "corpus", "ppl-score",
}

// Settings returns what a report says about how it was measured: the
// workload and the score header of its provenance (the first, when shards
// were scored alike).
func Settings(r *report.Report) map[string]string {
	m := map[string]string{}
	w := r.Workload
	if w.Model != nil {
		m["model"], m["model sha256"] = w.Model.Name, short(w.Model.SHA256)
		m["weight types"] = weightTypes(w.Model.WeightTypes)
		if w.Model.GeneralName != "" {
			m["general.name"] = w.Model.GeneralName
		}
	}
	m["protocol"] = protocolName(w.Protocol)
	if w.Tokenizer != nil {
		m["tokenizer"] = short(w.Tokenizer.ID)
	}
	m["corpus"] = corpusName(w)
	if len(r.Provenance.Score) > 0 {
		var h pipe.Header
		if json.Unmarshal(r.Provenance.Score[0], &h) == nil && h.Score != nil {
			sc := h.Score
			m["kv dtype"], m["activations"], m["device"] = sc.KVDtype, sc.Activations, sc.Device
			m["ssm state dtype"] = sc.SSMStateDtype
			m["rope"] = rope(sc.RoPE)
			if sc.ALiBi > 0 { // the ALiBi architectures: no RoPE
				m["rope"] = fmt.Sprintf("none (ALiBi, maximum bias %g)", sc.ALiBi)
			}
			if sc.Reference != nil {
				m["reference"] = sc.Reference.Name + " " + short(sc.Reference.SHA256)
				m["reference kv dtype"] = sc.RefKVDtype
			}
			m["ppl-score"] = h.Version
		}
	}
	if m["kv dtype"] == "" {
		m["kv dtype"] = w.KVDtype
	}
	if m["reference"] == "" && w.Reference != nil {
		m["reference"] = w.Reference.Name + " " + short(w.Reference.SHA256)
	}
	return m
}

// Differences lists the settings whose values are not all the same.
func Differences(inputs []Input) []Setting {
	all := make([]map[string]string, len(inputs))
	for i, in := range inputs {
		all[i] = Settings(in.Report)
	}
	out := []Setting{}
	for _, name := range settingNames {
		s := Setting{Name: name}
		same := true
		for _, m := range all {
			v := m[name]
			if v == "" {
				v = "-"
			}
			s.Values = append(s.Values, v)
			same = same && v == s.Values[0]
		}
		if !same {
			out = append(out, s)
		}
	}
	return out
}

func protocolName(p pipe.Protocol) string {
	s := fmt.Sprintf("%s context %d", p.Mode, p.Context)
	if p.Stride > 0 {
		s += fmt.Sprintf(" stride %d", p.Stride)
	}
	return s
}

// weightTypes summarises the tensor types: each type with the roles that
// use it, "Q4_K: attn_q ffn_gate; Q6_K: ffn_down output".
func weightTypes(wt map[string]string) string {
	byType := map[string][]string{}
	for role, types := range wt {
		for _, t := range strings.Split(types, ",") {
			byType[t] = append(byType[t], role)
		}
	}
	var types []string
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	var parts []string
	for _, t := range types {
		sort.Strings(byType[t])
		parts = append(parts, t+": "+strings.Join(byType[t], " "))
	}
	return strings.Join(parts, "; ")
}

// rope formats the RoPE settings as sorted key=value pairs.
func rope(m map[string]any) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}
