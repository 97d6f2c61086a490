package zarr

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"
)

// The benchmarks read testdata/gen.py's bench store (12x4x256x256, a smooth field
// plus noise): int16 with Blosc lz4 + byte shuffle and float32 with zstd (chunks
// 4x1x256x256), and float16 with ocf-blosc2 zstd (chunks 4x4x128x128). The store is written once into $GOBATCH_ZARR_BENCH (default
// $TMPDIR/gobatch-zarr-bench) with the project venv's zarr-python.
//
//	go test -run '^$' -bench . -benchtime 20x ./readers/zarr
//
// MB/s is decoded output per second. BenchmarkCodecOnly decodes the same chunk files
// with the bare codec (no zarr layer, no copy into a box): the baseline for the ratio.

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

func benchStore(b *testing.B) *Hierarchy {
	benchOnce.Do(func() {
		benchDir = os.Getenv("GOBATCH_ZARR_BENCH")
		if benchDir == "" {
			benchDir = filepath.Join(os.TempDir(), "gobatch-zarr-bench")
		}
		if _, err := os.Stat(filepath.Join(benchDir, "bench.zarr", ".zmetadata")); err == nil {
			return
		}
		py, _ := filepath.Abs("../../.venv/bin/python")
		if _, err := os.Stat(py); err != nil {
			benchErr = err
			return
		}
		out, err := exec.Command(py, "testdata/gen.py", "--bench", benchDir).CombinedOutput()
		if err != nil {
			benchErr = &Error{Err: err, Path: string(out)}
		}
	})
	if benchErr != nil {
		b.Skipf("no bench store: %v", benchErr)
	}
	h, err := OpenDir(filepath.Join(benchDir, "bench.zarr"))
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func BenchmarkReadBox(b *testing.B) {
	for _, c := range []struct {
		name, path string
		opt        ReadOptions
	}{
		{"i2_blosc_lz4/native", "i2_blosc_lz4", ReadOptions{}},
		{"i2_blosc_lz4/float32", "i2_blosc_lz4", ReadOptions{Out: Float32}},
		{"i2_blosc_lz4/native/parallel2", "i2_blosc_lz4", ReadOptions{Parallel: 2}},
		{"f4_zstd/native", "f4_zstd", ReadOptions{}},
		{"f4_zstd/native/parallel2", "f4_zstd", ReadOptions{Parallel: 2}},
		{"f4_zstd/cf", "f4_zstd", ReadOptions{CF: true}},
		{"f2_blosc2_zstd/float32", "f2_blosc2_zstd", ReadOptions{Out: Float32}},
	} {
		b.Run(c.name, func(b *testing.B) {
			a, err := benchStore(b).OpenArray(c.path)
			if err != nil {
				b.Fatal(err)
			}
			out := a.OutElem(&c.opt)
			dst := make([]uint64, a.Len()*out.Size()/8+1)
			buf := unsafeBytes(dst)
			zero := a.fullBox()
			b.SetBytes(int64(a.Len() * out.Size()))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := a.ReadBox(zero, a.Shape, buf, &c.opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadBoxSmall reads 32x32 windows (all 12 steps, all 4 channels) at random
// places with a fresh decode each time: the sampler's cost per example without a cache.
func BenchmarkReadBoxSmall(b *testing.B) {
	a, err := benchStore(b).OpenArray("i2_blosc_lz4")
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, 12*4*32*32)
	b.SetBytes(int64(len(dst) * 4))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		y, x := (i*37)%224, (i*91)%224
		if err := a.ReadBoxFloat32([]int{0, 0, y, x}, []int{12, 4, y + 32, x + 32}, dst, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func unsafeBytes(s []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}

func BenchmarkCodecOnly(b *testing.B) {
	h := benchStore(b)
	for _, path := range []string{"i2_blosc_lz4", "f4_zstd", "f2_blosc2_zstd"} {
		b.Run(path, func(b *testing.B) {
			a, err := h.OpenArray(path)
			if err != nil {
				b.Fatal(err)
			}
			var chunks [][]byte
			idx := make([]int, a.NDim())
			for {
				raw, err := os.ReadFile(filepath.Join(benchDir, "bench.zarr", filepath.FromSlash(a.ChunkKeyOf(idx))))
				if err != nil {
					b.Fatal(err)
				}
				chunks = append(chunks, raw)
				if !nextIndex(idx, make([]int, a.NDim()), a.grid) {
					break
				}
			}
			codec := a.pipe.b2b[0]
			dst := make([]byte, a.ChunkBytes())
			b.SetBytes(int64(len(chunks) * a.ChunkBytes()))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, c := range chunks {
					if _, err := codec.decode(dst, c, len(dst)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkDecodeDir reads every array of the stores benchmarks/zarr_decode.py keeps
// with --dir (GOBATCH_ZARR_DECODE_DIR), whole, into one reused buffer: the work
// `shmloader read --bench` times, without the process around it.
//
//	GOBATCH_ZARR_DECODE_DIR=/tmp/zdb GOMAXPROCS=1 go test -run '^$' -bench DecodeDir -cpuprofile cpu.out ./readers/zarr
func BenchmarkDecodeDir(b *testing.B) {
	dir := os.Getenv("GOBATCH_ZARR_DECODE_DIR")
	if dir == "" {
		b.Skip("GOBATCH_ZARR_DECODE_DIR not set")
	}
	stores, _ := filepath.Glob(filepath.Join(dir, "*.zarr"))
	for _, s := range stores {
		b.Run(filepath.Base(s), func(b *testing.B) {
			h, err := OpenDir(s)
			if err != nil {
				b.Fatal(err)
			}
			a, err := h.OpenArray("")
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]uint64, a.Len()*a.DType.Size/8+1)
			buf := unsafeBytes(dst)[:a.Len()*a.DType.Size]
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := a.ReadBox(a.fullBox(), a.Shape, buf, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
