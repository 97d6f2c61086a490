package shm

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// chownToOther gives path to a uid that is not the test's (chown needs root: CAP_CHOWN).
func chownToOther(t *testing.T, path string) int {
	t.Helper()
	other := os.Geteuid() + 4242
	if err := os.Lchown(path, other, -1); err != nil {
		t.Skipf("cannot chown to another uid (%v); needs root", err)
	}
	return other
}

// refused asserts that err is a *RefusedError naming path whose reason contains want.
func refused(t *testing.T, what string, err error, path, want string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("%s: error %v (%T), want a *RefusedError", what, err, err)
	}
	if re.Path != path || !strings.Contains(re.Reason, want) || !strings.Contains(err.Error(), path) {
		t.Fatalf("%s: refused %q for %q, want the path %q and %q in the reason", what, re.Reason, re.Path, path, want)
	}
}

func TestOpenRefusesWhatIsNotOurRing(t *testing.T) {
	useDir(t, t.TempDir())
	// The file a symlink would lead to: a real segment of ours, so only the link is at fault.
	seg, err := Create("target", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if err := os.Symlink(Path("target"), Path("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(Path("dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(Path("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"link", "symbolic link"},
		{"dir", "is a directory"},
		{"fifo", "is a FIFO"}, // and the open did not block (O_NONBLOCK)
	} {
		_, err := Open(c.name, false)
		refused(t, c.name, err, Path(c.name), c.want)
	}
	for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
		if err := os.Chmod(Path("target"), mode); err != nil {
			t.Fatal(err)
		}
		_, err := Open("target", false)
		refused(t, mode.String(), err, Path("target"), "writable by group/other")
	}
	os.Chmod(Path("target"), 0o600)
	if s, err := Open("target", false); err != nil {
		t.Fatalf("our own 0600 segment: %v", err)
	} else {
		s.Close()
	}
}

func TestOpenRefusesAnotherUsersRingUnlessAllowed(t *testing.T) {
	useDir(t, t.TempDir())
	seg, err := Create("theirs", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	other := chownToOther(t, Path("theirs"))
	_, err = Open("theirs", false)
	refused(t, "other uid", err, Path("theirs"), "owned by uid")
	if !strings.Contains(err.Error(), "--allow-uid") {
		t.Errorf("the refusal does not say how to allow it: %v", err)
	}
	s, err := OpenAllowing("theirs", false, other)
	if err != nil {
		t.Fatalf("OpenAllowing(uid %d): %v", other, err)
	}
	s.Close()
	// Sharing with another user is done through group write: allowed with the uid, not without.
	os.Chmod(Path("theirs"), 0o660)
	if s, err := OpenAllowing("theirs", false, other); err != nil {
		t.Fatalf("OpenAllowing of a group-writable ring of the allowed uid: %v", err)
	} else {
		s.Close()
	}
	os.Chmod(Path("theirs"), 0o606)
	_, err = OpenAllowing("theirs", false, other)
	refused(t, "other-writable, allowed uid", err, Path("theirs"), "writable by group/other")
}

func TestOpenErrorSaysPermissionDenied(t *testing.T) {
	// Root passes every permission check, so the errno is fed to the classifier directly; the
	// Python test runs shmloader as another user for the real thing.
	p := t.TempDir() + "/gobatch-x"
	os.WriteFile(p, nil, 0o600)
	err := openError(p, unix.EACCES)
	refused(t, "EACCES", err, p, "permission denied")
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "mode 0600") {
		t.Errorf("EACCES: %v does not wrap fs.ErrPermission or name the mode", err)
	}
}

// TestCreateRefusesASquattedName pre-creates the name the way a squatter would: a symlink to a
// file the creator must not write, a file of another user, and a plain file of ours. Create
// fails on each, and the squatter's target is left as it was.
func TestCreateRefusesASquattedName(t *testing.T) {
	dir := t.TempDir()
	useDir(t, dir)
	victim := dir + "/victim"
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(victim, Path("link"))
	if _, err := Create("link", 8192); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Create over a symlink = %v, want fs.ErrExist naming the symlink", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	os.WriteFile(Path("file"), []byte("squat"), 0o666)
	if os.Lchown(Path("file"), os.Geteuid()+4242, -1) == nil {
		if _, err := Create("file", 8192); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "uid") {
			t.Errorf("Create over another user's file = %v, want fs.ErrExist naming the uid", err)
		}
	}
	if b, _ := os.ReadFile(Path("file")); string(b) != "squat" {
		t.Errorf("the squatter's file was written: %q", b)
	}
}

func TestMemfdSealedAgainstResizeAndResealing(t *testing.T) {
	seg, err := CreateMemfd(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	seals, err := unix.FcntlInt(uintptr(seg.Fd()), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	const want = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if seals&want != want {
		t.Fatalf("seals %#x, want %#x set", seals, want)
	}
	for _, size := range []int64{0, 4096, 1 << 20} {
		if err := unix.Ftruncate(seg.Fd(), size); err != unix.EPERM {
			t.Errorf("ftruncate to %d = %v, want EPERM", size, err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(seg.Fd()), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); err != unix.EPERM {
		t.Errorf("adding a seal after F_SEAL_SEAL = %v, want EPERM", err)
	}
	seg.Bytes()[1<<16-1] = 1 // still mapped whole
}
