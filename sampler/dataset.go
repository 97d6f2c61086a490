package sampler

import (
	"fmt"

	"github.com/gobatch/gobatch/readers/zarr"
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
	// TypeName is numpy's name of the stored type (int16, complex64, <U2), for messages.
	TypeName() string
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

// newDecoder makes the CF decoder of an array's chunks to float32 (readers/zarr's: a table of
// every raw value for 1- and 2-byte elements) and names the stored element type. The cache
// converts with it at load time the chunks it holds as float32; the gather converts the
// others (chunked.go).
func newDecoder(a Array) (*zarr.Float32Decoder, zarr.Elem, error) {
	kind, size := a.Native()
	elem, ok := elemOf(kind, size)
	if !ok {
		return nil, elem, fmt.Errorf("data type %s is not supported: the sampler reads integer and float16/float32/float64 arrays", a.TypeName())
	}
	d, err := zarr.NewFloat32Decoder(elem, cfParams(a))
	return d, elem, err
}

// cfParams are the CF numbers of an array's decoding.
func cfParams(a Array) zarr.CFParams {
	scale, offset, fill, hasFill := a.CF()
	cf := zarr.CFParams{Scale: scale, Offset: offset}
	if hasFill {
		cf.Masks = []float64{fill}
	}
	return cf
}

// elemOf is the reader's element type for a numpy kind and size the sampler reads.
func elemOf(kind byte, size int) (zarr.Elem, bool) {
	var table [4]zarr.Elem // by size 1, 2, 4, 8
	switch kind {
	case 'i':
		table = [4]zarr.Elem{zarr.Int8, zarr.Int16, zarr.Int32, zarr.Int64}
	case 'u':
		table = [4]zarr.Elem{zarr.Uint8, zarr.Uint16, zarr.Uint32, zarr.Uint64}
	case 'f':
		table = [4]zarr.Elem{zarr.ElemNone, zarr.Float16, zarr.Float32, zarr.Float64}
	}
	for i, s := range []int{1, 2, 4, 8} {
		if s == size && table[i] != zarr.ElemNone {
			return table[i], true
		}
	}
	return zarr.ElemNone, false
}
