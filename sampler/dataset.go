package sampler

import (
	"fmt"
	"math"
)

// Dataset is one opened store as the sampler needs it: arrays by name. The Zarr implementation
// is zarrDataset (zarr_dataset.go); tests use an in-memory one.
type Dataset interface {
	// Array returns the array at name (relative to the store root).
	Array(name string) (Array, error)
	// String names the store in messages.
	String() string
}

// Array is one stored array.
type Array interface {
	Shape() []int
	Chunks() []int
	// Dims are the dimension names (xarray's _ARRAY_DIMENSIONS or Zarr v3 dimension_names).
	Dims() []string
	// Native is the stored element type, in numpy's terms: kind 'i', 'u' or 'f' and size.
	Native() (kind byte, size int)
	// CF returns the decoding attributes: raw values equal to fill become NaN (when hasFill),
	// then value = raw * scale + offset.
	CF() (scale, offset, fill float64, hasFill bool)
	// DecodeChunk writes the chunk at grid position idx into dst in native little-endian
	// C order at full chunk shape (len(dst) = product(Chunks()) * size).
	DecodeChunk(idx []int, dst []byte) error
	// Int64s, Float64s and Strings read a whole (small, coordinate) array.
	Int64s() ([]int64, error)
	Float64s() ([]float64, error)
	Strings() ([]string, error)
	// Times reads a whole time coordinate (CF "<unit> since <date>" or datetime64) as unix
	// seconds; Durations a lead-time coordinate (CF "minutes" or timedelta64) as seconds.
	Times() ([]int64, error)
	Durations() ([]int64, error)
	// Attr returns a string attribute ("coordinates"), "" when absent.
	Attr(name string) string
}

// converter turns a decoded chunk in its native type into float32: CF decoding, then the
// per-channel normalisation, then the NaN policy. Small integer types go through a table of
// every possible raw value (exact, computed in float64 as xarray does, and one load per element).
type converter struct {
	kind    byte
	size    int
	scale   float64
	offset  float64
	fill    float64
	hasFill bool
	lut     []float32 // int8/uint8/int16/uint16: value of every raw bit pattern
}

func newConverter(a Array) (*converter, error) {
	kind, size := a.Native()
	c := &converter{kind: kind, size: size}
	c.scale, c.offset, c.fill, c.hasFill = a.CF()
	switch {
	case (kind == 'i' || kind == 'u') && (size == 1 || size == 2):
		n := 1 << (8 * size)
		c.lut = make([]float32, n)
		for bitsv := 0; bitsv < n; bitsv++ {
			var raw float64
			if kind == 'i' {
				if size == 1 {
					raw = float64(int8(bitsv))
				} else {
					raw = float64(int16(bitsv))
				}
			} else {
				raw = float64(bitsv)
			}
			c.lut[bitsv] = c.value(raw)
		}
	case (kind == 'i' || kind == 'u') && (size == 4 || size == 8):
	case kind == 'f' && (size == 4 || size == 8):
	default:
		return nil, fmt.Errorf("element type %c%d is not supported (expected an integer or float32/float64)", kind, size)
	}
	return c, nil
}

// value decodes one raw value (float64 arithmetic, then rounded to float32).
func (c *converter) value(raw float64) float32 {
	if c.hasFill && raw == c.fill {
		return float32(math.NaN())
	}
	return float32(raw*c.scale + c.offset)
}

// identity reports whether the CF decoding leaves values unchanged.
func (c *converter) identity() bool {
	return c.scale == 1 && c.offset == 0 && (!c.hasFill || math.IsNaN(c.fill))
}

// convert decodes src (native bytes) into dst.
func (c *converter) convert(src []byte, dst []float32) {
	switch {
	case c.lut != nil && c.size == 1:
		for i := range dst {
			dst[i] = c.lut[src[i]]
		}
	case c.lut != nil:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = c.lut[uint16(src[2*i])|uint16(src[2*i+1])<<8]
		}
	case c.kind == 'f' && c.size == 4:
		s := bytesAsFloat32(src[:4*len(dst)])
		if c.identity() {
			copy(dst, s)
			return
		}
		for i, v := range s {
			dst[i] = c.value(float64(v))
		}
	case c.kind == 'f':
		s := bytesAsFloat64(src[:8*len(dst)])
		for i, v := range s {
			dst[i] = c.value(v)
		}
	case c.kind == 'i' && c.size == 4:
		s := bytesAsInt32(src[:4*len(dst)])
		for i, v := range s {
			dst[i] = c.value(float64(v))
		}
	case c.kind == 'u' && c.size == 4:
		s := bytesAsUint32(src[:4*len(dst)])
		for i, v := range s {
			dst[i] = c.value(float64(v))
		}
	case c.kind == 'i':
		s := bytesAsInt64(src[:8*len(dst)])
		for i, v := range s {
			dst[i] = c.value(float64(v))
		}
	default:
		s := bytesAsUint64(src[:8*len(dst)])
		for i, v := range s {
			dst[i] = c.value(float64(v))
		}
	}
}
