package model

import (
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// TestGemma3Options checks what gemma3 reads from its metadata: the
// sliding pattern (layer i slides iff i % P < P-1, with the sliding RoPE
// base and no scaling), the soft-cap, and the errors for bad values.
func TestGemma3Options(t *testing.T) {
	dir := oracle.Require(t)
	const a = "gemma3."
	load := func(t *testing.T, meta map[string]any) (*Model, error) {
		path := oracle.Model(dir, "tiny-gemma3")
		if meta != nil {
			path = rewriteOracle(t, dir, "tiny-gemma3", meta, nil, nil)
		}
		return Load(path, Options{KVDtype: "f32"})
	}
	for _, c := range []struct {
		name    string
		meta    map[string]any
		sliding string // per layer: s sliding, g global
		softcap float64
	}{
		{"file", nil, "sssssg", 0},
		{"pattern 3, soft-cap 20", map[string]any{a + "attention.sliding_window_pattern": uint32(3), a + "final_logit_softcapping": float32(20)}, "ssgssg", 20},
		{"pattern 1", map[string]any{a + "attention.sliding_window_pattern": uint32(1)}, "gggggg", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := load(t, c.meta)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			g := m.net.(*gemma3)
			var got strings.Builder
			for _, ly := range g.layers {
				switch {
				case ly.attn.Window == 32 && ly.rope.Base == 10000 && ly.rope.FreqScale == 1:
					got.WriteByte('s')
				case ly.attn.Window == 0 && ly.rope.Base == 1e6 && ly.rope.FreqScale == 1.0/8:
					got.WriteByte('g')
				default:
					got.WriteByte('?')
				}
			}
			if got.String() != c.sliding || g.head.SoftCap != c.softcap {
				t.Errorf("layers %s, soft-cap %v; want %s, %v", got.String(), g.head.SoftCap, c.sliding, c.softcap)
			}
		})
	}
	for _, c := range []struct {
		name string
		meta map[string]any
		want string
	}{
		{"no window", map[string]any{a + "attention.sliding_window": nil}, "missing metadata gemma3.attention.sliding_window"},
		{"zero window", map[string]any{a + "attention.sliding_window": uint32(0)}, "gemma3.attention.sliding_window = 0"},
		{"zero pattern", map[string]any{a + "attention.sliding_window_pattern": uint32(0)}, "gemma3.attention.sliding_window_pattern = 0"},
		{"negative soft-cap", map[string]any{a + "final_logit_softcapping": float32(-1)}, "gemma3.final_logit_softcapping = -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := load(t, c.meta)
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q; want it to contain %q", err, c.want)
			}
		})
	}
}
