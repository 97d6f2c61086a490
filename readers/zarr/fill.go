package zarr

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseFill decodes a fill_value for d into one element in host (little-endian)
// byte order. null gives zero bytes and null=true. For KindString the value is
// returned in str.
func parseFill(raw json.RawMessage, d DType) (elem []byte, str string, null bool, err error) {
	if isJSONNull(raw) {
		return make([]byte, d.Size), "", true, nil
	}
	bad := func() ([]byte, string, bool, error) {
		return nil, "", false, fmt.Errorf("fill_value %.60s is not valid for dtype %s", string(raw), d)
	}
	// Variable-length kinds have no fixed element: their fill is the text itself.
	if d.Kind == KindString || d.Kind == KindVarBytes {
		s, ok := textFill(raw, d.Kind)
		if !ok {
			return bad()
		}
		return nil, s, false, nil
	}
	e := make([]byte, d.Size)
	if !putElemFill(e, raw, d.Kind) {
		return bad()
	}
	return e, "", false, nil
}

// putElemFill writes the fill value of a fixed-size kind into e (one zeroed element,
// whose length is the dtype's size). It only reports whether raw fits: parseFill words
// the one error every kind shares.
func putElemFill(e []byte, raw json.RawMessage, k Kind) bool {
	switch k {
	case KindBool:
		return putBoolFill(e, raw)
	case KindInt, KindDatetime, KindTimedelta:
		return putIntFill(e, raw)
	case KindUint:
		return putUintFill(e, raw)
	case KindFloat:
		return putFloatFill(e, raw) == nil
	case KindComplex:
		return putComplexFill(e, raw)
	case KindBytes, KindRaw:
		b, ok := fillBytes(raw)
		if !ok || len(b) > len(e) {
			return false
		}
		copy(e, b)
		return true
	case KindUTF32:
		return putUTF32Fill(e, raw)
	}
	return false
}

// putBoolFill reads true/false, or the 0 and 1 that some writers store for a bool.
func putBoolFill(e []byte, raw json.RawMessage) bool {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if b {
			e[0] = 1
		}
		return true
	}
	v, ok := jsonInt(raw)
	if !ok || (v != 0 && v != 1) {
		return false
	}
	e[0] = byte(v)
	return true
}

// putIntFill reads a signed integer (also datetime64 and timedelta64 counts) and
// checks that it fits the len(e)-byte element.
func putIntFill(e []byte, raw json.RawMessage) bool {
	v, ok := jsonInt(raw)
	if !ok {
		if v, ok = intFillText(raw, len(e)); !ok {
			return false
		}
	}
	if len(e) < 8 {
		lim := int64(1) << (8*len(e) - 1)
		if v < -lim || v >= lim {
			return false
		}
	}
	putUint(e, uint64(v))
	return true
}

// intFillText reads the string forms of a signed fill: "NaT", which numpy stores as
// the int64 minimum, and "0x<hex bits>".
func intFillText(raw json.RawMessage, size int) (int64, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	if s == "NaT" && size == 8 {
		return math.MinInt64, true
	}
	u, ok := hexBits(s, size)
	return int64(u), ok
}

// putUintFill reads an unsigned integer, or its "0x<hex bits>" form, and checks that
// it fits the len(e)-byte element.
func putUintFill(e []byte, raw json.RawMessage) bool {
	v, ok := jsonUint(raw)
	if !ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		if v, ok = hexBits(s, len(e)); !ok {
			return false
		}
	}
	if len(e) < 8 && v >= uint64(1)<<(8*len(e)) {
		return false
	}
	putUint(e, v)
	return true
}

// hexBits reads "0x<hex>", the raw bits of a size-byte element; anything else, or
// more bits than the element holds, is refused.
func hexBits(s string, size int) (uint64, bool) {
	if !strings.HasPrefix(s, "0x") {
		return 0, false
	}
	u, err := strconv.ParseUint(s[2:], 16, size*8)
	return u, err == nil
}

// putComplexFill reads [real, imag], each part a float fill of half the element.
func putComplexFill(e []byte, raw json.RawMessage) bool {
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 2 {
		return false
	}
	h := len(e) / 2
	return putFloatFill(e[:h], parts[0]) == nil && putFloatFill(e[h:], parts[1]) == nil
}

// putUTF32Fill encodes a string fill as UTF-32 code points, refusing one longer than
// the element; a shorter one leaves the rest zero (NUL padding, as numpy pads).
func putUTF32Fill(e []byte, raw json.RawMessage) bool {
	s, ok := stringFill(raw)
	if !ok {
		return false
	}
	i := 0
	for _, r := range s {
		if i+4 > len(e) {
			return false
		}
		binary.LittleEndian.PutUint32(e[i:], uint32(r))
		i += 4
	}
	return true
}

// textFill reads the fill of a variable-length kind. A vlen-bytes fill is base64
// when it decodes as such and the text itself otherwise; a string fill must be UTF-8.
func textFill(raw json.RawMessage, k Kind) (string, bool) {
	s, ok := stringFill(raw)
	if !ok {
		return "", false
	}
	if k == KindVarBytes {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return string(b), true
		}
		return s, true
	}
	if !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

// stringFill reads a fill written as a JSON string. Some writers store the number 0
// for an empty string; it reads as "".
func stringFill(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		if v, ok := jsonInt(raw); ok && v == 0 {
			return "", true
		}
		return "", false
	}
	return s, true
}

// putFloatFill writes a float fill value (number, "NaN", "Infinity", "-Infinity" or
// "0x<hex bits>") into e, whose length (2, 4 or 8) selects the precision.
func putFloatFill(e []byte, raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil && strings.HasPrefix(s, "0x") {
		u, err := strconv.ParseUint(s[2:], 16, len(e)*8)
		if err != nil {
			return err
		}
		putUint(e, u)
		return nil
	}
	f, ok := jsonFloat(raw)
	if !ok {
		return fmt.Errorf("not a float")
	}
	switch len(e) {
	case 2:
		binary.LittleEndian.PutUint16(e, f32ToF16(float32(f)))
	case 4:
		if math.IsNaN(f) {
			binary.LittleEndian.PutUint32(e, 0x7fc00000)
		} else {
			binary.LittleEndian.PutUint32(e, math.Float32bits(float32(f)))
		}
	case 8:
		if math.IsNaN(f) {
			binary.LittleEndian.PutUint64(e, 0x7ff8000000000000)
		} else {
			binary.LittleEndian.PutUint64(e, math.Float64bits(f))
		}
	default:
		return fmt.Errorf("bad float size %d", len(e))
	}
	return nil
}

// fillBytes reads a bytes fill value: base64 text or a list of byte values.
func fillBytes(raw json.RawMessage) ([]byte, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, false
		}
		return b, true
	}
	var list []int
	if json.Unmarshal(raw, &list) == nil {
		b := make([]byte, len(list))
		for i, v := range list {
			if v < 0 || v > 255 {
				return nil, false
			}
			b[i] = byte(v)
		}
		return b, true
	}
	if v, ok := jsonInt(raw); ok && v == 0 {
		return nil, true
	}
	return nil, false
}

// putUint writes the low len(e) bytes of v little-endian.
func putUint(e []byte, v uint64) {
	for i := range e {
		e[i] = byte(v >> (8 * i))
	}
}

// f32ToF16 converts to IEEE half precision, rounding to nearest even.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff:
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14:
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		rest := mant & 0x1fff
		h := uint32(sign) | e | m
		if rest > 0x1000 || (rest == 0x1000 && m&1 == 1) {
			h++ // may carry into the exponent, which is correct
		}
		return uint16(h)
	case exp-127 >= -25:
		// Subnormal half.
		m := mant | 0x800000
		shift := uint32(-(exp - 127) - 14 + 13)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign
}

// f16ToF32 converts IEEE half precision to float32 exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: normalise.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
