package model

import "ppl.dev/score/nn"

// cogvlm: CogVLM's language model, as llama.cpp 0.7.0 runs text tokens:
// llama's block with q, k and v as width-sized thirds of attn_qkv (no
// bias), RoPE over whole heads by ggml_rope, whose base is 10000 with no
// scaling and no rope_freqs whatever the file says (the options that would
// change it are refused), an output matrix or the tied embedding. Each
// layer's visual expert (vis_attn_qkv, vis_attn_output, vis_gate, vis_up,
// vis_down), which llama.cpp requires and runs only for image embeddings,
// is checked present and not read.
func init() { Register("cogvlm", newCogVLM) }

// cogvlmVisual are the visual expert's tensors of a layer.
var cogvlmVisual = []string{"vis_attn_qkv", "vis_attn_output", "vis_gate", "vis_up", "vis_down"}

func newCogVLM(l *Loader) Network {
	hp := l.HP
	if !l.widthThirds() {
		return nil
	}
	if o := l.Opts; o.RopeFreqBase > 0 || o.RopeScaling != "" || o.RopeScaleFactor > 0 || o.RopeOrigCtx > 0 {
		l.Failf("--rope-* options for cogvlm: llama.cpp rotates it by ggml_rope's fixed base 10000 without scaling, whatever the file or the options say")
		return nil
	}
	d := l.baseDecoder(cogvlmNeoX)
	if l.Err() != nil || !l.wholeHeads(d.rope) {
		return nil
	}
	*d.rope = nn.RoPE{HeadDim: hp.HeadDim, Dims: hp.HeadDim, NeoX: cogvlmNeoX, Base: 10000, FreqScale: 1, AttnFactor: 1}
	l.rinfo = RopeInfo{Layout: "normal", Dims: hp.HeadDim, FreqBase: 10000, Scaling: "none", Factor: 1, AttnFactor: 1}
	if cogvlmNeoX {
		l.rinfo.Layout = "neox"
	}
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		for _, v := range cogvlmVisual {
			if !l.Has(p + v + ".weight") {
				l.Failf("missing tensor %s%s.weight (the visual expert, which llama.cpp 0.7.0 requires)", p, v)
			}
			l.pass(p + v + ".weight")
		}
		if l.Has(p + "attn_qkv.bias") {
			l.Failf("tensor %sattn_qkv.bias: llama.cpp's cogvlm has no attention biases (it refuses the file)", p)
		}
		ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", hp.Embd), o: l.Linear(p+"attn_output", hp.Embd, hp.Embd),
			ffnNorm: l.Norm(p+"ffn_norm", hp.Embd), ffn: l.DenseFFN(p, hp.Embd, hp.FFN)}
		if qkv := l.LinearRows(p+"attn_qkv", hp.Embd, hp.Embd, hp.Embd, hp.Embd); qkv != nil {
			ly.q, ly.k, ly.v = qkv[0], qkv[1], qkv[2]
		}
		return ly
	})
}

const cogvlmNeoX = true
