package zarr

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// Elem is a numeric element type of a ReadBox destination. Values in the destination
// are in host byte order.
type Elem uint8

const (
	ElemNone Elem = iota // "the array's own type" in ReadOptions
	Bool
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float16 // IEEE half, stored as its 16 bits
	Float32
	Float64
)

var elemNames = [...]string{"native", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}
var elemSizes = [...]int{0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8}

func (e Elem) String() string {
	if int(e) < len(elemNames) {
		return elemNames[e]
	}
	return fmt.Sprintf("Elem(%d)", uint8(e))
}

// Size is the element size in bytes.
func (e Elem) Size() int {
	if int(e) < len(elemSizes) {
		return elemSizes[e]
	}
	return 0
}

// ParseElem parses a numpy-style type name ("float32", "int16", ...).
func ParseElem(s string) (Elem, error) {
	for i, n := range elemNames {
		if i > 0 && n == s {
			return Elem(i), nil
		}
	}
	return ElemNone, fmt.Errorf("unknown element type %q", s)
}

// converter turns n source elements into n destination elements.
type converter struct {
	fn   convFunc
	args convArgs
}

// convArgs are the CF parameters, passed by value so that converters do not make
// their callers allocate.
type convArgs struct {
	scale  float64
	offset float64
	masks  []float64 // raw values that read as NaN
}

type convFunc func(c convArgs, dst, src unsafe.Pointer, n int)

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func convPlain[S, D number](_ convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*S)(src), n)
	d := unsafe.Slice((*D)(dst), n)
	for i, v := range s {
		d[i] = D(v)
	}
}

// convFromF16 widens half floats.
func convFromF16[D number](_ convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*uint16)(src), n)
	d := unsafe.Slice((*D)(dst), n)
	t := f16Table()
	for i, v := range s {
		d[i] = D(t[v])
	}
}

func convToF16[S number](_ convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*S)(src), n)
	d := unsafe.Slice((*uint16)(dst), n)
	for i, v := range s {
		d[i] = f32ToF16(float32(v))
	}
}

func convBoolTo[D number](_ convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*uint8)(src), n)
	d := unsafe.Slice((*D)(dst), n)
	for i, v := range s {
		if v != 0 {
			d[i] = 1
		} else {
			d[i] = 0
		}
	}
}

func convToBool[S number](_ convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*S)(src), n)
	d := unsafe.Slice((*uint8)(dst), n)
	for i, v := range s {
		if v != 0 {
			d[i] = 1
		} else {
			d[i] = 0
		}
	}
}

func convCopy(c convArgs, dst, src unsafe.Pointer, n int) {
	// n is in bytes here (see newConverter).
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

// convCF applies CF decoding: masked raw values become NaN, others raw*scale+offset.
func convCF[S number, D float32 | float64](c convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*S)(src), n)
	d := unsafe.Slice((*D)(dst), n)
	scale, offset := c.scale, c.offset
	nan := D(math.NaN())
	switch len(c.masks) {
	case 0:
		for i, v := range s {
			d[i] = D(float64(v)*scale + offset)
		}
	case 1:
		m := c.masks[0]
		for i, v := range s {
			f := float64(v)
			if f == m {
				d[i] = nan
			} else {
				d[i] = D(f*scale + offset)
			}
		}
	default:
		for i, v := range s {
			f := float64(v)
			r := D(f*scale + offset)
			for _, m := range c.masks {
				if f == m {
					r = nan
					break
				}
			}
			d[i] = r
		}
	}
}

func convCFF16[D float32 | float64](c convArgs, dst, src unsafe.Pointer, n int) {
	s := unsafe.Slice((*uint16)(src), n)
	d := unsafe.Slice((*D)(dst), n)
	t := f16Table()
	scale, offset := c.scale, c.offset
	nan := D(math.NaN())
	for i, v := range s {
		f := float64(t[v])
		r := D(f*scale + offset)
		for _, m := range c.masks {
			if f == m {
				r = nan
				break
			}
		}
		d[i] = r
	}
}

var (
	f16Once sync.Once
	f16Tab  *[65536]float32
)

func f16Table() *[65536]float32 {
	f16Once.Do(func() {
		t := new([65536]float32)
		for i := range t {
			t[i] = f16ToF32(uint16(i))
		}
		f16Tab = t
	})
	return f16Tab
}

// plainTo returns the converter from S to the destination type.
func plainTo[S number](dst Elem) convFunc {
	switch dst {
	case Bool:
		return convToBool[S]
	case Int8:
		return convPlain[S, int8]
	case Int16:
		return convPlain[S, int16]
	case Int32:
		return convPlain[S, int32]
	case Int64:
		return convPlain[S, int64]
	case Uint8:
		return convPlain[S, uint8]
	case Uint16:
		return convPlain[S, uint16]
	case Uint32:
		return convPlain[S, uint32]
	case Uint64:
		return convPlain[S, uint64]
	case Float16:
		return convToF16[S]
	case Float32:
		return convPlain[S, float32]
	case Float64:
		return convPlain[S, float64]
	}
	return nil
}

func fromF16(dst Elem) convFunc {
	switch dst {
	case Bool:
		return func(c convArgs, d, s unsafe.Pointer, n int) {
			src := unsafe.Slice((*uint16)(s), n)
			out := unsafe.Slice((*uint8)(d), n)
			for i, v := range src {
				out[i] = 0
				if v&0x7fff != 0 {
					out[i] = 1
				}
			}
		}
	case Int8:
		return convFromF16[int8]
	case Int16:
		return convFromF16[int16]
	case Int32:
		return convFromF16[int32]
	case Int64:
		return convFromF16[int64]
	case Uint8:
		return convFromF16[uint8]
	case Uint16:
		return convFromF16[uint16]
	case Uint32:
		return convFromF16[uint32]
	case Uint64:
		return convFromF16[uint64]
	case Float32:
		return convFromF16[float32]
	case Float64:
		return convFromF16[float64]
	}
	return nil
}

func boolTo(dst Elem) convFunc {
	switch dst {
	case Int8:
		return convBoolTo[int8]
	case Int16:
		return convBoolTo[int16]
	case Int32:
		return convBoolTo[int32]
	case Int64:
		return convBoolTo[int64]
	case Uint8:
		return convBoolTo[uint8]
	case Uint16:
		return convBoolTo[uint16]
	case Uint32:
		return convBoolTo[uint32]
	case Uint64:
		return convBoolTo[uint64]
	case Float16:
		return func(_ convArgs, d, s unsafe.Pointer, n int) {
			src := unsafe.Slice((*uint8)(s), n)
			out := unsafe.Slice((*uint16)(d), n)
			for i, v := range src {
				out[i] = 0
				if v != 0 {
					out[i] = 0x3c00
				}
			}
		}
	case Float32:
		return convBoolTo[float32]
	case Float64:
		return convBoolTo[float64]
	}
	return nil
}

func cfTo[S number](dst Elem) convFunc {
	if dst == Float64 {
		return convCF[S, float64]
	}
	return convCF[S, float32]
}

const numElems = int(Float64) + 1

// The converters are built once: taking a generic function's value allocates.
var (
	plainTable [numElems][numElems]convFunc
	cfTable    [numElems][2]convFunc // [src][0: float32, 1: float64]
)

func init() {
	for src := Bool; src <= Float64; src++ {
		for dst := Bool; dst <= Float64; dst++ {
			if src != dst {
				plainTable[src][dst] = plainConv(src, dst)
			}
		}
		cfTable[src][0] = cfConv(src, Float32)
		cfTable[src][1] = cfConv(src, Float64)
	}
}

func cfConv(src, dst Elem) convFunc {
	switch src {
	case Bool, Uint8:
		return cfTo[uint8](dst)
	case Int8:
		return cfTo[int8](dst)
	case Int16:
		return cfTo[int16](dst)
	case Int32:
		return cfTo[int32](dst)
	case Int64:
		return cfTo[int64](dst)
	case Uint16:
		return cfTo[uint16](dst)
	case Uint32:
		return cfTo[uint32](dst)
	case Uint64:
		return cfTo[uint64](dst)
	case Float16:
		if dst == Float64 {
			return convCFF16[float64]
		}
		return convCFF16[float32]
	case Float32:
		return cfTo[float32](dst)
	case Float64:
		return cfTo[float64](dst)
	}
	return nil
}

func plainConv(src, dst Elem) convFunc {
	switch src {
	case Bool:
		return boolTo(dst)
	case Int8:
		return plainTo[int8](dst)
	case Int16:
		return plainTo[int16](dst)
	case Int32:
		return plainTo[int32](dst)
	case Int64:
		return plainTo[int64](dst)
	case Uint8:
		return plainTo[uint8](dst)
	case Uint16:
		return plainTo[uint16](dst)
	case Uint32:
		return plainTo[uint32](dst)
	case Uint64:
		return plainTo[uint64](dst)
	case Float16:
		return fromF16(dst)
	case Float32:
		return plainTo[float32](dst)
	case Float64:
		return plainTo[float64](dst)
	}
	return nil
}

// newConverter returns the converter from src to dst. With cf, dst must be Float32 or
// Float64 and cf describes the decoding. copyBytes reports that fn copies bytes (n is
// then a byte count).
func newConverter(src, dst Elem, cf *CFParams) (conv converter, copyBytes bool, err error) {
	if src <= ElemNone || src > Float64 || dst <= ElemNone || dst > Float64 {
		return conv, false, fmt.Errorf("cannot convert %s to %s", src, dst)
	}
	if cf != nil {
		if dst != Float32 && dst != Float64 {
			return conv, false, fmt.Errorf("CF decoding writes float32 or float64, not %s", dst)
		}
		conv.args = convArgs{scale: cf.Scale, offset: cf.Offset, masks: cf.Masks}
		conv.fn = cfTable[src][0]
		if dst == Float64 {
			conv.fn = cfTable[src][1]
		}
		if conv.fn == nil {
			return conv, false, fmt.Errorf("cannot CF-decode %s", src)
		}
		return conv, false, nil
	}
	if src == dst {
		conv.fn = convCopy
		return conv, true, nil
	}
	conv.fn = plainTable[src][dst]
	if conv.fn == nil {
		return conv, false, fmt.Errorf("cannot convert %s to %s", src, dst)
	}
	return conv, false, nil
}
