package quant

import (
	"math"
	"sort"
	"testing"
)

// f16Ref decodes a finite half by its definition, in float64.
func f16Ref(h uint16) float64 {
	exp, mant := int(h>>10&0x1f), float64(h&0x3ff)
	var v float64
	if exp == 0 {
		v = math.Ldexp(mant, -24)
	} else {
		v = math.Ldexp(1+mant/1024, exp-15)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// TestF16Exhaustive checks every one of the 65536 half values: F16ToF32
// against the definition, and F32ToF16 taking it back to the same bits
// (NaNs: to a NaN of the same sign, quieted, same top payload bits).
func TestF16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		back := F32ToF16(f)
		switch {
		case isNaN16(h):
			if !math.IsNaN(float64(f)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, f)
			}
			if want := h | 0x200; back != want {
				t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x, want %#04x", h, back, want)
			}
		case h&0x7fff == 0x7c00:
			if !math.IsInf(float64(f), 0) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToF32(%#04x) = %v, want signed infinity", h, f)
			}
			if back != h {
				t.Fatalf("F32ToF16(%v) = %#04x, want %#04x", f, back, h)
			}
		default:
			if float64(f) != f16Ref(h) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, f, f16Ref(h))
			}
			if back != h {
				t.Fatalf("F32ToF16(%v) = %#04x, want %#04x", f, back, h)
			}
		}
	}
}

func TestF32ToF16Edges(t *testing.T) {
	for _, c := range []struct {
		name string
		f    float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"plus zero", 0, 0x0000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max half", 65504, 0x7bff},
		{"just below overflow tie", math.Nextafter32(65520, 0), 0x7bff},
		{"overflow tie rounds to even (inf)", 65520, 0x7c00},
		{"beyond max", 1e6, 0x7c00},
		{"max float32", math.MaxFloat32, 0x7c00},
		{"minus inf", float32(math.Inf(-1)), 0xfc00},
		{"tie 1+2^-11 to even (down)", 1 + 1.0/2048, 0x3c00},
		{"tie 1+3*2^-11 to even (up)", 1 + 3.0/2048, 0x3c02},
		{"above tie rounds up", math.Nextafter32(1+1.0/2048, 2), 0x3c01},
		{"mantissa carry bumps exponent", 2 - 1.0/4096, 0x4000},
		{"smallest normal", 1.0 / 16384, 0x0400},
		{"largest subnormal", 1023.0 / (1 << 24), 0x03ff},
		{"tie between largest subnormal and smallest normal", 1023.5 / (1 << 24), 0x0400},
		{"smallest subnormal", 1.0 / (1 << 24), 0x0001},
		{"2^-25 ties to zero", 1.0 / (1 << 25), 0x0000},
		{"just above 2^-25", math.Nextafter32(1.0/(1<<25), 1), 0x0001},
		{"3*2^-25 ties to even (2 units)", 3.0 / (1 << 25), 0x0002},
		{"5*2^-25 ties to even (2 units)", 5.0 / (1 << 25), 0x0002},
		{"negative subnormal", -3.0 / (1 << 24), 0x8003},
		{"tiny negative to minus zero", -1e-10, 0x8000},
		{"float32 subnormal", math.Float32frombits(1), 0x0000},
		{"third", 1.0 / 3, 0x3555},
		{"quiet NaN", math.Float32frombits(0x7fc00000), 0x7e00},
		{"signalling NaN is quieted", math.Float32frombits(0x7f800001), 0x7e00},
		{"NaN payload top bits kept", math.Float32frombits(0xffa02000), 0xfe01 | 0x100},
	} {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("%s: F32ToF16(%v [%#08x]) = %#04x, want %#04x", c.name, c.f, math.Float32bits(c.f), got, c.want)
		}
	}
}

// f32ToF16Ref rounds finite f to the nearest half by searching the sorted
// finite halves, ties to the even encoding; at or beyond 65520 (the tie
// between 65504 and the next power-of-two step) it is infinity.
func f32ToF16Ref(f float32, pos []float64) uint16 {
	a := math.Abs(float64(f))
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	if a >= 65520 {
		return sign | 0x7c00
	}
	hi := sort.SearchFloat64s(pos, a) // first half >= a; halves 0..0x7bff in order
	if hi == len(pos) {
		return sign | 0x7bff
	}
	if pos[hi] == a || hi == 0 {
		return sign | uint16(hi)
	}
	lo := hi - 1
	dl, dh := a-pos[lo], pos[hi]-a // exact: a and the halves fit in float64 with room
	switch {
	case dl < dh:
		return sign | uint16(lo)
	case dh < dl:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	default:
		return sign | uint16(hi)
	}
}

// TestF32ToF16Rounding compares F32ToF16 with a nearest-value search on
// every half value, every midpoint between neighbours and the float32 just
// either side of each, and a spread of all float32 bit patterns.
func TestF32ToF16Rounding(t *testing.T) {
	pos := make([]float64, 0x7c00)
	for h := range pos {
		pos[h] = f16Ref(uint16(h))
	}
	check := func(f float32) {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return
		}
		if got, want := F32ToF16(f), f32ToF16Ref(f, pos); got != want {
			t.Fatalf("F32ToF16(%v [%#08x]) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for h := 0; h+1 < len(pos); h++ {
		mid := float32((pos[h] + pos[h+1]) / 2) // exact in float32: 12 significant bits
		for _, f := range []float32{float32(pos[h]), mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(f)
			check(-f)
		}
	}
	for u := uint64(0); u < 1<<32; u += 4093 {
		check(math.Float32frombits(uint32(u)))
	}
}

// TestBF16Exhaustive: every bfloat16 widens to the float32 with the same top
// half and narrows back to itself (NaNs: quieted).
func TestBF16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if got := math.Float32bits(f); got != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) bits %#08x, want %#08x", h, got, uint32(h)<<16)
		}
		want := h
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			want = h | 0x40
		}
		if got := F32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

func TestF32ToBF16Edges(t *testing.T) {
	for _, c := range []struct {
		name string
		bits uint32
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"tie rounds to even (down)", 0x3f808000, 0x3f80},
		{"tie rounds to even (up)", 0x3f818000, 0x3f82},
		{"above tie", 0x3f808001, 0x3f81},
		{"below tie", 0x3f807fff, 0x3f80},
		{"max float32 overflows to inf", 0x7f7fffff, 0x7f80},
		{"inf", 0x7f800000, 0x7f80},
		{"minus inf", 0xff800000, 0xff80},
		{"signalling NaN quieted", 0x7f800001, 0x7fc0},
		{"negative NaN keeps sign", 0xff800001, 0xffc0},
		{"NaN payload top bits kept", 0x7f8a0000, 0x7fca},
		{"subnormal rounds", 0x00018000, 0x0002},
		{"minus zero", 0x80000000, 0x8000},
	} {
		if got := F32ToBF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("%s: F32ToBF16(%#08x) = %#04x, want %#04x", c.name, c.bits, got, c.want)
		}
	}
}
