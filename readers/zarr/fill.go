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
	e := make([]byte, d.Size)
	switch d.Kind {
	case KindBool:
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			if b {
				e[0] = 1
			}
			return e, "", false, nil
		}
		v, ok := jsonInt(raw)
		if !ok || (v != 0 && v != 1) {
			return bad()
		}
		e[0] = byte(v)
	case KindInt, KindDatetime, KindTimedelta:
		v, ok := jsonInt(raw)
		if !ok {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return bad()
			}
			switch {
			case s == "NaT" && d.Size == 8:
				v = math.MinInt64
			case strings.HasPrefix(s, "0x"):
				u, perr := strconv.ParseUint(s[2:], 16, d.Size*8)
				if perr != nil {
					return bad()
				}
				v = int64(u)
			default:
				return bad()
			}
		}
		if d.Size < 8 {
			lim := int64(1) << (8*d.Size - 1)
			if v < -lim || v >= lim {
				return bad()
			}
		}
		putUint(e, uint64(v))
	case KindUint:
		v, ok := jsonUint(raw)
		if !ok {
			var s string
			if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, "0x") {
				return bad()
			}
			u, perr := strconv.ParseUint(s[2:], 16, d.Size*8)
			if perr != nil {
				return bad()
			}
			v = u
		}
		if d.Size < 8 && v >= uint64(1)<<(8*d.Size) {
			return bad()
		}
		putUint(e, v)
	case KindFloat:
		if err := putFloatFill(e, raw); err != nil {
			return bad()
		}
	case KindComplex:
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil || len(parts) != 2 {
			return bad()
		}
		h := d.Size / 2
		if putFloatFill(e[:h], parts[0]) != nil || putFloatFill(e[h:], parts[1]) != nil {
			return bad()
		}
	case KindBytes, KindRaw:
		b, ok := fillBytes(raw)
		if !ok || len(b) > d.Size {
			return bad()
		}
		copy(e, b)
	case KindUTF32:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			// A number 0 is sometimes written for an empty string.
			if v, ok := jsonInt(raw); ok && v == 0 {
				return e, "", false, nil
			}
			return bad()
		}
		i := 0
		for _, r := range s {
			if i+4 > len(e) {
				return bad()
			}
			binary.LittleEndian.PutUint32(e[i:], uint32(r))
			i += 4
		}
	case KindVarBytes:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			if v, ok := jsonInt(raw); ok && v == 0 {
				return nil, "", false, nil
			}
			return bad()
		}
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return nil, string(b), false, nil
		}
		return nil, s, false, nil
	case KindString:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			if v, ok := jsonInt(raw); ok && v == 0 {
				return nil, "", false, nil
			}
			return bad()
		}
		if !utf8.ValidString(s) {
			return bad()
		}
		return nil, s, false, nil
	default:
		return bad()
	}
	return e, "", false, nil
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
