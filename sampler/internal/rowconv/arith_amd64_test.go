package rowconv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobatch/gobatch/readers/zarr"
	"golang.org/x/sys/cpu"
)

// TestArithKept: the arithmetic kernels reproduce the table for the usual parameters
// (so the fuzz test compares them, not the table loops, with the scalar path), and
// are not set up where they cannot express the masks.
func TestArithKept(t *testing.T) {
	cases := []Params{
		{Src: zarr.Int16, CF: zarr.CFParams{Scale: 0.001, Masks: []float64{-1}}},
		{Src: zarr.Int16, CF: zarr.CFParams{Scale: 0.001, Offset: 273.15, Masks: []float64{-1, -32768}}, Norm: true, Mean: 280, Std: 12.5, NaNFill: true},
		{Src: zarr.Uint16, CF: zarr.CFParams{Scale: 0.01, Offset: -5, Masks: []float64{65535, math.NaN()}}, NaNFill: true},
		{Src: zarr.Int8, CF: zarr.CFParams{Scale: 1}, Norm: true, Mean: 0.5, Std: 3},
		{Src: zarr.Uint8, CF: zarr.CFParams{Scale: 0.5, Offset: 10, Masks: []float64{255, 0.5, 1e6}}},
		{Src: zarr.Float16, CF: zarr.CFParams{Scale: 1}},
		{Src: zarr.Float16, CF: zarr.CFParams{Scale: 0.5, Offset: 1, Masks: []float64{-0.0, 65504}}, Norm: true, Mean: 1, Std: 0.25, NaNFill: true},
	}
	for _, p := range cases {
		c, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if !cpu.X86.HasAVX2 || p.Src == zarr.Float16 && !cpu.X86.HasF16C {
			continue // no kernel
		}
		if p.CF.Offset != 0 && goFuses() {
			// The decoder's v*scale+offset is one fused multiply-add in this build
			// (GOAMD64=v3): the kernel, which rounds twice, may not reproduce it, and
			// the table is used instead (still bit for bit: FuzzRow).
			continue
		}
		if !c.hasArith() {
			t.Errorf("%s %+v: no arithmetic kernel", p.Src, p.CF)
		}
	}
	c, err := New(Params{Src: zarr.Int16, CF: zarr.CFParams{Scale: 1, Masks: []float64{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.hasArith() {
		t.Error("three masks: an arithmetic kernel was set up")
	}
}

// hasArith reports whether c's AVX2 kernel is an arithmetic one.
func (c *Conv) hasArith() bool { return c.a != nil }

// goFuses reports whether this build fuses x*y+z into one multiply-add (the spec allows
// it; GOAMD64=v3 does it): with x*y = 1 - 2^-60 exactly, rounded to 1, adding -1 gives
// 0 unfused and -2^-60 fused.
func goFuses() bool {
	return fmaProbe(1+0x1p-30, 1-0x1p-30, -1) != 0
}

//go:noinline
func fmaProbe(x, y, z float64) float64 { return x*y + z }

// TestArithF32: the float32 kernel is set up for normalised float32 (clipped or not) and
// for a NaN fill of 0, not for other fills or CF, and gives the scalar path's bits for
// every class of value (NaNs, infinities, zeros of both signs, subnormals, values equal to
// the bounds) with bounds of every kind, including the zeros Go's min and max order.
func TestArithF32(t *testing.T) {
	if !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: no float32 kernel")
	}
	for _, p := range []Params{
		{Src: zarr.Float32, CF: zarr.CFParams{Scale: 1}, NaNFill: true, Fill: -1},
		{Src: zarr.Float32, CF: zarr.CFParams{Scale: 2}, Norm: true, Mean: 1, Std: 2},
		{Src: zarr.Float32, CF: zarr.CFParams{Scale: 1, Masks: []float64{-999}}, Norm: true, Mean: 1, Std: 2},
		{Src: zarr.Float32, CF: zarr.CFParams{Scale: 1}},
	} {
		c, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if c.hasArith() {
			t.Errorf("%+v: a float32 kernel was set up", p)
		}
	}
	specials := []uint32{0x7f800001, 0x7fc00000, 0xffbfffff, 0x7f800000, 0xff800000, 0x80000000, 0x00000000,
		0x00000001, 0x807fffff, 0x3f800000, 0xbf800000, 0x40400000, 0x7f7fffff, 0xff7fffff}
	bounds := [][2]float64{{math.Inf(-1), math.Inf(1)}, {0, 3}, {math.Copysign(0, -1), 3}, {-1, 0},
		{-1, math.Copysign(0, -1)}, {0, 0}, {math.Copysign(0, -1), math.Copysign(0, -1)}, {-1, 1}, {-1e-40, 1e-40}}
	rng := rand.New(rand.NewPCG(7, 28))
	raw := make([]byte, 0, 4*1024)
	for i := 0; i < 1024; i++ {
		var v uint32
		switch i % 4 {
		case 0:
			v = specials[rng.IntN(len(specials))]
		case 1:
			v = rng.Uint32() // any bits
		default:
			v = math.Float32bits(float32(rng.NormFloat64() * 2))
		}
		raw = binary.NativeEndian.AppendUint32(raw, v)
	}
	for _, b := range bounds {
		for _, norm := range [][2]float64{{0, 1}, {0.25, 1.5}, {-3, 1e-3}} {
			for _, clip := range []bool{false, true} {
				for _, nan := range []bool{false, true} {
					p := Params{Src: zarr.Float32, CF: zarr.CFParams{Scale: 1}, Norm: true, Mean: norm[0], Std: norm[1],
						Clip: clip, ClipMin: b[0], ClipMax: b[1], NaNFill: nan}
					c, err := New(p)
					if err != nil {
						t.Fatal(err)
					}
					if !c.hasArith() {
						t.Fatalf("%+v: no float32 kernel", p)
					}
					want := reference(t, p, raw, len(raw)/4)
					for _, m := range []int{1, 3, 8, 13, 24, 64} {
						for _, off := range []int{0, 1, 5} {
							fc := fuzzCase{p: p, n: len(want), dstOff: off, rowM: m, rowGap: off, nt: off == 5, raw: raw}
							fc.checkConv(t, pathAVX2, c, fmt.Sprintf("float32 %+v rows of %d", p, m), want)
						}
					}
				}
			}
		}
	}
}
