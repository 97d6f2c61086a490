package config

import (
	"strconv"
	"strings"
)

// DType is an element type. Its values are the dtype codes of docs/PROTOCOL.md (2.7), so a
// DType converts to the ring's code directly.
type DType uint32

const (
	Bool    DType = 1
	Int8    DType = 2
	Uint8   DType = 3
	Int16   DType = 4
	Uint16  DType = 5
	Int32   DType = 6
	Uint32  DType = 7
	Int64   DType = 8
	Uint64  DType = 9
	Float16 DType = 10
	Float32 DType = 11
	Float64 DType = 12
)

var dtypeNames = [...]string{
	Bool: "bool", Int8: "int8", Uint8: "uint8", Int16: "int16", Uint16: "uint16",
	Int32: "int32", Uint32: "uint32", Int64: "int64", Uint64: "uint64",
	Float16: "float16", Float32: "float32", Float64: "float64",
}

var dtypeSizes = [...]int{
	Bool: 1, Int8: 1, Uint8: 1, Int16: 2, Uint16: 2, Int32: 4, Uint32: 4,
	Int64: 8, Uint64: 8, Float16: 2, Float32: 4, Float64: 8,
}

// String is the NumPy name of the dtype ("float32").
func (d DType) String() string {
	if d >= 1 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// Size is the item size in bytes (0 for an invalid dtype).
func (d DType) Size() int {
	if d >= 1 && int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// ParseDType looks a NumPy dtype name up among allowed.
func ParseDType(name string, allowed []DType) (DType, bool) {
	for _, d := range allowed {
		if dtypeNames[d] == name {
			return d, true
		}
	}
	return 0, false
}

func dtypeList(ds []DType) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}
