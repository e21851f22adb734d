package kvcache

// NVFP4 stores E2M1 values in blocks of 16 with an E4M3 scale per block and
// a float32 scale per tensor, g = amax/(6·448).
type NVFP4 struct{}

func (NVFP4) Name() string { return "nvfp4" }

const nvfp4Block = 16

func (NVFP4) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	nb := blocks(headDim, nvfp4Block)
	pb := (headDim + 1) / 2 // packed bytes per head
	groups := tokens * heads
	b.Data, b.Scales = grow(b.Data, groups*pb), grow(b.Scales, groups*nb)
	g := amax(x) / (6 * 448)
	b.TensorScale = g
	for h := range groups {
		v := x[h*headDim : (h+1)*headDim]
		data := b.Data[h*pb : (h+1)*pb]
		clear(data)
		for k := range nb {
			lo, hi := k*nvfp4Block, min((k+1)*nvfp4Block, headDim)
			var s uint8
			if g > 0 { // also false for NaN
				s = E4M3(amax(v[lo:hi]) / 6 / g)
			}
			b.Scales[h*nb+k] = s
			e := E4M3Value(s) * g
			for j := lo; j < hi; j++ {
				var q uint8
				if e > 0 {
					q = E2M1(v[j] / e)
				}
				data[j/2] |= q << (4 * (j % 2))
			}
		}
	}
}

func (NVFP4) Decode(b *Block, x []float32) {
	hd := b.HeadDim
	nb := blocks(hd, nvfp4Block)
	pb := (hd + 1) / 2
	g := b.TensorScale
	for h := range b.Tokens * b.Heads {
		data := b.Data[h*pb : (h+1)*pb]
		for j := range hd {
			s := E4M3Value(b.Scales[h*nb+j/nvfp4Block])
			x[h*hd+j] = E2M1Value(data[j/2]>>(4*(j%2))) * s * g
		}
	}
}
