package rowconv

import (
	"math"
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
