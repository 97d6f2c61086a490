package rowconv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadLLC reads a cache directory laid out as Linux's sysfs lays it out: the
// highest data or unified level counts, instruction caches do not.
func TestReadLLC(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct{ level, typ, size string }{
		{"1", "Data", "32K"}, {"1", "Instruction", "32K"}, {"2", "Unified", "512K"}, {"3", "Unified", "32768K"},
	} {
		d := filepath.Join(dir, "index"+string(rune('0'+i)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": c.level, "type": c.typ, "size": c.size} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := readLLC(dir); got != 32<<20 {
		t.Errorf("readLLC = %d, want %d", got, 32<<20)
	}
	if got := readLLC(filepath.Join(dir, "none")); got != defaultLLC {
		t.Errorf("readLLC of no directory = %d, want the default %d", got, defaultLLC)
	}
	for s, want := range map[string]int64{"512K": 512 << 10, "32M": 32 << 20, "1G": 1 << 30, "4096": 4096, "": 0, "x": 0, "-1K": 0} {
		if got := parseSize(s); got != want {
			t.Errorf("parseSize(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestUseNT: ntFromLLCs last-level caches is the line, and only where the kernels have
// non-temporal stores.
func TestUseNT(t *testing.T) {
	line := ntFromLLCs * llcBytes()
	for _, k := range availablePaths() {
		old := setPath(k)
		nt := k != pathGo
		if UseNT(line) != nt || UseNT(4*line) != nt || UseNT(line-1) {
			t.Errorf("%s: UseNT(%d, %d, %d) = %v %v %v", k, line, 4*line, line-1, UseNT(line), UseNT(4*line), UseNT(line-1))
		}
		setPath(old)
	}
	t.Logf("last-level cache %d MiB: non-temporal from %d MiB", llcBytes()>>20, line>>20)
}
