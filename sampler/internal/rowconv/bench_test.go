package rowconv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gobatch/gobatch/readers/zarr"
)

// The gather's shape: rows of 32 values read from a 256x256 chunk (rows 256 values
// apart) and written contiguously into a slot.
const (
	benchRow   = 32
	benchChunk = 256
)

// benchParams are the parameters of each stored type's benchmark: the satellite case
// for the 16-bit integers, CF with a mask for the others.
var benchParams = map[zarr.Elem]Params{
	zarr.Int16:   {Src: zarr.Int16, CF: zarr.CFParams{Scale: 0.001, Masks: []float64{-1}}},
	zarr.Uint16:  {Src: zarr.Uint16, CF: zarr.CFParams{Scale: 0.001, Masks: []float64{65535}}},
	zarr.Int8:    {Src: zarr.Int8, CF: zarr.CFParams{Scale: 0.5, Offset: 10, Masks: []float64{-128}}},
	zarr.Uint8:   {Src: zarr.Uint8, CF: zarr.CFParams{Scale: 0.5, Offset: 10, Masks: []float64{255}}},
	zarr.Float16: {Src: zarr.Float16, CF: zarr.CFParams{Scale: 1}},
	zarr.Float32: {Src: zarr.Float32, CF: zarr.CFParams{Scale: 1}},
}

// benchChunkBytes is a chunk of a smooth field, as satellite and weather data are: a
// random walk over about 4000 raw steps (12 bits of a 16-bit type; for 8-bit types
// the whole range), so that table lookups hit as they would on real data. float32
// chunks hold the same field as finite floats.
func benchChunkBytes(src zarr.Elem) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	size := src.Size()
	b := make([]byte, benchChunk*benchChunk*size)
	v := 2000
	for i := 0; i < benchChunk*benchChunk; i++ {
		v = min(max(v+rng.IntN(9)-4, 0), 4000)
		switch size {
		case 1:
			b[i] = byte(v)
		case 2:
			binary.NativeEndian.PutUint16(b[2*i:], uint16(v))
			if src == zarr.Float16 {
				binary.NativeEndian.PutUint16(b[2*i:], uint16(0x3c00+v)) // 1 .. ~8
			}
		case 4:
			binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)*0.01))
		}
	}
	return b
}

// timeRows runs op b.N times on one locked thread and reports per 32-value row (rows
// per op): ns/row, the wall time; cpu-ns/row, the thread's CPU time; min-ns/row, the
// fastest op. The last two are what the kernel costs when other processes share the
// cores (the wall time counts their time too).
func timeRows(b *testing.B, rows int, op func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fastest := time.Duration(math.MaxInt64)
	b.ResetTimer()
	c0 := threadCPU()
	for range b.N {
		t0 := time.Now()
		op()
		fastest = min(fastest, time.Since(t0))
	}
	cpuNs := threadCPU() - c0
	b.StopTimer()
	total := float64(b.N) * float64(rows)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/row")
	b.ReportMetric(float64(cpuNs)/total, "cpu-ns/row")
	b.ReportMetric(float64(fastest.Nanoseconds())/float64(rows), "min-ns/row")
}

// BenchmarkRows converts a slot's worth of 32-value rows (256 rows, 32 KiB written,
// cache-resident) per op, in one Rows call; ns/row is per 32-value row, and the MB/s
// figure is bytes written.
func BenchmarkRows(b *testing.B) {
	for _, src := range storedTypes {
		for _, k := range availablePaths() {
			for _, nt := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/nt=%v", src, k, nt)
				b.Run(name, func(b *testing.B) {
					conv, err := New(benchParams[src])
					if err != nil {
						b.Fatal(err)
					}
					chunk := benchChunkBytes(src)
					dst := make([]float32, benchChunk*benchRow)
					defer setPath(setPath(k))
					b.SetBytes(int64(4 * len(dst)))
					timeRows(b, benchChunk, func() {
						if nt {
							conv.RowsNT(dst, benchRow, chunk, benchChunk, benchChunk, benchRow)
						} else {
							conv.Rows(dst, benchRow, chunk, benchChunk, benchChunk, benchRow)
						}
					})
				})
			}
		}
	}
}

// BenchmarkRow is one 32-value Row call per row: the per-call overhead beside
// BenchmarkRows.
func BenchmarkRow(b *testing.B) {
	for _, src := range []zarr.Elem{zarr.Int16, zarr.Float32} {
		for _, k := range availablePaths() {
			b.Run(fmt.Sprintf("%s/%s", src, k), func(b *testing.B) {
				conv, _ := New(benchParams[src])
				chunk := benchChunkBytes(src)
				dst := make([]float32, benchChunk*benchRow)
				size := src.Size()
				defer setPath(setPath(k))
				b.SetBytes(int64(4 * len(dst)))
				timeRows(b, benchChunk, func() {
					for r := 0; r < benchChunk; r++ {
						conv.Row(dst[r*benchRow:(r+1)*benchRow], chunk[r*benchChunk*size:])
					}
				})
			})
		}
	}
}

// BenchmarkPiece is the gather's call: one Rows call per chunk piece of a 32x32 crop
// (32 rows of 32), eight pieces per op from different places of the chunk.
func BenchmarkPiece(b *testing.B) {
	for _, src := range []zarr.Elem{zarr.Int16, zarr.Float32} {
		for _, k := range availablePaths() {
			b.Run(fmt.Sprintf("%s/%s", src, k), func(b *testing.B) {
				conv, _ := New(benchParams[src])
				chunk := benchChunkBytes(src)
				f32 := unsafe.Slice((*float32)(unsafe.Pointer(&chunk[0])), len(chunk)/4)
				dst := make([]float32, 8*benchRow*benchRow)
				defer setPath(setPath(k))
				b.SetBytes(int64(4 * len(dst)))
				timeRows(b, 8*benchRow, func() {
					for p := 0; p < 8; p++ {
						d := dst[p*benchRow*benchRow:]
						off := p*benchRow*benchChunk + p*benchRow // piece p: rows 32p.., columns 32p..
						if src == zarr.Float32 {
							CopyRows(d, benchRow, f32[off:], benchChunk, benchRow, benchRow)
						} else {
							conv.Rows(d, benchRow, chunk[off*src.Size():], benchChunk, benchRow, benchRow)
						}
					}
				})
			})
		}
	}
}

// BenchmarkDecodeThenCopy is today's gather for comparison: the whole chunk decoded to
// float32 by zarr.Float32Decoder (once per cache miss in the sampler, so it is timed
// apart), then the 32-value float32 rows copied as the sampler's copyRows does.
func BenchmarkDecodeThenCopy(b *testing.B) {
	p := benchParams[zarr.Int16]
	dec, _ := zarr.NewFloat32Decoder(p.Src, p.CF)
	chunk := benchChunkBytes(zarr.Int16)
	decoded := make([]float32, benchChunk*benchChunk)
	dst := make([]float32, benchChunk*benchRow)
	b.Run("decode-chunk", func(b *testing.B) {
		b.SetBytes(int64(4 * len(decoded)))
		timeRows(b, len(decoded)/benchRow, func() { dec.Decode(decoded, chunk) })
	})
	b.Run("copy-rows", func(b *testing.B) {
		b.SetBytes(int64(4 * len(dst)))
		timeRows(b, benchChunk, func() { copyRowsGo(dst, benchRow, decoded, benchChunk, benchChunk, benchRow) })
	})
}

// BenchmarkDest writes destinations from 4 MiB to 256 MiB (past the last-level
// cache) per op, as a batch is written: rows of 32 values from a cache-resident chunk
// (sources 256 values apart), the slot's rows contiguous; normal stores against
// non-temporal ones (then Fence, as the writer does before publishing). The sizes at
// which NT wins are, with BenchmarkFill's gather, what UseNT's rule stands on.
func BenchmarkDest(b *testing.B) {
	const most = 256 << 20
	all := make([]float32, most/4)
	for i := range all {
		all[i] = 1 // touch every page before timing
	}
	for _, size := range []int{4 << 20, 16 << 20, 64 << 20, most} {
		dst := all[:size/4]
		for _, src := range []zarr.Elem{zarr.Int16, zarr.Float32} {
			conv, _ := New(benchParams[src])
			chunk := benchChunkBytes(src)
			f32 := unsafe.Slice((*float32)(unsafe.Pointer(&benchChunkBytes(zarr.Float32)[0])), benchChunk*benchChunk)
			for _, nt := range []bool{false, true} {
				b.Run(fmt.Sprintf("%dMiB/%s/nt=%v", size>>20, src, nt), func(b *testing.B) {
					piece := benchChunk * benchRow // values per chunk pass
					b.SetBytes(int64(size))
					timeRows(b, len(dst)/benchRow, func() {
						for off := 0; off+piece <= len(dst); off += piece {
							d := dst[off : off+piece]
							switch {
							case src == zarr.Float32 && nt:
								CopyRowsNT(d, benchRow, f32, benchChunk, benchChunk, benchRow)
							case src == zarr.Float32:
								CopyRows(d, benchRow, f32, benchChunk, benchChunk, benchRow)
							case nt:
								conv.RowsNT(d, benchRow, chunk, benchChunk, benchChunk, benchRow)
							default:
								conv.Rows(d, benchRow, chunk, benchChunk, benchChunk, benchRow)
							}
						}
						Fence()
					})
				})
			}
		}
	}
}
