package sampler

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
)

// The synthetic source (kind = "synthetic") makes batches whose every value is known from its
// position, for the ring's tests and benchmarks. Its contract (docs/ARCHITECTURE.md): in global
// batch g, row i holds example e = g*size + i, and every element of that example equals
// e mod 2^24 cast to the dtype (a uint8 therefore holds e mod 256, as NumPy's cast wraps).

// Synthetic is a kind = "synthetic" source table, decoded.
type Synthetic struct {
	Field string        // "source[2]", for messages
	Name  string        // tensor name
	Shape []int         // one example's shape; may be empty (one scalar per example)
	DType ring.DType    // one of SyntheticDTypes
	Delay time.Duration // sleep per batch (delay_ms), emulating a slow reader
}

// SyntheticDTypes are the element types a synthetic source can produce.
var SyntheticDTypes = []ring.DType{ring.Float32, ring.Float64, ring.Int32, ring.Int64, ring.Uint8}

// MaxDelayMS bounds delay_ms (one hour).
const MaxDelayMS = 3_600_000

// Example implements config.Spec.
func (s *Synthetic) Example() ([]int, ring.DType) { return s.Shape, s.DType }

func init() { registerKind("synthetic", decodeSynthetic, openSynthetic) }

func decodeSynthetic(t *config.Table) config.Spec {
	s := &Synthetic{Field: t.Path()}
	ok := true
	if dims, good := t.MustInts("shape", 1, math.MaxInt32, config.MaxExampleD); good {
		s.Shape = make([]int, len(dims))
		for i, d := range dims {
			s.Shape[i] = int(d)
		}
	} else {
		ok = false
	}
	if name, good := t.MustString("dtype"); good {
		if d, known := config.ParseDType(name, SyntheticDTypes); known {
			s.DType = d
		} else {
			t.Errorf("dtype", "unknown dtype %q; expected one of %s", name, config.DTypeList(SyntheticDTypes))
			ok = false
		}
	} else {
		ok = false
	}
	s.Delay = time.Duration(t.Int("delay_ms", 0, 0, MaxDelayMS)) * time.Millisecond
	if !ok {
		return nil
	}
	return s
}

// openSynthetic opens the configuration's synthetic sources, one part each. A zarr source
// beside them is refused by the zarr opener.
func openSynthetic(cfg *config.Config, _ Options) ([]Source, error) {
	if cfg.Batch.Order == config.OrderEpochs {
		return nil, cfg.Errorf("batch.order", "%q needs a sample space (the t0 candidates of zarr sources); synthetic sources have none; expected order = %q",
			config.OrderEpochs, config.OrderStream)
	}
	var parts []Source
	for _, s := range cfg.Sources {
		if sp, ok := s.Spec.(*Synthetic); ok {
			sp.Name = s.Name
			parts = append(parts, newSynthetic(sp, cfg.Batch.Size))
		}
	}
	return parts, nil
}

// synthetic is the Source of one synthetic table: one tensor per batch.
type synthetic struct {
	field    string // "source[2]"
	tensor   config.Tensor
	size     int                  // rows per batch
	elems    int                  // elements per example
	itemsize int                  // bytes per element
	put      func([]byte, uint32) // writes one element of value v (< 2^24), little-endian
	delay    time.Duration
}

func newSynthetic(s *Synthetic, batchSize int) *synthetic {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	f := &synthetic{field: s.Field, size: batchSize, elems: n, itemsize: s.DType.Size(), delay: s.Delay,
		tensor: config.Tensor{Name: s.Name, DType: s.DType, Shape: append([]int{batchSize}, s.Shape...)}}
	switch s.DType {
	case ring.Float32:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v))) }
	case ring.Float64:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v))) }
	case ring.Int32:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
	case ring.Int64:
		f.put = func(b []byte, v uint32) { binary.LittleEndian.PutUint64(b, uint64(v)) }
	case ring.Uint8:
		f.put = func(b []byte, v uint32) { b[0] = byte(v) }
	default:
		panic("synthetic: dtype " + s.DType.String() + " passed config validation") // decodeSynthetic refuses it
	}
	return f
}

func (f *synthetic) Tensors() []config.Tensor { return []config.Tensor{f.tensor} }
func (f *synthetic) Prefetch(uint64)          {}
func (f *synthetic) Stats() Stats             { return Stats{} }
func (f *synthetic) View() View               { return nil }
func (f *synthetic) Warnings() []string       { return nil }

// rowBytes is the size of one example.
func (f *synthetic) rowBytes() int { return f.elems * f.itemsize }

// seedBytes is how much of a row is written element by element before doubling with copy:
// enough that the copies are long, few enough stores to stay cheap.
const seedBytes = 256

// copyChunk caps the source of the doubling copies so that it stays in the L1/L2 cache while
// the rest of a large row is written.
const copyChunk = 4 << 10

// Fill writes global batch g into dst[0]. It returns early with ctx's error when ctx ends
// during the configured delay.
func (f *synthetic) Fill(ctx context.Context, g uint64, dst [][]byte) error {
	if err := checkTensors(f.Tensors(), g, dst); err != nil {
		return err
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
	rb := f.rowBytes()
	first := g * uint64(f.size)
	for i := 0; i < f.size; i++ {
		row := dst[0][i*rb : (i+1)*rb : (i+1)*rb]
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

// checkTensors refuses buffers that are not exactly a source's tensors.
func checkTensors(want []config.Tensor, g uint64, dst [][]byte) error {
	if len(dst) != len(want) {
		return fmt.Errorf("fill batch %d: %d tensors, expected %d", g, len(dst), len(want))
	}
	for i, t := range want {
		if int64(len(dst[i])) != t.NBytes() {
			return fmt.Errorf("fill batch %d: tensor %s has %d bytes, expected %d", g, t.Name, len(dst[i]), t.NBytes())
		}
	}
	return nil
}
