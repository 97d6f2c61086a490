package zarr

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Kind is the class of an array's data type.
type Kind uint8

const (
	KindInvalid   Kind = iota
	KindBool           // 1 byte, 0 or 1
	KindInt            // signed integer, Size 1, 2, 4 or 8
	KindUint           // unsigned integer
	KindFloat          // IEEE float, Size 2, 4 or 8
	KindComplex        // two floats, Size 8 or 16
	KindDatetime       // numpy datetime64: int64 count of Unit since the Unix epoch, NaT = min int64
	KindTimedelta      // numpy timedelta64: int64 count of Unit
	KindBytes          // fixed-length byte string (numpy |S<n>, v3 null_terminated_bytes), NUL padded
	KindUTF32          // fixed-length unicode (numpy <U<n>, v3 fixed_length_utf32), UTF-32, NUL padded
	KindString         // variable-length UTF-8 string (v2 |O + vlen-utf8, v3 string)
	KindRaw            // opaque fixed-size bytes (numpy |V<n>, v3 r<bits>)
	KindVarBytes       // variable-length bytes (v2 |O + vlen-bytes, v3 variable_length_bytes)
)

// DType is an array's element type as stored.
type DType struct {
	Kind      Kind
	Size      int    // bytes per element; 0 for KindString
	BigEndian bool   // byte order of the stored elements (multi-byte kinds only)
	Unit      string // datetime64/timedelta64 unit: "ns", "s", "h", ...
	UnitScale int64  // datetime64/timedelta64 unit multiplier, e.g. 10 for "10ms"; 1 otherwise
	name      string // the spelling in the metadata, for messages
}

// String returns the data type as the metadata spelled it.
func (d DType) String() string {
	if d.name != "" {
		return d.name
	}
	return d.NumpyStr()
}

// Name is numpy's name for the data type (int16, float32, complex64, datetime64[ns], <U5, ...),
// as numpy prints a dtype: the spelling messages use.
func (d DType) Name() string {
	switch d.Kind {
	case KindBool:
		return "bool"
	case KindInt:
		return fmt.Sprintf("int%d", 8*d.Size)
	case KindUint:
		return fmt.Sprintf("uint%d", 8*d.Size)
	case KindFloat:
		return fmt.Sprintf("float%d", 8*d.Size)
	case KindComplex:
		return fmt.Sprintf("complex%d", 8*d.Size)
	case KindDatetime, KindTimedelta:
		d.BigEndian = false
		s := d.NumpyStr() // <M8[ns]
		name := "datetime64"
		if d.Kind == KindTimedelta {
			name = "timedelta64"
		}
		if i := strings.IndexByte(s, '['); i >= 0 {
			return name + s[i:]
		}
		return name
	case KindString:
		return "str (variable length)"
	case KindVarBytes:
		return "bytes (variable length)"
	}
	d.BigEndian = false
	return d.NumpyStr()
}

// NumpyStr returns the numpy type string (little-endian for multi-byte types unless BigEndian).
func (d DType) NumpyStr() string {
	bo := "<"
	if d.BigEndian {
		bo = ">"
	}
	if d.Size == 1 || d.Kind == KindBytes || d.Kind == KindRaw || d.Kind == KindBool || d.Kind == KindString {
		bo = "|"
	}
	switch d.Kind {
	case KindBool:
		return "|b1"
	case KindInt:
		return bo + "i" + strconv.Itoa(d.Size)
	case KindUint:
		return bo + "u" + strconv.Itoa(d.Size)
	case KindFloat:
		return bo + "f" + strconv.Itoa(d.Size)
	case KindComplex:
		return bo + "c" + strconv.Itoa(d.Size)
	case KindDatetime, KindTimedelta:
		c := "M"
		if d.Kind == KindTimedelta {
			c = "m"
		}
		u := d.Unit
		if d.UnitScale > 1 {
			u = strconv.FormatInt(d.UnitScale, 10) + u
		}
		return bo + c + "8[" + u + "]"
	case KindBytes:
		return "|S" + strconv.Itoa(d.Size)
	case KindUTF32:
		return bo + "U" + strconv.Itoa(d.Size/4)
	case KindString, KindVarBytes:
		return "|O"
	case KindRaw:
		return "|V" + strconv.Itoa(d.Size)
	}
	return "invalid"
}

// Numeric reports whether elements can be converted to numbers (bool, ints, floats,
// datetime64 and timedelta64 as int64).
func (d DType) Numeric() bool {
	switch d.Kind {
	case KindBool, KindInt, KindUint, KindFloat, KindDatetime, KindTimedelta:
		return true
	}
	return false
}

// Elem returns the numeric element type of the stored data, or ElemNone.
func (d DType) Elem() Elem {
	switch d.Kind {
	case KindBool:
		return Bool
	case KindInt:
		switch d.Size {
		case 1:
			return Int8
		case 2:
			return Int16
		case 4:
			return Int32
		case 8:
			return Int64
		}
	case KindUint:
		switch d.Size {
		case 1:
			return Uint8
		case 2:
			return Uint16
		case 4:
			return Uint32
		case 8:
			return Uint64
		}
	case KindFloat:
		switch d.Size {
		case 2:
			return Float16
		case 4:
			return Float32
		case 8:
			return Float64
		}
	case KindDatetime, KindTimedelta:
		return Int64
	}
	return ElemNone
}

// variable reports a variable-length element type (strings or bytes).
func (d DType) variable() bool { return d.Kind == KindString || d.Kind == KindVarBytes }

// swapUnit is the byte-swap granularity of the stored elements (0: never swapped).
func (d DType) swapUnit() int {
	switch d.Kind {
	case KindInt, KindUint, KindFloat, KindDatetime, KindTimedelta:
		if d.Size > 1 {
			return d.Size
		}
	case KindComplex:
		return d.Size / 2
	case KindUTF32:
		return 4
	}
	return 0
}

// parseV2DType parses a numpy type string (v2 .zarray "dtype"). Structured dtypes
// (JSON lists) are rejected.
func parseV2DType(raw json.RawMessage) (DType, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return DType{}, fmt.Errorf("unsupported dtype %s (structured dtypes are not supported)", string(raw))
	}
	d, err := parseTypestr(s)
	if err != nil {
		return DType{}, err
	}
	d.name = s
	return d, nil
}

func parseTypestr(s string) (DType, error) {
	bad := fmt.Errorf("unsupported dtype %q", s)
	if len(s) < 2 {
		return DType{}, bad
	}
	var d DType
	switch s[0] {
	case '<', '|', '=':
	case '>':
		d.BigEndian = true
	default:
		return DType{}, bad
	}
	code, rest := s[1], s[2:]
	if code == 'O' {
		if rest != "" {
			return DType{}, bad
		}
		return DType{Kind: KindString}, nil
	}
	if code == 'M' || code == 'm' {
		// 8[unit]
		if !strings.HasPrefix(rest, "8[") || !strings.HasSuffix(rest, "]") {
			return DType{}, bad
		}
		d.Kind = KindDatetime
		if code == 'm' {
			d.Kind = KindTimedelta
		}
		d.Size = 8
		scale, unit, err := parseTimeUnit(rest[2 : len(rest)-1])
		if err != nil {
			return DType{}, fmt.Errorf("dtype %q: %w", s, err)
		}
		d.Unit, d.UnitScale = unit, scale
		return d, nil
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 || n > 1<<24 {
		return DType{}, bad
	}
	d.Size = n
	switch code {
	case 'b':
		d.Kind = KindBool
		if n != 1 {
			return DType{}, bad
		}
	case 'i':
		d.Kind = KindInt
	case 'u':
		d.Kind = KindUint
	case 'f':
		d.Kind = KindFloat
		if n != 2 && n != 4 && n != 8 {
			return DType{}, bad
		}
	case 'c':
		d.Kind = KindComplex
		if n != 8 && n != 16 {
			return DType{}, bad
		}
	case 'S', 'a':
		d.Kind = KindBytes
	case 'U':
		d.Kind = KindUTF32
		d.Size = 4 * n
	case 'V':
		d.Kind = KindRaw
	default:
		return DType{}, bad
	}
	if (d.Kind == KindInt || d.Kind == KindUint) && n != 1 && n != 2 && n != 4 && n != 8 {
		return DType{}, bad
	}
	return d, nil
}

var timeUnits = map[string]bool{"Y": true, "M": true, "W": true, "D": true, "h": true, "m": true, "s": true,
	"ms": true, "us": true, "μs": true, "ns": true, "ps": true, "fs": true, "as": true, "generic": true}

// parseTimeUnit splits "10ms" into (10, "ms").
func parseTimeUnit(s string) (int64, string, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	scale := int64(1)
	if i > 0 {
		v, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || v <= 0 {
			return 0, "", fmt.Errorf("bad time unit %q", s)
		}
		scale = v
	}
	u := s[i:]
	if !timeUnits[u] {
		return 0, "", fmt.Errorf("bad time unit %q", s)
	}
	if u == "μs" {
		u = "us"
	}
	return scale, u, nil
}

// parseV3DType parses a v3 "data_type" (a name or an extension object).
// Byte order is not part of a v3 data type; the bytes codec supplies it.
func parseV3DType(raw json.RawMessage) (DType, error) {
	name, cfg, err := parseNamed(raw)
	if err != nil {
		return DType{}, fmt.Errorf("data_type: %w", err)
	}
	if s, ok := v3PlainDTypes[name]; ok {
		s.name = name
		return s, nil
	}
	var c v3DTypeConfig
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return DType{}, fmt.Errorf("data_type %s: configuration: %w", name, err)
		}
	}
	switch name {
	case "numpy.datetime64", "numpy.timedelta64":
		return v3TimeDType(name, c)
	case "fixed_length_utf32", "null_terminated_bytes", "fixed_length_bytes", "raw_bytes":
		return v3FixedBytesDType(name, c)
	}
	if d, ok := v3RawBitsDType(name); ok {
		return d, nil
	}
	return DType{}, fmt.Errorf("unsupported data_type %q", name)
}

// v3PlainDTypes are the v3 data types that a name alone defines.
var v3PlainDTypes = map[string]DType{
	"bool": {Kind: KindBool, Size: 1}, "int8": {Kind: KindInt, Size: 1}, "int16": {Kind: KindInt, Size: 2},
	"int32": {Kind: KindInt, Size: 4}, "int64": {Kind: KindInt, Size: 8}, "uint8": {Kind: KindUint, Size: 1},
	"uint16": {Kind: KindUint, Size: 2}, "uint32": {Kind: KindUint, Size: 4}, "uint64": {Kind: KindUint, Size: 8},
	"float16": {Kind: KindFloat, Size: 2}, "float32": {Kind: KindFloat, Size: 4}, "float64": {Kind: KindFloat, Size: 8},
	"complex64": {Kind: KindComplex, Size: 8}, "complex128": {Kind: KindComplex, Size: 16},
	"string": {Kind: KindString}, "variable_length_utf8": {Kind: KindString},
	"variable_length_bytes": {Kind: KindVarBytes},
}

// v3DTypeConfig is the configuration of the parameterised v3 data types. It is an
// alias of an unnamed struct because encoding/json names the type in its errors, and
// those reach the user.
type v3DTypeConfig = struct {
	Unit        *string `json:"unit"`
	ScaleFactor *int64  `json:"scale_factor"`
	LengthBytes *int    `json:"length_bytes"`
}

// v3TimeDType builds numpy.datetime64 or numpy.timedelta64: an int64 count of unit x
// scale_factor (1 when absent). v3 keeps the multiple in scale_factor, so a number in
// front of the unit is not read.
func v3TimeDType(name string, c v3DTypeConfig) (DType, error) {
	d := DType{name: name, Kind: KindDatetime, Size: 8}
	if name == "numpy.timedelta64" {
		d.Kind = KindTimedelta
	}
	if c.Unit == nil {
		return DType{}, fmt.Errorf("data_type %s: missing unit", name)
	}
	_, u, err := parseTimeUnit(*c.Unit)
	if err != nil {
		return DType{}, fmt.Errorf("data_type %s: %w", name, err)
	}
	d.Unit, d.UnitScale = u, 1
	if c.ScaleFactor != nil {
		if *c.ScaleFactor <= 0 {
			return DType{}, fmt.Errorf("data_type %s: bad scale_factor %d", name, *c.ScaleFactor)
		}
		d.UnitScale = *c.ScaleFactor
	}
	return d, nil
}

// v3FixedBytesDType builds the fixed-length string and bytes types from length_bytes,
// bounded as the v2 sizes are; UTF-32 needs whole code points.
func v3FixedBytesDType(name string, c v3DTypeConfig) (DType, error) {
	if c.LengthBytes == nil || *c.LengthBytes <= 0 || *c.LengthBytes > 1<<24 {
		return DType{}, fmt.Errorf("data_type %s: bad or missing length_bytes", name)
	}
	d := DType{name: name, Size: *c.LengthBytes}
	switch name {
	case "fixed_length_utf32":
		d.Kind = KindUTF32
		if d.Size%4 != 0 {
			return DType{}, fmt.Errorf("data_type %s: length_bytes %d is not a multiple of 4", name, d.Size)
		}
	case "raw_bytes":
		d.Kind = KindRaw
	default:
		d.Kind = KindBytes
	}
	return d, nil
}

// v3RawBitsDType reads r<bits>, opaque elements of a whole number of bytes.
func v3RawBitsDType(name string) (DType, bool) {
	if len(name) > 1 && name[0] == 'r' {
		if bits, err := strconv.Atoi(name[1:]); err == nil && bits > 0 && bits%8 == 0 && bits <= 1<<27 {
			return DType{name: name, Kind: KindRaw, Size: bits / 8}, true
		}
	}
	return DType{}, false
}
