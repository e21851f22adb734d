package model

// granite: IBM's dense Granite 3.x models, as llama.cpp 0.7.0 runs them:
// llama's decoder (adjacent-pair RoPE) with four multipliers from the
// metadata, each a float32 product where llama.cpp scales:
//   - embedding_scale on the token embeddings;
//   - attention.scale as the attention's score scale, instead of
//     1/sqrt(head);
//   - residual_scale on each attention and FFN output before it joins the
//     residual stream;
//   - the logits multiplied by float32(1/logit_scale).
//
// smollm3: SmolLM3, llama's decoder with no RoPE in every fourth layer
// (llama.cpp's n_no_rope_layer_step, 4 for SmolLM3 and read from no key).
func init() {
	Register("granite", newGranite)
	Register("smollm3", func(l *Loader) Network {
		d := newDecoder(l, decoderOpts{})
		if l.Err() != nil {
			return nil
		}
		for i := range d.layers {
			d.layers[i].noRoPE = (i+1)%4 == 0
		}
		return d
	})
}

func newGranite(l *Loader) Network {
	d := newDecoder(l, decoderOpts{})
	if l.Err() != nil {
		return nil
	}
	m := meta{l.f, l.HP.Arch}
	var err error
	get := func(key string) float64 {
		v := 0.0
		if err == nil {
			v, err = m.float(key, 0)
		}
		return v
	}
	d.embScale, d.resScale = get("embedding_scale"), get("residual_scale")
	attn, logit := get("attention.scale"), get("logit_scale")
	if err != nil {
		l.fail(err)
		return nil
	}
	if attn != 0 {
		d.attn.Scale = attn
	}
	if logit != 0 {
		d.head.Scale = float64(1 / float32(logit)) // 1.0f / f_logit_scale
	}
	return d
}
