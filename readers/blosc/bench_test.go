package blosc

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// BenchmarkDecodeFiles decodes the chunks that benchmarks/blosc/bench.py writes
// into $BLOSC_BENCH_DIR (NAME.blosc1 or NAME.blosc2, with NAME.raw the expected
// output). MB/s is of decompressed output. Skipped when the variable is unset.
func BenchmarkDecodeFiles(b *testing.B) {
	dir := os.Getenv("BLOSC_BENCH_DIR")
	if dir == "" {
		b.Skip("BLOSC_BENCH_DIR not set; run benchmarks/blosc/bench.py")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.blosc[12]"))
	sort.Strings(files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		base := strings.TrimSuffix(f, filepath.Ext(f))
		want, err := os.ReadFile(base + ".raw")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(base), func(b *testing.B) {
			var d Decoder
			dec := d.Decompress
			if filepath.Ext(f) == ".blosc2" {
				dec = d.Decompress2
			}
			dst := make([]byte, len(want))
			if _, err := dec(dst, src); err != nil || !bytes.Equal(dst, want) {
				b.Fatalf("decode: %v (equal %v)", err, bytes.Equal(dst, want))
			}
			b.SetBytes(int64(len(want)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := dec(dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Micro-benchmarks of the hot loops on 256 KiB blocks.
func BenchmarkUnshuffle(b *testing.B) {
	for _, ts := range []int{2, 4, 8, 3, 16} {
		src := pattern("ramp", 256<<10, ts, 1)
		dst := make([]byte, len(src))
		b.Run("ts"+itoa(ts), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				unshuffle(dst, src, ts)
			}
		})
	}
}

func BenchmarkBitunshuffle(b *testing.B) {
	for _, ts := range []int{1, 2, 4, 8} {
		src := pattern("ramp", 256<<10, ts, 1)
		dst := make([]byte, len(src))
		scratch := make([]byte, len(src))
		b.Run("ts"+itoa(ts), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				bitunshuffle(dst, src, scratch, ts, true)
			}
		})
	}
}

func itoa(n int) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(buf[i:])
		}
	}
}
