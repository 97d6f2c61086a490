package zarr

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFloat32Decoder holds the decoder (tables for the small types, kernels for the
// others, a copy for float32 that no scale, offset or non-NaN mask changes) to the CF formula evaluated element by element,
// bit for bit, on random raw bits (NaN payloads, -0 and infinities included) with the
// masked value planted.
func TestFloat32Decoder(t *testing.T) {
	types := []struct {
		e Elem
		d DType
	}{
		{Int8, DType{Kind: KindInt, Size: 1}}, {Int16, DType{Kind: KindInt, Size: 2}},
		{Int32, DType{Kind: KindInt, Size: 4}}, {Int64, DType{Kind: KindInt, Size: 8}},
		{Uint8, DType{Kind: KindUint, Size: 1}}, {Uint16, DType{Kind: KindUint, Size: 2}},
		{Uint32, DType{Kind: KindUint, Size: 4}}, {Uint64, DType{Kind: KindUint, Size: 8}},
		{Float16, DType{Kind: KindFloat, Size: 2}}, {Float32, DType{Kind: KindFloat, Size: 4}},
		{Float64, DType{Kind: KindFloat, Size: 8}},
	}
	params := []CFParams{
		{Scale: 1}, {Scale: 0.001}, {Scale: 0.5, Offset: 3, Masks: []float64{255}},
		{Scale: 1, Masks: []float64{-1}}, {Scale: 2, Offset: 1, Masks: []float64{0, -1}},
		{Scale: 1, Masks: []float64{math.NaN()}},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 5000
	for _, ty := range types {
		for _, p := range params {
			dec, err := NewFloat32Decoder(ty.e, p)
			if err != nil {
				t.Fatalf("%s %+v: %v", ty.e, p, err)
			}
			es := ty.d.Size
			raw := make([]byte, n*es)
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			for i := 0; i < n; i += 5 { // the first mask (or -1), then -0
				v := -1.0
				if len(p.Masks) > 0 && !math.IsNaN(p.Masks[0]) {
					v = p.Masks[0]
				}
				if i%10 == 5 {
					v = math.Copysign(0, -1)
				}
				storeFloat(raw[i*es:], ty.d, v)
			}
			got := make([]float32, n)
			dec.Decode(got, raw)
			for i := range got {
				f := loadF(raw[i*es:(i+1)*es], ty.d)
				want := float32(f*p.Scale + p.Offset)
				if ty.e == Float32 && p.Scale == 1 && p.Offset == 0 && (len(p.Masks) == 0 || math.IsNaN(p.Masks[0])) {
					want = math.Float32frombits(uint32(loadU(raw[i*es:], ty.d))) // a copy
				}
				for _, m := range p.Masks {
					if f == m {
						want = float32(math.NaN())
					}
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("%s %+v element %d (raw %v): %v (%#x), want %v (%#x)", ty.e, p, i, f,
						got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
			if !raceEnabled {
				if a := testing.AllocsPerRun(10, func() { dec.Decode(got, raw) }); a != 0 {
					t.Errorf("%s: Decode allocates %v times per call", ty.e, a)
				}
			}
		}
	}
	if _, err := NewFloat32Decoder(ElemNone, CFParams{Scale: 1}); err == nil {
		t.Error("a decoder for ElemNone")
	}
}

// TestFloat64Decoder holds the float64 decoder to the CF formula in float64, element by
// element, on random raw bits of the float types and integers, the masked value planted: no
// rounding to float32 on the way (NaN compared as NaN).
func TestFloat64Decoder(t *testing.T) {
	types := []struct {
		e Elem
		d DType
	}{
		{Int16, DType{Kind: KindInt, Size: 2}}, {Int64, DType{Kind: KindInt, Size: 8}},
		{Float32, DType{Kind: KindFloat, Size: 4}}, {Float64, DType{Kind: KindFloat, Size: 8}},
	}
	params := []CFParams{{Scale: 1}, {Scale: 0.001, Offset: 3}, {Scale: 1, Masks: []float64{-1}}}
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 2000
	for _, ty := range types {
		for _, p := range params {
			dec, err := NewFloat64Decoder(ty.e, p)
			if err != nil {
				t.Fatalf("%s %+v: %v", ty.e, p, err)
			}
			es := ty.d.Size
			raw := make([]byte, n*es)
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			for i := 0; i < n; i += 7 {
				storeFloat(raw[i*es:], ty.d, -1)
			}
			got := make([]float64, n)
			dec.Decode(got, raw)
			for i := range got {
				f := loadF(raw[i*es:(i+1)*es], ty.d)
				want := f*p.Scale + p.Offset
				for _, m := range p.Masks {
					if f == m {
						want = math.NaN()
					}
				}
				if got[i] != want && !(got[i] != got[i] && want != want) {
					t.Fatalf("%s %+v element %d (raw %v): %v, want %v", ty.e, p, i, f, got[i], want)
				}
			}
			if !raceEnabled {
				if a := testing.AllocsPerRun(10, func() { dec.Decode(got, raw) }); a != 0 {
					t.Errorf("%s: Decode allocates %v times per call", ty.e, a)
				}
			}
		}
	}
}

// storeFloat writes v as one element of d (host byte order).
func storeFloat(b []byte, d DType, v float64) {
	var u uint64
	switch {
	case d.Kind == KindFloat && d.Size == 2:
		u = uint64(f32ToF16(float32(v)))
	case d.Kind == KindFloat && d.Size == 4:
		u = uint64(math.Float32bits(float32(v)))
	case d.Kind == KindFloat:
		u = math.Float64bits(v)
	default:
		u = uint64(int64(v))
	}
	for i := 0; i < d.Size; i++ {
		b[i] = byte(u >> (8 * i))
	}
}

// BenchmarkFloat32Decoder decodes one satellite chunk (12 x 12 x 128 x 128) of int16
// through the table, and of int32 through the kernel.
func BenchmarkFloat32Decoder(b *testing.B) {
	for _, e := range []Elem{Int16, Int32} {
		b.Run(e.String(), func(b *testing.B) {
			dec, err := NewFloat32Decoder(e, CFParams{Scale: 0.001, Masks: []float64{-1}})
			if err != nil {
				b.Fatal(err)
			}
			const n = 12 * 12 * 128 * 128
			raw := make([]byte, n*e.Size())
			for i := range raw {
				raw[i] = byte(i * 7)
			}
			dst := make([]float32, n)
			b.SetBytes(n * 4)
			b.ReportAllocs()
			for b.Loop() {
				dec.Decode(dst, raw)
			}
		})
	}
}
