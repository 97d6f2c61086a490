//go:build linux

package zarr

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the pages of path that are in the page cache (mincore), and all of them.
func residentPages(t *testing.T, path string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal("mincore:", e)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// evict drops path's clean pages from the page cache.
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestReadAheadFillsPageCache: after ReadAhead, the chunk's file is in the page cache (the
// kernel read it in the background) while nothing else of the store was read; indices the
// array refuses, chunks not stored and stores without read-ahead are ignored.
func TestReadAheadFillsPageCache(t *testing.T) {
	dir, arr := writeV2(t, "0.0") // a 4x4 array in 2x2 chunks, of which 0.0 is stored
	chunk := filepath.Join(dir, "a", "0.0")
	f, err := os.OpenFile(chunk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // POSIX_FADV_DONTNEED drops clean pages only
		t.Fatal(err)
	}
	f.Close()
	evict(t, chunk)
	if n, _ := residentPages(t, chunk); n > 0 {
		t.Skipf("%s keeps %d pages after POSIX_FADV_DONTNEED (tmpfs?): cannot see a read-ahead", dir, n)
	}
	for _, idx := range [][]int{{1, 1}, {5, 0}, {0}, {-1, 0}} { // not stored, out of the grid, wrong rank
		arr.ReadAhead(idx)
	}
	if n, _ := residentPages(t, chunk); n > 0 {
		t.Fatalf("ReadAhead of other chunks brought %d pages of chunk 0.0 in", n)
	}
	arr.ReadAhead([]int{0, 0})
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, pages := residentPages(t, chunk)
		if n == pages {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after ReadAhead, %d of chunk 0.0's %d pages are in the page cache", n, pages)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mem := NewMemStore("mem")
	mem.Data["a/.zarray"], err = os.ReadFile(filepath.Join(dir, "a", ".zarray"))
	if err != nil {
		t.Fatal(err)
	}
	marr, err := OpenArray(mem, "a")
	if err != nil {
		t.Fatal(err)
	}
	marr.ReadAhead([]int{0, 0}) // no read-ahead in memory: nothing to do, nothing to fail
}
