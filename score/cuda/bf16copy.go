package cuda

import (
	"fmt"
	"strings"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// WriteBF16Copy writes a copy of the GGUF model at src to dst with every
// matrix (a tensor of two or more dimensions) stored as BF16, rounded from
// its exact dequantized values as Load rounds weights for the GPU. Scoring
// dst on the CPU gives the reference for the GPU's numbers: the same
// weights, float32 activations. Metadata and vectors are copied unchanged,
// and so are the 2-D tensors the architectures bind as vectors of weights
// (vectorTensor: Gated DeltaNet's ssm_conv1d), which the GPU keeps in
// float32 as the file has them.
func WriteBF16Copy(src, dst string) error {
	f, err := gguf.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.Metadata {
		w.Add(kv.Key, kv.Value)
	}
	for _, t := range f.Tensors {
		data := f.Data(t)
		typ := t.Type
		if len(t.Shape) >= 2 && t.Type != gguf.TypeBF16 && !vectorTensor(t.Name) {
			vals := make([]float32, t.Elements())
			if err := quant.Dequantize(t.Type, data, vals); err != nil {
				return fmt.Errorf("%s: tensor %s: %w", src, t.Name, err)
			}
			out := make([]byte, 2*len(vals))
			for i, v := range vals {
				h := quant.F32ToBF16(v)
				out[2*i], out[2*i+1] = byte(h), byte(h>>8)
			}
			data, typ = out, gguf.TypeBF16
		}
		if err := w.AddTensor(t.Name, typ, t.Shape, data); err != nil {
			return err
		}
	}
	return w.WriteFile(dst)
}

// vectorTensor reports a tensor of two or more dimensions that package
// model binds as an ml.Vector (weights decoded to float32 at load, not a
// Matrix): Gated DeltaNet's convolution, ne {d_conv, channels}.
func vectorTensor(name string) bool {
	return strings.HasSuffix(name, ".ssm_conv1d.weight")
}
