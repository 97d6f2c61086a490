package sampler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gobatch/gobatch/internal/synthcheck"
	"github.com/gobatch/gobatch/ring"
)

var ctx = context.Background()

func TestSyntheticFill(t *testing.T) {
	for _, dt := range SyntheticDTypes {
		for _, shape := range [][]int{{}, {1}, {3, 5}, {7, 300}, {2, 3, 4, 5}} {
			for _, k := range []uint64{0, 1, 1<<24/6 - 1, 1 << 40} { // the last two cross 2^24
				t.Run(fmt.Sprintf("%v/%v/%d", dt, shape, k), func(t *testing.T) {
					const size = 6
					f := newSynthetic(&Synthetic{Shape: shape, DType: dt}, size)
					elems := f.elems
					buf := make([]byte, size*elems*dt.Size())
					for i := range buf {
						buf[i] = 0xAB // garbage that a skipped byte would leave behind
					}
					if err := f.Fill(ctx, k, [][]byte{buf}); err != nil {
						t.Fatal(err)
					}
					if err := synthcheck.Check(buf, dt, size, elems, k); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

func TestSyntheticWrongLength(t *testing.T) {
	f := newSynthetic(&Synthetic{Shape: []int{4}, DType: ring.Float32}, 2)
	if err := f.Fill(ctx, 0, [][]byte{make([]byte, 31)}); err == nil {
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
	f := newSynthetic(&Synthetic{Shape: []int{19, 12, 32, 32}, DType: ring.Float32}, 32)
	bufs := benchBuffers()
	b.SetBytes(benchBatch)
	for i := 0; b.Loop(); i++ {
		if err := f.Fill(ctx, uint64(i), [][]byte{bufs[i%len(bufs)]}); err != nil {
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
	f := newSynthetic(&Synthetic{Shape: nil, DType: ring.Int64}, 1024)
	buf := make([]byte, 1024*8)
	b.SetBytes(int64(len(buf)))
	for i := 0; b.Loop(); i++ {
		f.Fill(ctx, uint64(i), [][]byte{buf})
	}
}

func TestSyntheticDelayHonoursContext(t *testing.T) {
	f := newSynthetic(&Synthetic{Shape: []int{1}, DType: ring.Uint8, Delay: time.Hour}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	// The fill waits its delay (one that did not would return nil) and ends with ctx.
	if err := f.Fill(ctx, 0, [][]byte{make([]byte, 1)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fill of an hour's delay under a 20 ms context: %v", err)
	}
	f.delay = time.Millisecond
	if err := f.Fill(context.Background(), 0, [][]byte{make([]byte, 1)}); err != nil {
		t.Fatalf("Fill after its delay: %v", err)
	}
}
