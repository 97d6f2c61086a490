package zarr

import (
	"math"
	"unsafe"
)

// Float32Decoder CF-decodes whole chunks to float32: it turns the native bytes of n
// elements of one numeric type (host byte order, as DecodeChunk returns them) into n
// float32 values, with the same arithmetic as ReadBox with CF set (see CFParams).
//
// Build one per array and keep it: for 1- and 2-byte element types the decoder holds
// the decoded value of every possible raw bit pattern (1 KiB, or 256 KiB for 16-bit
// types), so that decoding costs one table load per element, and exact. A float32
// array that CF leaves unchanged is copied, bit for bit (-0 and NaN payloads kept).
// Decode allocates nothing; a Float32Decoder is safe for concurrent use.
type Float32Decoder struct {
	src   Elem
	size  int
	conv  converter         // the per-element CF kernel, for the types without a table
	copy  bool              // float32 that decoding leaves unchanged
	lut8  *[1 << 8]float32  // Bool, Int8, Uint8: value by raw bit pattern
	lut16 *[1 << 16]float32 // Int16, Uint16, Float16
}

// NewFloat32Decoder returns the decoder for raw values of type src with the CF
// parameters cf (a zero CFParams is not the identity: pass Scale 1).
func NewFloat32Decoder(src Elem, cf CFParams) (*Float32Decoder, error) {
	var masks []float64
	for _, m := range cf.Masks {
		if !math.IsNaN(m) { // NaN raw values read as NaN without a mask
			masks = append(masks, m)
		}
	}
	cf.Masks = masks
	conv, _, err := newConverter(src, Float32, &cf)
	if err != nil {
		return nil, err
	}
	d := &Float32Decoder{src: src, size: src.Size(), conv: conv}
	switch d.size {
	case 1:
		d.lut8 = new([1 << 8]float32)
		d.fillTable(d.lut8[:])
	case 2:
		d.lut16 = new([1 << 16]float32)
		d.fillTable(d.lut16[:])
	}
	d.copy = src == Float32 && cf.Scale == 1 && cf.Offset == 0 && len(masks) == 0
	return d, nil
}

// fillTable stores in t[p] the decoded value of the raw bit pattern p, computed by the
// same kernel that decodes the wider types.
func (d *Float32Decoder) fillTable(t []float32) {
	raw := make([]byte, len(t)*d.size)
	for p := range t {
		if d.size == 1 {
			raw[p] = byte(p)
		} else {
			*(*uint16)(unsafe.Pointer(&raw[2*p])) = uint16(p) // host byte order
		}
	}
	d.conv.fn(d.conv.args, unsafe.Pointer(unsafe.SliceData(t)), unsafe.Pointer(unsafe.SliceData(raw)), len(t))
}

// Decode decodes len(dst) raw elements from src into dst. src must hold at least
// len(dst) elements of the decoder's type.
func (d *Float32Decoder) Decode(dst []float32, src []byte) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n*d.size] // a short src is a caller bug: fail here, not past its end
	sp := unsafe.Pointer(unsafe.SliceData(src))
	switch {
	case d.lut8 != nil:
		t, s := d.lut8, src[:n]
		for i := range dst {
			dst[i] = t[s[i]]
		}
	case d.lut16 != nil:
		t := d.lut16
		for i, v := range unsafe.Slice((*uint16)(sp), n) {
			dst[i] = t[v]
		}
	case d.copy:
		copy(dst, unsafe.Slice((*float32)(sp), n))
	default:
		d.conv.fn(d.conv.args, unsafe.Pointer(unsafe.SliceData(dst)), sp, n)
	}
}

// Identity reports whether Decode copies its input unchanged (float32 that CF leaves as is):
// a chunk decoded in place then needs no pass at all.
func (d *Float32Decoder) Identity() bool { return d.copy }

// Float64Decoder CF-decodes whole chunks to float64, with the arithmetic of ReadBox with CF
// set into a float64 destination: for values whose float32 rounding a caller must not see (a
// float64 store, or a quotient numpy would compute in float64). Decode allocates nothing; a
// Float64Decoder is safe for concurrent use.
type Float64Decoder struct {
	size int
	conv converter
}

// NewFloat64Decoder returns the decoder for raw values of type src with the CF parameters cf
// (a zero CFParams is not the identity: pass Scale 1).
func NewFloat64Decoder(src Elem, cf CFParams) (*Float64Decoder, error) {
	var masks []float64
	for _, m := range cf.Masks {
		if !math.IsNaN(m) {
			masks = append(masks, m)
		}
	}
	cf.Masks = masks
	conv, _, err := newConverter(src, Float64, &cf)
	if err != nil {
		return nil, err
	}
	return &Float64Decoder{size: src.Size(), conv: conv}, nil
}

// Decode decodes len(dst) raw elements from src into dst. src must hold at least len(dst)
// elements of the decoder's type.
func (d *Float64Decoder) Decode(dst []float64, src []byte) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n*d.size]
	d.conv.fn(d.conv.args, unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), n)
}
