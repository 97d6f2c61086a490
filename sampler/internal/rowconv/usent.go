package rowconv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// UseNT reports whether the writes of one batch of this many bytes should be
// non-temporal: where the kernels have such stores, when the batch is at least half
// the last-level cache. A batch that large does not stay cached until the trainer
// reads it (the decoded chunks it is gathered from, the other readers' batches and
// the trainer share that cache), so ordinary stores would only evict chunk data and
// read every destination line for ownership first; a smaller batch is better left in
// the cache, where the trainer's first touch finds it.
func UseNT(bytes int64) bool {
	return hasNT() && bytes >= llcBytes()/2
}

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
