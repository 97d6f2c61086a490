package config

import (
	"strings"

	"github.com/gobatch/gobatch/ring"
)

// DType is an element type: the ring's dtype (docs/PROTOCOL.md 2.7), so that a configured
// tensor type is a ring tensor type without conversion.
type DType = ring.DType

// The element types, for configuration code that names them.
const (
	Bool    = ring.Bool
	Int8    = ring.Int8
	Uint8   = ring.Uint8
	Int16   = ring.Int16
	Uint16  = ring.Uint16
	Int32   = ring.Int32
	Uint32  = ring.Uint32
	Int64   = ring.Int64
	Uint64  = ring.Uint64
	Float16 = ring.Float16
	Float32 = ring.Float32
	Float64 = ring.Float64
)

// ParseDType looks a NumPy dtype name up among allowed.
func ParseDType(name string, allowed []DType) (DType, bool) {
	d, err := ring.ParseDType(name)
	if err != nil {
		return 0, false
	}
	for _, a := range allowed {
		if a == d {
			return d, true
		}
	}
	return 0, false
}

// DTypeList names dtypes for messages: "float32, int64".
func DTypeList(ds []DType) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}
