package zarr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// returnsWithin runs f, failing the test if it has not returned in d (a hang is the fault here).
func returnsWithin(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still running after %v", what, d)
		return nil
	}
}

// A chunk key that is a directory is an error naming the key, not a missing chunk (which
// reads as the fill value: the batches would silently differ from the data); a chunk file
// larger than any value may be (a sparse terabyte) is refused naming the key and its size,
// before anything is allocated.
func TestHostileChunks(t *testing.T) {
	dir, a := writeV2(t, "0.0")
	if err := os.Mkdir(filepath.Join(dir, "a", "0.1"), 0o755); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "a", "1.0")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // sparse: no disk used
		t.Skipf("sparse file: %v", err)
	}
	f.Close()
	for _, c := range []struct {
		idx  []int
		is   error
		want string
	}{
		{[]int{0, 1}, ErrNotRegular, "a directory"},
		{[]int{1, 0}, ErrCorrupt, "1099511627776 bytes, more than a value may have"},
	} {
		key := a.ChunkKeyOf(c.idx)
		err := returnsWithin(t, 10*time.Second, key, func() error { _, _, err := a.DecodeChunkFound(c.idx, nil); return err })
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("chunk %s: %v; want %v naming the key and %q", key, err, c.is, c.want)
		}
		if _, err := a.Store.Get(key); !errors.Is(err, c.is) || !strings.Contains(err.Error(), key) {
			t.Errorf("Get %s: %v; want %v naming the key", key, err, c.is)
		}
	}
}

// Metadata that is a FIFO, a symbolic link to /dev/zero or a sparse 2 GiB file: opening the
// store returns at once with an error naming the file, never reads it whole.
func TestHostileMetadata(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(p string) error
		want string
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"dev-zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"sparse", func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(2 << 30)
		}, "more than a metadata document may have"},
	} {
		for _, key := range []string{"zarr.json", ".zmetadata"} {
			dir := t.TempDir()
			if key == ".zmetadata" { // a v2 group whose consolidated metadata is the hostile file
				if err := os.WriteFile(filepath.Join(dir, ".zgroup"), []byte(`{"zarr_format": 2}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.make(filepath.Join(dir, key)); err != nil {
				t.Fatal(err)
			}
			err := returnsWithin(t, 10*time.Second, c.name+" "+key, func() error { _, err := OpenPath(dir); return err })
			if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: OpenPath = %v; want an error naming %s and saying %q", c.name, key, err, key, c.want)
			}
		}
	}
}
