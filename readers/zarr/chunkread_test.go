package zarr

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeV2 writes an uncompressed int16 array "a" of shape 4x4 in chunks of 2x2 to a new
// directory store and stores the chunks listed in keep ("0.0", ...), each holding its
// linear chunk number.
func writeV2(t *testing.T, keep ...string) (string, *Array) {
	t.Helper()
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	if err := os.MkdirAll(a, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "<i2", "compressor": null,
		"fill_value": -7, "order": "C", "filters": null}`
	if err := os.WriteFile(filepath.Join(a, ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, k := range keep {
		b := make([]byte, 8)
		for e := 0; e < 4; e++ {
			binary.LittleEndian.PutUint16(b[2*e:], uint16(i+1))
		}
		if err := os.WriteFile(filepath.Join(a, k), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	arr, err := OpenArray(st, "a")
	if err != nil {
		t.Fatal(err)
	}
	return dir, arr
}

func TestDecodeChunkFound(t *testing.T) {
	_, a := writeV2(t, "0.0", "1.1")
	for _, c := range []struct {
		idx   []int
		found bool
		want  int16
	}{{[]int{0, 0}, true, 1}, {[]int{0, 1}, false, -7}, {[]int{1, 0}, false, -7}, {[]int{1, 1}, true, 2}} {
		out, found, err := a.DecodeChunkFound(c.idx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if found != c.found || int16(binary.LittleEndian.Uint16(out)) != c.want {
			t.Errorf("chunk %v: found %v value %d, want %v %d", c.idx, found, int16(binary.LittleEndian.Uint16(out)), c.found, c.want)
		}
	}
	if n, _, _ := a.StoredChunks(); n != 2 || a.NumObjects() != 4 {
		t.Errorf("stored %d of %d, want 2 of 4", n, a.NumObjects())
	}
	err := a.ChunkError([]int{0, 1}, nil)
	if !errors.Is(err, ErrMissingChunk) || !strings.Contains(err.Error(), "key a/0.1") || !strings.Contains(err.Error(), "store ") {
		t.Errorf("missing-chunk error %q: want the store, key a/0.1 and ErrMissingChunk", err)
	}
}

// TestNonRegularChunkRefused: a chunk that is a FIFO (no writer: a plain open waits for ever),
// a character device, or a symbolic link to one, is refused at once, naming the key and the
// store, through the allocation-free read path and through the Store interface.
func TestNonRegularChunkRefused(t *testing.T) {
	dir, a := writeV2(t, "0.0")
	if err := syscall.Mkfifo(filepath.Join(dir, "a", "0.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(dir, "a", "1.0")); err != nil {
		t.Fatal(err)
	}
	for _, idx := range [][]int{{0, 1}, {1, 0}} {
		done := make(chan error, 1)
		go func() { _, _, err := a.DecodeChunkFound(idx, nil); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %v: the read blocked", idx)
		}
		key := a.ChunkKeyOf(idx)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), dir) {
			t.Errorf("chunk %v: %v; want ErrNotRegular naming %s and the store %s", idx, err, key, dir)
		}
		if _, err := a.Store.Get(key); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), key) {
			t.Errorf("Get %s: %v; want ErrNotRegular naming the key", key, err)
		}
	}
	if _, found, err := a.DecodeChunkFound([]int{0, 0}, nil); err != nil || !found {
		t.Errorf("a regular chunk next to them: found %v, %v", found, err)
	}
}
