package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/gobatch/gobatch/config"
)

// syntheticValue decodes element j of a synthetic tensor as the contract's integer value.
func syntheticValue(b []byte, dt config.DType, j int) uint64 {
	switch dt {
	case config.Float32:
		return uint64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])))
	case config.Float64:
		return uint64(math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:])))
	case config.Int32:
		return uint64(binary.LittleEndian.Uint32(b[4*j:]))
	case config.Int64:
		return binary.LittleEndian.Uint64(b[8*j:])
	case config.Uint8:
		return uint64(b[j])
	}
	panic(dt)
}

// syntheticWant is the contract's value for stream example e.
func syntheticWant(e uint64, dt config.DType) uint64 {
	v := e % (1 << 24)
	if dt == config.Uint8 {
		v %= 256
	}
	return v
}

// checkSynthetic verifies every element of a tensor of batch k; it returns the first mismatch.
func checkSynthetic(b []byte, dt config.DType, size, elems int, k uint64) error {
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

var ctx = context.Background()

func TestSyntheticFill(t *testing.T) {
	for _, dt := range config.SyntheticDTypes {
		for _, shape := range [][]int{{}, {1}, {3, 5}, {7, 300}, {2, 3, 4, 5}} {
			for _, k := range []uint64{0, 1, 1<<24/6 - 1, 1 << 40} { // the last two cross 2^24
				t.Run(fmt.Sprintf("%v/%v/%d", dt, shape, k), func(t *testing.T) {
					const size = 6
					f := newSynthetic(&config.Synthetic{Shape: shape, DType: dt}, size)
					elems := f.elems
					buf := make([]byte, size*elems*dt.Size())
					for i := range buf {
						buf[i] = 0xAB // garbage that a skipped byte would leave behind
					}
					if err := f.Fill(ctx, buf, k); err != nil {
						t.Fatal(err)
					}
					if err := checkSynthetic(buf, dt, size, elems, k); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

func TestSyntheticWrongLength(t *testing.T) {
	f := newSynthetic(&config.Synthetic{Shape: []int{4}, DType: config.Float32}, 2)
	if err := f.Fill(ctx, make([]byte, 31), 0); err == nil {
		t.Fatal("no error for a short buffer")
	}
}

// The 30 MB batch of the benchmarks: 32 x [19,12,32,32] float32 = 29.9 MB. Each benchmark
// writes a ring's worth of batches (4 buffers of 30 MB, used in turn, 120 MB: more than a
// server's L3), like `shmloader run` with 4 slots. Baselines measured in the same run:
// BenchmarkClear30MB (clear(), the runtime's memclr: a write-only bound) and BenchmarkCopy30MB
// (copy() from another 4 buffers). Report BenchmarkSyntheticFill30MB as a ratio against them.
const benchBatch = 32 * 19 * 12 * 32 * 32 * 4

func benchBuffers() [][]byte {
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, benchBatch)
		clear(bufs[i]) // fault the pages in before timing
	}
	return bufs
}

func BenchmarkSyntheticFill30MB(b *testing.B) {
	f := newSynthetic(&config.Synthetic{Shape: []int{19, 12, 32, 32}, DType: config.Float32}, 32)
	bufs := benchBuffers()
	b.SetBytes(benchBatch)
	for i := 0; b.Loop(); i++ {
		if err := f.Fill(ctx, bufs[i%len(bufs)], uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClear30MB(b *testing.B) {
	bufs := benchBuffers()
	b.SetBytes(benchBatch)
	for i := 0; b.Loop(); i++ {
		clear(bufs[i%len(bufs)])
	}
}

func BenchmarkCopy30MB(b *testing.B) {
	src, dst := benchBuffers(), benchBuffers()
	b.SetBytes(benchBatch)
	for i := 0; b.Loop(); i++ {
		copy(dst[i%len(dst)], src[i%len(src)])
	}
}

func BenchmarkSyntheticFillScalar(b *testing.B) {
	f := newSynthetic(&config.Synthetic{Shape: nil, DType: config.Int64}, 1024)
	buf := make([]byte, 1024*8)
	b.SetBytes(int64(len(buf)))
	for i := 0; b.Loop(); i++ {
		f.Fill(ctx, buf, uint64(i))
	}
}
