package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gobatch/gobatch/config"
)

// A filler writes one source's tensor of one batch straight into slot memory. Fill is called
// concurrently from several reader goroutines (each with its own batch and dst), so a filler
// keeps no per-call state.
type filler interface {
	// Fill writes stream batch k (absolute index) into dst, which is exactly the tensor's
	// bytes. It returns early with ctx's error when ctx ends during a slow read.
	Fill(ctx context.Context, dst []byte, k uint64) error
}

// sourceOptions are the command-line settings sources may use.
type sourceOptions struct {
	dataRoot string // --data-root: the directory relative data paths are resolved against
}

// newFiller builds the filler for one configured source.
func newFiller(src config.Source, batchSize int, _ sourceOptions) (filler, error) {
	switch spec := src.Spec.(type) {
	case *config.Synthetic:
		return newSynthetic(spec, batchSize), nil
	default:
		return nil, fmt.Errorf("source[%d] %q: kind %q is not supported by this build", src.Index, src.Name, src.Kind)
	}
}

// synthetic implements the synthetic contract (docs/ARCHITECTURE.md): in stream batch k, row i
// holds example e = k*size + i, and every element of that example equals e mod 2^24 cast to the
// dtype (a uint8 therefore holds e mod 256, as NumPy's cast wraps).
type synthetic struct {
	size     int                  // rows per batch
	elems    int                  // elements per example
	itemsize int                  // bytes per element
	put      func([]byte, uint32) // writes one element of value v (< 2^24), little-endian
	delay    time.Duration
}

func newSynthetic(s *config.Synthetic, batchSize int) *synthetic {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	f := &synthetic{size: batchSize, elems: n, itemsize: s.DType.Size(), delay: s.Delay}
	switch s.DType {
	case config.Float32:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v))) }
	case config.Float64:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v))) }
	case config.Int32:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
	case config.Int64:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint64(b, uint64(v)) }
	case config.Uint8:
		f.put = func(b []byte, v uint32) { b[0] = byte(v) }
	default:
		panic("synthetic: dtype " + s.DType.String() + " passed config validation") // config refuses it
	}
	return f
}

// rowBytes is the size of one example.
func (f *synthetic) rowBytes() int { return f.elems * f.itemsize }

// seedBytes is how much of a row is written element by element before doubling with copy:
// enough that the copies are long, few enough stores to stay cheap.
const seedBytes = 256

// copyChunk caps the source of the doubling copies so that it stays in the L1/L2 cache while
// the rest of a large row is written.
const copyChunk = 4 << 10

func (f *synthetic) Fill(ctx context.Context, dst []byte, k uint64) error {
	rb := f.rowBytes()
	if len(dst) != rb*f.size {
		return fmt.Errorf("synthetic: tensor is %d bytes, want %d", len(dst), rb*f.size)
	}
	if f.delay > 0 {
		t := time.NewTimer(f.delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	first := k * uint64(f.size)
	for i := 0; i < f.size; i++ {
		row := dst[i*rb : (i+1)*rb : (i+1)*rb]
		v := uint32((first + uint64(i)) & (1<<24 - 1))
		// Write the first element, then up to seedBytes element by element, then double.
		f.put(row, v)
		n := f.itemsize
		for ; n < rb && n < seedBytes; n += f.itemsize {
			f.put(row[n:], v)
		}
		for n < rb {
			n += copy(row[n:], row[:min(n, copyChunk)])
		}
	}
	return nil
}
