package rowconv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// UseNT reports whether the writes of one batch of this many bytes should be
// non-temporal: where the kernels have such stores, when the batch is at least
// ntFromLLCs times the last-level cache. The line stands on measurements, not on the
// argument that a batch larger than the cache only evicts chunk data and reads every
// destination line for ownership: on the machine it was measured on (AMD EPYC VM,
// 32 MiB LLC, 2026-12-02), the gather's non-temporal stores lost at every batch size
// tried. BenchmarkFill -cpu 1 (sampler, CPU ms per batch, normal against NT stores):
// 32 examples (30 MB, 0.9x the LLC) 10.5-14 against 24-28; 64 (61 MB) 23-25 against
// 47-53; 128 (121 MB, 3.8x) 41-54 against 91-98; and 41-51 against 47-52 even with NT
// only for pieces of whole aligned 64-byte lines. (A crop row is 128 bytes, split where
// a crop crosses a chunk in x, so its lines are written in parts, which costs a
// non-temporal store dearly.) End to end, with the trainer touching every batch
// (benchmarks/percore_bench.py --quick --parts a, 1 day in cache, readers 2): 57 b/s
// and 28.5 loader CPU ms per batch with NT forced on against 89 b/s and 14.6 without.
// Only BenchmarkDest's whole-line row copies into
// destinations of 64 MiB and more ran faster with NT (float32 about 2x; int16 even at
// 256 MiB), so NT is left to batches well past the largest size the gather lost at.
func UseNT(bytes int64) bool {
	return hasNT() && bytes >= ntFromLLCs*llcBytes()
}

// ntFromLLCs is UseNT's line in last-level caches (see UseNT for the measurements).
const ntFromLLCs = 8

// defaultLLC is the last-level cache size assumed where the system does not say.
const defaultLLC = 32 << 20

var llcOnce = sync.OnceValue(func() int64 { return readLLC("/sys/devices/system/cpu/cpu0/cache") })

func llcBytes() int64 { return llcOnce() }

// readLLC returns the size of the highest-level data or unified cache that the sysfs
// cache directory dir lists (index*/level, type, size as "32768K"), defaultLLC when
// it lists none.
func readLLC(dir string) int64 {
	idx, _ := filepath.Glob(filepath.Join(dir, "index*"))
	best, bestLevel := int64(0), 0
	for _, d := range idx {
		level, err1 := readInt(filepath.Join(d, "level"))
		typ, err2 := os.ReadFile(filepath.Join(d, "type"))
		size, err3 := os.ReadFile(filepath.Join(d, "size"))
		if err1 != nil || err2 != nil || err3 != nil || strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		b := parseSize(strings.TrimSpace(string(size)))
		if b > 0 && level >= bestLevel {
			best, bestLevel = b, level
		}
	}
	if best == 0 {
		return defaultLLC
	}
	return best
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// parseSize parses sysfs cache sizes: "512K", "32M", "1024"; 0 when it cannot.
func parseSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v * mult
}
