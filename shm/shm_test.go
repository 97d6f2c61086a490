package shm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// useDir points Dir at dir for the duration of the test.
func useDir(t *testing.T, dir string) {
	t.Helper()
	old := Dir
	Dir = dir
	t.Cleanup(func() { Dir = old })
}

func TestValidateName(t *testing.T) {
	good := []string{"a", "ring-1", "A.b_c-9", strings.Repeat("x", 200)}
	for _, n := range good {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	bad := []string{"", strings.Repeat("x", 201), "a/b", "a b", "é", "..", ".", "a\x00"}
	for _, n := range bad {
		if err := ValidateName(n); err == nil {
			t.Errorf("ValidateName(%q) = nil, want an error", n)
		}
	}
}

func TestCreateOpenListUnlink(t *testing.T) {
	useDir(t, t.TempDir())
	const size = 3*4096 + 17
	seg, err := Create("t1", size)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if seg.Size() != size || seg.Name() != "t1" || seg.Path() != filepath.Join(Dir, "gobatch-t1") || seg.IsMemfd() {
		t.Fatalf("segment = size %d name %q path %q memfd %v", seg.Size(), seg.Name(), seg.Path(), seg.IsMemfd())
	}
	fi, err := os.Stat(seg.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != size {
		t.Fatalf("file mode %v size %d, want 0600 and %d", fi.Mode(), fi.Size(), size)
	}
	var st unix.Stat_t
	if err := unix.Stat(seg.Path(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < size {
		t.Fatalf("only %d bytes allocated, want >= %d (fallocate)", st.Blocks*512, size)
	}
	b := seg.Bytes()
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d = %d, want zero-filled", i, v)
		}
	}
	b[0], b[size-1] = 0xAB, 0xCD

	if _, err := Create("t1", size); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create = %v, want fs.ErrExist", err)
	}
	other, err := Open("t1", true)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Size() != size || other.Bytes()[0] != 0xAB || other.Bytes()[size-1] != 0xCD {
		t.Fatalf("Open sees size %d, bytes %x %x", other.Size(), other.Bytes()[0], other.Bytes()[size-1])
	}
	other.Bytes()[1] = 7
	if b[1] != 7 {
		t.Fatal("write through one mapping is not visible through the other (not MAP_SHARED?)")
	}

	// List ignores foreign files and invalid names.
	os.WriteFile(filepath.Join(Dir, "unrelated"), nil, 0o600)
	os.WriteFile(filepath.Join(Dir, "gobatch-bad name"), nil, 0o600)
	names, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "t1" {
		t.Fatalf("List = %q, want [t1]", names)
	}
	if err := Unlink("t1"); err != nil {
		t.Fatal(err)
	}
	if err := Unlink("t1"); err != nil {
		t.Fatalf("second Unlink = %v, want nil", err)
	}
	if _, err := Open("t1", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open after Unlink = %v, want fs.ErrNotExist", err)
	}
	// The mapping survives the unlink.
	if b[0] != 0xAB {
		t.Fatal("mapping lost after unlink")
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := seg.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestCreateBadArgs(t *testing.T) {
	useDir(t, t.TempDir())
	if _, err := Create("x", 0); err == nil {
		t.Error("Create size 0 succeeded")
	}
	if _, err := Create("a/b", 10); err == nil {
		t.Error("Create with a slash succeeded")
	}
	os.WriteFile(Path("empty"), nil, 0o600)
	if _, err := Open("empty", false); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Open of an empty file = %v, want an error saying it is empty", err)
	}
}

// TestSmallShm mounts a 4 MiB tmpfs and checks that a segment larger than it fails at Create
// with a NoSpaceError (not later with SIGBUS) and leaves no file behind.
func TestSmallShm(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a private tmpfs (%v); needs root or CAP_SYS_ADMIN", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	useDir(t, dir)

	const need = 16 << 20
	seg, err := Create("big", need)
	if err == nil {
		seg.Close()
		t.Fatal("Create of 16 MiB on a 4 MiB tmpfs succeeded")
	}
	var nse *NoSpaceError
	if !errors.As(err, &nse) {
		t.Fatalf("error %v (%T) is not a *NoSpaceError", err, err)
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("error does not unwrap to ENOSPC: %v", err)
	}
	if nse.Need != need || nse.Avail <= 0 || nse.Avail > 4<<20 {
		t.Errorf("Need %d Avail %d, want %d and (0, 4 MiB]", nse.Need, nse.Avail, need)
	}
	msg := err.Error()
	for _, want := range []string{"16777216", "--shm-size", "medium: Memory", dir} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left behind: %v", ents)
	}
	// A segment that fits works and can be written end to end.
	seg, err = Create("small", 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	b := seg.Bytes()
	for i := range b {
		b[i] = byte(i)
	}
	seg.Close()
	Unlink("small")
}

func TestMemfd(t *testing.T) {
	const size = 1 << 20
	seg, err := CreateMemfd(size)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if !seg.IsMemfd() || seg.Size() != size || seg.Name() != "" {
		t.Fatalf("memfd segment: memfd %v size %d name %q", seg.IsMemfd(), seg.Size(), seg.Name())
	}
	if !seg.Sealed() {
		t.Error("CreateMemfd did not seal the size")
	}
	if err := unix.Ftruncate(seg.Fd(), 0); err == nil {
		t.Error("ftruncate of a sealed memfd succeeded")
	}
	seg.Bytes()[size-1] = 42

	// An attacher maps the whole file through a duplicate of the descriptor.
	f, err := seg.DupFile()
	if err != nil {
		t.Fatal(err)
	}
	fd2, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(seg.Fd(), &st); err != nil {
		t.Fatalf("segment descriptor unusable after closing its DupFile: %v", err)
	}
	att, err := FromFD(fd2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	if att.Size() != size || att.Bytes()[size-1] != 42 {
		t.Fatalf("attach: size %d last byte %d", att.Size(), att.Bytes()[size-1])
	}
}

// TestMemfdWithoutSealing is the Python trainer's case: os.memfd_create(name, MFD_CLOEXEC)
// cannot be sealed; FromFD must size and map it anyway.
func TestMemfdWithoutSealing(t *testing.T) {
	fd, err := unix.MemfdCreate("gobatch-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := FromFD(fd, 64<<10)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	defer seg.Close()
	if seg.Sealed() {
		t.Error("an MFD_CLOEXEC-only memfd reports sealed")
	}
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	if st.Size != 64<<10 {
		t.Fatalf("size %d after FromFD, want %d", st.Size, 64<<10)
	}
	seg.Bytes()[64<<10-1] = 1
}

func TestFromFDRefuses(t *testing.T) {
	if _, err := FromFD(987654, 4096); err == nil {
		t.Error("FromFD of a closed descriptor succeeded")
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	if _, err := FromFD(int(r.Fd()), 4096); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FromFD of a pipe = %v", err)
	}
	fd, _ := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
	defer unix.Close(fd)
	unix.Ftruncate(fd, 8192)
	if _, err := FromFD(fd, 4096); err == nil {
		t.Error("FromFD(size) of a larger file succeeded")
	}
}

func TestNoSpaceErrorText(t *testing.T) {
	e := &NoSpaceError{Path: "/dev/shm/gobatch-x", Dir: "/dev/shm", Need: 3 << 30, Avail: 64 << 20, Err: unix.ENOSPC}
	msg := e.Error()
	for _, want := range []string{"3221225472", "67108864", "--shm-size=4g", "/dev/shm/gobatch-x"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

func TestFits(t *testing.T) {
	for _, named := range []bool{true, false} {
		err := Fits(1<<50, named)
		if err == nil || !strings.Contains(err.Error(), "the ring needs 1125899906842624 bytes") {
			t.Fatalf("named=%v: %v", named, err)
		}
		if err := Fits(1<<20, named); err != nil {
			t.Fatalf("named=%v, 1 MiB: %v", named, err)
		}
	}
	if n, ok := MemAvailable(); !ok || n <= 0 {
		t.Fatalf("MemAvailable: %d %v", n, ok)
	}
}
