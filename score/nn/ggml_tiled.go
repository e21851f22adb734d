package nn

import "unsafe"

// The order of ggml-cpu's tiled kernel (ggml_compute_forward_mul_mat_tiled,
// for ggmlTiledRows activation rows or more) for the weight types it takes
// (Q6_K, Q3_K, Q5_K, IQ2_XXS, IQ3_S, IQ1_M here; Q2_K and Q4_K where they
// are not repacked): per output and super-block of 256, one exact integer
// sum
//
//	S = Σ over the groups j of ls_j·Σ_{e in j} v_e·qx_e
//
// (v the weight's signed integer, DecodeInt8's q - Offset; ls_j the
// group's integer scale), then acc = fma(float32(S)·d0, dx, acc) over the
// super-blocks in order from acc = 0 (d0 the weight super-block's float32
// scale, the type's constant factor folded in; dx the activations' Q8_K
// scale); acc is the output. The types with a minimum m_j per group (Q2_K,
// Q4_K, Q5_K; dmin per super-block) subtract it before dx:
//
//	acc = fma(fma(-dmin, float32(Σ_j m_j·B_j), float32(S)·d0), dx, acc)
//
// (B_j the activations' Σqx over group j; VFNMADD, then VFMADD).
// tiledGeneric is the reference kernel; the VNNI and AVX2 kernels (tiledVNNI,
// tiledAVX2 in gen) give its bits.
//
// llama.cpp's AMX kernels (ggml-cpu/amx/mmq.cpp: tinygemm_kernel_amx and,
// for one activation row, tinygemm_kernel_vnni, in the same order) sum the
// same integers S and M per super-block, and then (tiledGeneric with amx)
//
//	acc = fma(float32(S), d0·dx, acc)
//	acc = fma(float32(M), -(dmin·dx), acc)   (types with a minimum)
//
// the scale products rounded to float32, from acc = 0.

// tiledFunc computes an m-row tile of 32 columns (one panel) from a record
// pointer x (row t at x + t·ldx) over nb blocks of 32 values (a multiple
// of 8): w is the panel of biased weights (q = v - negoff, decodeInt8's),
// ls[j·32 + r] the integer scale of group j of row r, d0[B·32 + r] the
// float32 scale of super-block B, and for a type with a minimum mins[j·32
// + r] and dm[B·32 + r] its m_j and dmin (nil without); doff and xsoff are
// the record's d and Σqx-per-group fields.
type tiledFunc func(x *byte, ldx int, w *uint32, ls, mins *int32, d0, dm *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff int)

// tiledGeneric is the reference tiled kernel for m rows and groups of g, in
// the AMX kernels' order with amx.
func tiledGeneric(m, g int, amx bool, x *byte, ldx int, w *uint32, lsp, minp *int32, d0p, dmp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff int) {
	X := unsafe.Slice(x, (m-1)*ldx+max(doff+4*nb, xsoff+4*(32/g)*nb))
	W := unsafe.Slice(w, nb*8*32)
	ng := nb * 32 / g
	LS := unsafe.Slice(lsp, ng*32)
	D0 := unsafe.Slice(d0p, nb/8*32)
	var MN []int32
	var DM []float32
	if minp != nil {
		MN, DM = unsafe.Slice(minp, ng*32), unsafe.Slice(dmp, nb/8*32)
	}
	C := unsafe.Slice(c, (m-1)*ldc+32)
	gps := 256 / g // groups per super-block
	for t := range m {
		rec := X[t*ldx:]
		for r := range 32 {
			var acc float32
			for sb := range nb / 8 {
				var s, sm int32
				for j := sb * gps; j < (sb+1)*gps; j++ {
					xs := *(*int32)(unsafe.Pointer(&rec[xsoff+4*j]))
					T := int32(negoff) * xs
					for i := j * g; i < (j+1)*g; i++ {
						wq := W[(i/4)*32+r] >> (8 * (i % 4)) & 0xff
						T += int32(wq) * int32(int8(rec[i]))
					}
					s += LS[j*32+r] * T
					if MN != nil {
						sm += MN[j*32+r] * xs
					}
				}
				dx := *(*float32)(unsafe.Pointer(&rec[doff+4*8*sb]))
				if amx {
					acc = fma32(float32(s), D0[sb*32+r]*dx, acc)
					if MN != nil {
						acc = fma32(float32(sm), -(DM[sb*32+r] * dx), acc)
					}
					continue
				}
				v := float32(s) * D0[sb*32+r]
				if MN != nil {
					v = fma32(-DM[sb*32+r], float32(sm), v)
				}
				acc = fma32(v, dx, acc)
			}
			C[t*ldc+r] = acc
		}
	}
}

// tiledKernels indexes kernels.tiled: groups of 32 or 16, without or with
// a minimum, as int8Kernels.
func tiledKernels(g int, hasMin bool) int {
	i := 0
	if g == 16 {
		i = 2
	}
	if hasMin {
		i++
	}
	return i
}

func initGenericTiled() {
	for _, g := range []int{32, 16} {
		for _, hasMin := range []bool{false, true} {
			i := tiledKernels(g, hasMin)
			for m := 1; m <= 4; m++ {
				generic.tiled[i] = append(generic.tiled[i], func(x *byte, ldx int, w *uint32, ls, mins *int32, d0, dm *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff int) {
					tiledGeneric(m, g, false, x, ldx, w, ls, mins, d0, dm, nb, negoff, c, ldc, doff, xsoff)
				})
				generic.tiledAMX[i] = append(generic.tiledAMX[i], func(x *byte, ldx int, w *uint32, ls, mins *int32, d0, dm *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff int) {
					tiledGeneric(m, g, true, x, ldx, w, ls, mins, d0, dm, nb, negoff, c, ldc, doff, xsoff)
				})
			}
		}
	}
}

// tiledScales writes a weight row's scales for panelTiled: ls (one per
// group of the type's Int8Format) and d0 (one per super-block), and for a
// type with a minimum (f.HasMin) its m (per group) and dmin (per
// super-block) in the same pass; m and dm are nil for the others.
type tiledScales func(row []byte, ls []int32, d0 []float32, m []int32, dm []float32)

// panelTiled computes columns [r0, r1) of out in the tiled kernel's order
// (see above) for a type of Int8Format f, whose rows' scales scales
// writes.
func (l *Linear) panelTiled(buf []float32, r0, r1 int, a *qacts, out []float32, scales tiledScales) {
	l.panelTiledOrder(buf, r0, r1, a, out, scales, false)
}

// panelTiledOrder is panelTiled, in the AMX kernels' order with amx.
func (l *Linear) panelTiledOrder(buf []float32, r0, r1 int, a *qacts, out []float32, scales tiledScales, amx bool) {
	f, _ := l.int8Able()
	k, rows := l.In, r1-r0
	ng, nsb := k/f.Group, k/256
	c := carver(buf)
	rowsQ := l.decodeCodes(&c, r0, r1)
	panelQ := carve[uint32](&c, 32*k/4)
	i := tiledKernels(f.Group, f.HasMin)
	kerns, flip := kern.tiled[i], kern.flipBias
	if f.Max < 64 && len(kern.tiledNarrow[i]) > 0 {
		kerns = kern.tiledNarrow[i]
	}
	if amx {
		kerns = kern.tiledAMX[i]
	}
	if len(kerns) == 0 {
		kerns, flip = generic.tiled[i], false
		if amx {
			kerns = generic.tiledAMX[i]
		}
	}
	d0, pd0 := carve[float32](&c, 32*nsb), carve[float32](&c, 32*nsb)
	ls, pls := carve[int32](&c, 32*ng), carve[uint32](&c, 32*ng)
	var m []int32
	var dm []float32
	if f.HasMin {
		m, dm = carve[int32](&c, 32*ng), carve[float32](&c, 32*nsb)
	}
	for r := range rows {
		row := l.Data[(r0+r)*l.RowBytes : (r0+r+1)*l.RowBytes]
		if f.HasMin {
			scales(row, ls[r*ng:(r+1)*ng], d0[r*nsb:(r+1)*nsb], m[r*ng:(r+1)*ng], dm[r*nsb:(r+1)*nsb])
		} else {
			scales(row, ls[r*ng:(r+1)*ng], d0[r*nsb:(r+1)*nsb], nil, nil)
		}
	}
	packCodes(panelQ, unsafe.Slice((*uint32)(unsafe.Pointer(&rowsQ[0])), rows*k/4), k/4, rows, flip)
	pack32Words(pls, unsafe.Slice((*uint32)(unsafe.Pointer(&ls[0])), rows*ng), ng, rows)
	pack32(pd0, d0, nsb, rows)
	var pmin *int32
	var pdm *float32
	if f.HasMin {
		pm, pd := carve[uint32](&c, 32*ng), carve[float32](&c, 32*nsb)
		pack32Words(pm, unsafe.Slice((*uint32)(unsafe.Pointer(&m[0])), rows*ng), ng, rows)
		pack32(pd, dm, nsb, rows)
		pmin, pdm = (*int32)(unsafe.Pointer(&pm[0])), &pd[0]
	}
	xsOff := a.xs32Off
	if f.Group == 16 {
		xsOff = a.xs16Off
	}
	po := panelOut{out, carve[float32](&c, 4*panelRows), l.Out, r0, rows}
	for t0 := 0; t0 < a.n; t0 += len(kerns) {
		m := min(len(kerns), a.n-t0)
		c, ldc := po.at(t0)
		kerns[m-1](&a.buf[t0*a.rec], a.rec, &panelQ[0], (*int32)(unsafe.Pointer(&pls[0])), pmin, &pd0[0], pdm, k/32, -f.Offset, c, ldc, a.dOff, xsOff)
		po.flush(t0, m)
	}
}
