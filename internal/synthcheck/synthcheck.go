// Package synthcheck is the tests' independent check of the synthetic source's contract
// (docs/ARCHITECTURE.md): in global batch k, row i holds example e = k*size + i, and every
// element of that example equals e mod 2^24 cast to the dtype. It decodes what a source wrote;
// it shares no code with the source.
package synthcheck

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gobatch/gobatch/ring"
)

// syntheticValue decodes element j of a synthetic tensor as the contract's integer value.
func syntheticValue(b []byte, dt ring.DType, j int) uint64 {
	switch dt {
	case ring.Float32:
		return uint64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])))
	case ring.Float64:
		return uint64(math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:])))
	case ring.Int32:
		return uint64(binary.LittleEndian.Uint32(b[4*j:]))
	case ring.Int64:
		return binary.LittleEndian.Uint64(b[8*j:])
	case ring.Uint8:
		return uint64(b[j])
	}
	panic(dt)
}

// syntheticWant is the contract's value for stream example e.
func syntheticWant(e uint64, dt ring.DType) uint64 {
	v := e % (1 << 24)
	if dt == ring.Uint8 {
		v %= 256
	}
	return v
}

// Check verifies every element of a synthetic tensor of global batch k (size rows of elems
// elements) against the contract; it returns the first mismatch.
func Check(b []byte, dt ring.DType, size, elems int, k uint64) error {
	if len(b) != size*elems*dt.Size() {
		return fmt.Errorf("tensor is %d bytes, want %d", len(b), size*elems*dt.Size())
	}
	for i := 0; i < size; i++ {
		want := syntheticWant(k*uint64(size)+uint64(i), dt)
		for j := 0; j < elems; j++ {
			if got := syntheticValue(b, dt, i*elems+j); got != want {
				return fmt.Errorf("batch %d row %d element %d: %d, want %d", k, i, j, got, want)
			}
		}
	}
	return nil
}
