package config

import (
	"strings"

	"github.com/gobatch/gobatch/ring"
)

// ParseDType looks a NumPy dtype name up among allowed.
func ParseDType(name string, allowed []ring.DType) (ring.DType, bool) {
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
func DTypeList(ds []ring.DType) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}
