package sampler

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobatch/gobatch/sampler/chunks"
)

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Gather-kernel benchmarks: the satellite part of one batch (32 examples of 19 x 12 x 32 x 32
// float32, 29.9 MB) gathered from one day of nowcast-ref held in chunk layout
// (12, 12, 128, 128), in each representation a cache could hold. SetBytes is the output size,
// so MB/s is output bandwidth. Run with -cpu 1,2 for one and two cores; compare with
// BenchmarkMemcpyBatch (the roofline: a plain copy of the same bytes).
//
//	go test -run - -bench 'Kernel|Memcpy' -cpu 1,2 ./sampler

const (
	kT, kC, kP = 288, 12, 256 // one day of satellite data
	kCT, kCP   = 12, 128      // chunk shape (12, 12, 128, 128)
	kSteps     = 19
	kCrop      = 32
	kBatch     = 32
)

var kernelData struct {
	once sync.Once
	i16  [][]int16   // per chunk (time chunk major, then y chunk, x chunk)
	f32  [][]float32 // the same, CF-decoded
}

func kernelChunks(b *testing.B) {
	kernelData.once.Do(func() {
		n := kT / kCT * (kP / kCP) * (kP / kCP)
		kernelData.i16 = make([][]int16, n)
		kernelData.f32 = make([][]float32, n)
		for c := range kernelData.i16 {
			r := make([]int16, kCT*kC*kCP*kCP)
			f := make([]float32, len(r))
			for i := range r {
				v := int16((i*7 + c*131) % 1000)
				if (i+c)%50000 == 0 {
					v = -1
				}
				r[i] = v
				f[i] = cfDecode(v)
			}
			kernelData.i16[c], kernelData.f32[c] = r, f
		}
	})
}

func cfDecode(v int16) float32 {
	if v == -1 {
		return float32(math.NaN())
	}
	return float32(float64(v) * 0.001)
}

// kernelGather walks one batch's satellite rows and hands each (chunk, source offset, output
// offset, length) to row.
func kernelGather(seed uint64, row func(chunk int, src, dst, n int)) {
	const cpc = kP / kCP // chunks per row of the chunk grid
	for e := 0; e < kBatch; e++ {
		h := hashKey(seed, uint64(e))
		ti := 6 + uniform(h, kT-18)
		cy := 16 + uniform(mix64(h), kP-32)
		cx := 16 + uniform(mix64(h+1), kP-32)
		base := e * kSteps * kC * kCrop * kCrop
		for k := 0; k < kSteps; k++ {
			t := ti - 6 + k
			for c := 0; c < kC; c++ {
				o := base + (k*kC+c)*kCrop*kCrop
				for y := cy - 16; y < cy+16; y++ {
					for x := cx - 16; x < cx+16; {
						n := min(kCP-x%kCP, cx+16-x)
						chunk := (t/kCT*cpc+y/kCP)*cpc + x/kCP
						src := ((t%kCT*kC+c)*kCP+y%kCP)*kCP + x%kCP
						row(chunk, src, o+(y-cy+16)*kCrop+(x-cx+16), n)
						x += n
					}
				}
			}
		}
	}
}

// reportCPU adds the CPU time per op and the output bandwidth per CPU-second (robust to other
// processes sharing the cores, unlike the wall-clock MB/s).
func reportCPU(b *testing.B, cpu time.Duration, bytes int64) {
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e9, "GB/cpu-s")
}

func benchKernel(b *testing.B, makeRow func(out []float32) func(chunk, src, dst, n int)) {
	kernelChunks(b)
	const bytes = kBatch * kSteps * kC * kCrop * kCrop * 4
	b.SetBytes(bytes)
	b.ResetTimer()
	defer func(c0 time.Duration) { reportCPU(b, cpuTime()-c0, bytes) }(cpuTime())
	var seq uint64
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		out := make([]float32, kBatch*kSteps*kC*kCrop*kCrop)
		row := makeRow(out)
		for pb.Next() {
			mu.Lock()
			seq++
			s := seq
			mu.Unlock()
			kernelGather(s, row)
		}
	})
}

// Int16 cache, a naive per-element CF decode (compare, multiply in float64, round).
func BenchmarkKernelInt16CF(b *testing.B) {
	benchKernel(b, func(out []float32) func(int, int, int, int) {
		return func(chunk, src, dst, n int) {
			s := kernelData.i16[chunk][src : src+n]
			d := out[dst : dst+n]
			for i, v := range s {
				if v == -1 {
					d[i] = float32(math.NaN())
				} else {
					d[i] = float32(float64(v) * 0.001)
				}
			}
		}
	})
}

// Int16 cache, decoded through a 65536-entry table (exact, one load per element).
func BenchmarkKernelInt16LUT(b *testing.B) {
	lut := make([]float32, 1<<16)
	for i := range lut {
		lut[i] = cfDecode(int16(i))
	}
	benchKernel(b, func(out []float32) func(int, int, int, int) {
		return func(chunk, src, dst, n int) {
			s := kernelData.i16[chunk][src : src+n]
			d := out[dst : dst+n]
			for i, v := range s {
				d[i] = lut[uint16(v)]
			}
		}
	})
}

// Float32 cache (decoded at load), a copy() per row.
func BenchmarkKernelFloat32Copy(b *testing.B) {
	benchKernel(b, func(out []float32) func(int, int, int, int) {
		return func(chunk, src, dst, n int) {
			copy(out[dst:dst+n], kernelData.f32[chunk][src:src+n])
		}
	})
}

// Float32 cache, a fixed-size 128-byte move for full rows (what gather4 does).
func BenchmarkKernelFloat32Move128(b *testing.B) {
	benchKernel(b, func(out []float32) func(int, int, int, int) {
		return func(chunk, src, dst, n int) {
			if n == 32 {
				*(*[32]float32)(out[dst:]) = *(*[32]float32)(kernelData.f32[chunk][src:])
				return
			}
			copy(out[dst:dst+n], kernelData.f32[chunk][src:src+n])
		}
	})
}

// The roofline: a plain copy of one batch's bytes (30.3 MB) from a rotating part of a large
// source, so that the source is not in the CPU caches.
func BenchmarkMemcpyBatch(b *testing.B) {
	kernelChunks(b)
	const n = 30_300_000 / 4
	b.SetBytes(n * 4)
	b.ResetTimer()
	defer func(c0 time.Duration) { reportCPU(b, cpuTime()-c0, n*4) }(cpuTime())
	var seq uint64
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		out := make([]float32, n)
		for pb.Next() {
			mu.Lock()
			seq++
			s := int(seq)
			mu.Unlock()
			for off := 0; off < n; {
				c := kernelData.f32[(s*4+off/len(kernelData.f32[0]))%len(kernelData.f32)]
				off += copy(out[off:], c)
			}
		}
	})
}

// BenchmarkFill fills whole nowcast-ref batches (the shipped preset) from a dataset written by
// tools/gen_nowcast.py, with everything in the cache (warmed first). Dataset:
// $GOBATCH_NOWCAST_DIR, or one day at 256 px generated with the venv. -cpu N runs N readers.
func BenchmarkFill(b *testing.B) {
	dir := nowcastData(b, "1", 256)
	cacheMB := int64(1200)
	if s := os.Getenv("GOBATCH_BENCH_CACHE_MB"); s != "" {
		cacheMB, _ = strconv.ParseInt(s, 10, 64)
	}
	j, err := NewJob(loadPreset(b, nil), Options{DataRoot: dir, CacheMB: cacheMB})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var total int64
	for _, t := range j.Tensors() {
		total += t.NBytes()
	}
	// Warm: fill batches from every reader until a pass adds no chunk.
	warm := func(from uint64, n int) {
		var wg sync.WaitGroup
		for r := 0; r < runtime.GOMAXPROCS(0); r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				buf := batchBuf(j)
				for k := r; k < n; k += runtime.GOMAXPROCS(0) {
					if err := j.Fill(ctx, from+uint64(k), buf); err != nil {
						b.Error(err)
						return
					}
				}
			}(r)
		}
		wg.Wait()
	}
	if j.Mode() == SampleRandom {
		for i := 0; i < 20; i++ {
			before := j.Cache().Stats().Misses
			warm(uint64(i)*100, 100)
			if j.Cache().Stats().Misses == before {
				break
			}
		}
	}
	st0 := j.Cache().Stats()
	cpu0 := cpuTime()
	b.SetBytes(total)
	b.ResetTimer()
	var seq uint64 = 1 << 20
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		buf := batchBuf(j)
		for pb.Next() {
			mu.Lock()
			seq++
			k := seq
			mu.Unlock()
			if err := j.Fill(ctx, k, buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	st := j.Cache().Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
	reportCPU(b, cpu, total)
	if n := (st.Hits - st0.Hits) + (st.Misses - st0.Misses); n > 0 {
		b.ReportMetric(float64(st.Hits-st0.Hits)/float64(n), "hit-rate")
	}
	if s := j.Stats(); s.Mode == SampleLocality {
		b.ReportMetric(s.SegmentsPerBatch, "segments/batch")
		b.ReportMetric(float64(s.ResidentSegments), "resident-segments")
		b.ReportMetric(float64(j.loc.steps), "segment-steps")
	}
	b.ReportMetric(float64(st.PeakBytes)/(1<<20), "cache-peak-MiB")
}

// BenchmarkChunkLoad splits the cost of one satellite chunk miss (12 x 12 x 128 x 128 int16,
// Blosc lz4 + shuffle) into the reader's decode and the sampler's conversion to float32, and
// the first touch of fresh cache memory (mapping + page faults).
func BenchmarkChunkLoad(b *testing.B) {
	dir := nowcastData(b, "1", 256)
	ds, err := OpenZarr(dir + "/satellite.zarr")
	if err != nil {
		b.Fatal(err)
	}
	arr, err := ds.Array("data")
	if err != nil {
		b.Fatal(err)
	}
	c, err := newChunked(0, "satellite", arr, nil)
	if err != nil {
		b.Fatal(err)
	}
	native := make([]byte, c.elems*c.itemLen)
	dst := make([]float32, c.elems)
	idx := func(i int) []int { return []int{i % 24, 0, i / 24 % 2, i / 48 % 2} }
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(native)))
		for i := 0; i < b.N; i++ {
			if err := arr.DecodeChunk(idx(i), native); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("convert", func(b *testing.B) {
		b.SetBytes(int64(len(dst)) * 4)
		for i := 0; i < b.N; i++ {
			c.conv.Decode(dst, native)
		}
	})
	b.Run("fresh-map", func(b *testing.B) {
		b.SetBytes(int64(len(dst)) * 4)
		for i := 0; i < b.N; i++ {
			mem, err := chunks.MapBlock(int64(len(dst)) * 4)
			if err != nil {
				b.Fatal(err)
			}
			c.conv.Decode(bytesAsFloat32(mem), native)
			chunks.UnmapBlock(mem)
		}
	})
}
