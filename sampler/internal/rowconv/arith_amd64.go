package rowconv

import (
	"math"

	"github.com/gobatch/gobatch/readers/zarr"
	"golang.org/x/sys/cpu"
)

// arith holds what the arithmetic kernels (kernels_amd64.s) compute with; the assembly
// reads it by offset: four float64 at 0, 8, 16, 24, four 32-bit words at 32, 36, 40, 44,
// two float64 at 48, 56.
type arith struct {
	scale, offset, mean, std float64
	mask0, mask1             int32  // raw integers (float16: float32 bits) that read as the masked value
	masked                   uint32 // the decoder's bits for a masked value
	nanZero                  uint32 // the float32 kernel: all ones when NaN becomes 0
	clipMin, clipMax         float64
}

// noMask is a mask no widened 8- or 16-bit value equals.
const noMask = math.MaxInt32

//go:noescape
func arithI16AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func arithU16AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func arithI8AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func arithU8AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func arithF32AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func arithF16AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

// arithKernels are the AVX2 kernels by stored type (float16's needs F16C too).
var arithKernels = map[zarr.Elem]kernel{
	zarr.Float16: arithF16AVX2,
	zarr.Int16:   arithI16AVX2,
	zarr.Uint16:  arithU16AVX2,
	zarr.Int8:    arithI8AVX2,
	zarr.Uint8:   arithU8AVX2,
}

// newArith sets up the AVX2 arithmetic kernel for c's type when it can express p (at
// most two masks that a value can equal), and keeps it only if it gives the table's
// bits for every raw bit pattern: the table is the scalar path's result, so a kernel
// that differs anywhere (a compiler that fuses the scalar multiply and add, say) is
// never used.
func newArith(c *Conv, p Params) {
	fn, ok := arithKernels[p.Src]
	if p.Norm && p.Clip || p.NaNFill && p.Fill != 0 { // the kernels neither clip nor fill with other than 0: the table serves
		return
	}
	if !ok || !cpu.X86.HasAVX2 || p.Src == zarr.Float16 && !cpu.X86.HasF16C {
		return
	}
	masks, ok := intMasks(p.Src, p.CF.Masks)
	if p.Src == zarr.Float16 {
		masks, ok = f32Masks(p.CF.Masks)
	}
	if !ok {
		return
	}
	nan := float32(math.NaN())
	a := &arith{scale: p.CF.Scale, offset: p.CF.Offset, mean: p.Mean, std: p.Std,
		mask0: masks[0], mask1: masks[1], masked: math.Float32bits(nan)}
	flags := 0
	if p.Norm {
		flags |= 2
	}
	if p.NaNFill {
		flags |= 4
	}
	table, raw := c.table(), patterns(c.size)
	got := make([]float32, len(table))
	fn(a, &table[0], &got[0], 0, &raw[0], 0, 1, len(got), flags, nil)
	if sameTable(got, table) {
		c.kern[pathAVX2], c.a, c.flags = fn, a, flags
	}
}

// newArithF32 sets up the AVX2 kernel for float32 values that are normalised (clipped or
// not) or whose NaN becomes 0, and that CF leaves as stored (scale 1, offset 0, no mask):
// its instructions are the scalar path's (see F32COMP), so no table is needed to check it;
// FuzzRow and TestArithF32 compare them. A NaN fill other than 0 keeps the scalar path.
func newArithF32(c *Conv, p Params) {
	if !cpu.X86.HasAVX2 || p.CF.Scale != 1 || p.CF.Offset != 0 || hasMask(p.CF.Masks) || p.NaNFill && p.Fill != 0 {
		return
	}
	a := &arith{mean: 0, std: 1, clipMin: math.Inf(-1), clipMax: math.Inf(1)}
	if p.Norm {
		a.mean, a.std = p.Mean, p.Std
		if p.Clip {
			a.clipMin, a.clipMax = p.ClipMin, p.ClipMax
		}
	}
	if p.NaNFill {
		a.nanZero = math.MaxUint32
	}
	c.kern[pathAVX2], c.a = arithF32AVX2, a
}

// intRange is the range of each integer type.
var intRange = map[zarr.Elem][2]float64{
	zarr.Int8: {math.MinInt8, math.MaxInt8}, zarr.Uint8: {0, math.MaxUint8},
	zarr.Int16: {math.MinInt16, math.MaxInt16}, zarr.Uint16: {0, math.MaxUint16},
}

// intMasks returns the masks as the integers of type src they match (a mask that no
// value of src equals is dropped), padded with noMask; ok is false when more than two
// remain.
func intMasks(src zarr.Elem, masks []float64) (out [2]int32, ok bool) {
	lo, hi := intRange[src][0], intRange[src][1]
	out = [2]int32{noMask, noMask}
	n := 0
	for _, m := range masks {
		if m != math.Trunc(m) || m < lo || m > hi { // NaN fails too
			continue
		}
		if n == 2 {
			return out, false
		}
		out[n] = int32(m)
		n++
	}
	return out, true
}

// f32Masks returns the float16 masks as float32 bits (a mask that is not a float32 is
// no float16 value either, and is dropped; so is NaN), padded with a NaN (equal to
// nothing); ok is false when more than two remain.
func f32Masks(masks []float64) (out [2]int32, ok bool) {
	nan := int32(math.Float32bits(float32(math.NaN())))
	out = [2]int32{nan, nan}
	n := 0
	for _, m := range masks {
		if float64(float32(m)) != m { // NaN fails too
			continue
		}
		if n == 2 {
			return out, false
		}
		out[n] = int32(math.Float32bits(float32(m)))
		n++
	}
	return out, true
}

func sameTable(got, want []float32) bool {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return false
		}
	}
	return true
}

// table is c's table of final values by raw bit pattern.
func (c *Conv) table() []float32 {
	if c.lut8 != nil {
		return c.lut8[:]
	}
	return c.lut16[:]
}
