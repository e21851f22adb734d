package model

import (
	"math"
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// TestMistral3YarnFactor checks the YaRN cos/sin factor A that mistral3
// takes from rope.scaling.yarn_log_multiplier (lm) and attn_factor, with
// m(a) = 1 + 0.1·a·ln 16 for tiny-mistral3's factor 16: A = attn·m(1)/m(lm)
// when lm ≠ 0, attn·m(1) otherwise; and the temperature's settings.
func TestMistral3YarnFactor(t *testing.T) {
	dir := oracle.Require(t)
	const a = "mistral3."
	m := func(x float64) float64 { return 1 + 0.1*x*math.Log(16) }
	cases := []struct {
		name  string
		meta  map[string]any
		A     float64
		beta  float64
		nOrig int
	}{
		{"file (lm 1)", nil, 1, 0.1, 32},
		{"lm absent", map[string]any{a + "rope.scaling.yarn_log_multiplier": nil}, m(1), 0.1, 32},
		{"lm 0", map[string]any{a + "rope.scaling.yarn_log_multiplier": float32(0)}, m(1), 0.1, 32},
		{"lm 0.5, attn 0.8", map[string]any{a + "rope.scaling.yarn_log_multiplier": float32(0.5), a + "rope.scaling.attn_factor": float32(0.8)}, 0.8 * m(1) / m(0.5), 0.1, 32},
		{"no temperature", map[string]any{a + "attention.temperature_scale": nil}, 1, 0, 0},
		{"no original context", map[string]any{a + "rope.scaling.type": "none", a + "rope.scaling.original_context_length": nil}, 1, 0.1, 512},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := oracle.Model(dir, "tiny-mistral3")
			if c.meta != nil {
				path = rewriteOracle(t, dir, "tiny-mistral3", c.meta, nil, nil)
			}
			md, err := Load(path, Options{KVDtype: "f32"})
			if err != nil {
				t.Fatal(err)
			}
			defer md.Close()
			net := md.net.(*mistral3)
			r := net.rope
			got := r.AttnFactor
			if r.ExtFactor != 0 {
				got *= 1 + 0.1*math.Log(1/r.FreqScale)
			}
			if math.Abs(got-c.A) > 1e-6 {
				t.Errorf("cos/sin factor %v, want %v", got, c.A)
			}
			if math.Abs(net.temp.beta-c.beta) > 1e-7 || net.temp.floor != c.nOrig {
				t.Errorf("temperature β %v over %d positions, want %v over %d", net.temp.beta, net.temp.floor, c.beta, c.nOrig)
			}
		})
	}
	t.Run("no context length", func(t *testing.T) {
		path := rewriteOracle(t, dir, "tiny-mistral3", map[string]any{a + "rope.scaling.type": "none",
			a + "rope.scaling.original_context_length": nil, a + "context_length": nil}, nil, nil)
		md, err := Load(path, Options{KVDtype: "f32"})
		if err == nil {
			md.Close()
			t.Fatal("loaded; want an error")
		}
		if !strings.Contains(err.Error(), "mistral3.attention.temperature_scale") {
			t.Fatalf("error %q; want it to name mistral3.attention.temperature_scale", err)
		}
	})
}
