package ring

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gobatch/gobatch/shm"
	"golang.org/x/sys/unix"
)

// TestAttachNamedRefusesUnsafeFilesAtOnce: a symlink, a directory, a FIFO and another user's
// ring are refused by the opening rules (PROTOCOL.md 1.1) without waiting out the attach
// timeout, with the path and the reason; the other user's ring is accepted when allowed.
func TestAttachNamedRefusesUnsafeFilesAtOnce(t *testing.T) {
	useShmDir(t)
	newNamedRing(t, "real", streamLayout(2, 0, 1))
	os.Symlink(shm.Path("real"), shm.Path("link"))
	os.Mkdir(shm.Path("dir"), 0o700)
	unix.Mkfifo(shm.Path("fifo"), 0o600)
	cases := map[string]string{"link": "symbolic link", "dir": "is a directory", "fifo": "is a FIFO"}
	other := os.Geteuid() + 4242
	canChown := os.Lchown(shm.Path("real"), other, -1) == nil
	if canChown {
		cases["real"] = "owned by uid"
	}
	for name, want := range cases {
		// A wait (for the file to become a ring) would end in ctx's error, not a refusal.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _, err := AttachNamed(ctx, name, false)
		cancel()
		var re *shm.RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), shm.Path(name)) {
			t.Errorf("AttachNamed(%s) = %v, want a *shm.RefusedError naming %s and %q", name, err, shm.Path(name), want)
		}
	}
	if !canChown {
		t.Skip("cannot chown to another uid (needs root): the other-uid case is not tested")
	}
	s, r, err := AttachNamedAllowing(context.Background(), "real", false, other)
	if err != nil {
		t.Fatalf("AttachNamedAllowing(uid %d) = %v", other, err)
	}
	if r.Layout().Slots != 2 {
		t.Errorf("allowed ring: layout %+v", r.Layout())
	}
	s.Close()
}

// TestGCLeavesOtherUsersRings: gc judges only its own user's segments unless told otherwise;
// a dead ring of another uid is kept with the reason, and removed with AllowUID.
func TestGCLeavesOtherUsersRings(t *testing.T) {
	useShmDir(t)
	_, r := newNamedRing(t, "theirs", streamLayout(2, 0, 1))
	pid, st := deadProcess(t)
	setCreator(r, pid, st)
	other := os.Geteuid() + 4242
	if err := os.Lchown(shm.Path("theirs"), other, -1); err != nil {
		t.Skipf("cannot chown to another uid (%v); needs root", err)
	}
	res, err := GC(GCOptions{})
	if err != nil || len(res) != 1 || res[0].Removed || !strings.Contains(res[0].Reason, "owned by uid") {
		t.Fatalf("GC = %+v, %v; want the other user's ring kept, saying whose it is", res, err)
	}
	if _, err := os.Stat(shm.Path("theirs")); err != nil {
		t.Fatalf("the other user's ring is gone: %v", err)
	}
	res, err = GC(GCOptions{AllowUID: other})
	if err != nil || len(res) != 1 || !res[0].Removed {
		t.Fatalf("GC(AllowUID %d) = %+v, %v; want the dead ring removed", other, res, err)
	}
}
