package ring

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobatch/gobatch/shm"
)

func TestGC(t *testing.T) {
	useShmDir(t)
	l := streamLayout(2, 0, 1)
	mk := func(name string) *shm.Segment {
		seg, err := shm.Create(name, l.SegmentBytes())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seg.Close() })
		return seg
	}
	// live: a ready ring whose creator (this process) is alive.
	live := mk("live")
	if _, err := Create(live.Bytes(), l, true); err != nil {
		t.Fatal(err)
	}
	// dead: a ready ring whose creator has exited (its registry entry, 0, is the creator's
	// too: this process stands in for it, and a dead creator leaves no live producer).
	dead := mk("dead")
	rd, _ := Create(dead.Bytes(), l, true)
	pid, st := deadProcess(t)
	setCreator(rd, pid, st)
	// initialising, creator alive: must survive.
	ini := mk("init-live")
	ri, _ := Create(ini.Bytes(), l, true)
	*ri.u32(offState) = stateInitialising
	// initialising, creator dead (crashed during creation).
	crashed := mk("init-dead")
	rc, _ := Create(crashed.Bytes(), l, true)
	*rc.u32(offState) = stateInitialising
	setCreator(rc, pid, st)
	// reused pid: alive pid, other starttime.
	reused := mk("reused")
	rr, _ := Create(reused.Bytes(), l, true)
	setCreator(rr, *rr.u32(offCreatorPID), *rr.u64(offCreatorStarttime)+99)
	// no header yet: an empty file and a zero-filled one, just made.
	os.WriteFile(shm.Path("empty"), nil, 0o600)
	mk("zero")

	want := map[string]bool{"live": false, "dead": true, "init-live": false, "init-dead": true, "reused": true, "empty": false, "zero": false}
	res, err := GC(GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if w, ok := want[x.Name]; !ok || w != x.Removed {
			t.Errorf("dry run: %s removed=%v (%s), want %v", x.Name, x.Removed, x.Reason, w)
		}
	}
	if names, _ := shm.List(); len(names) != len(want) {
		t.Fatalf("dry run removed files: %v", names)
	}
	res, err = GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(want) {
		t.Fatalf("GC judged %d segments, want %d: %+v", len(res), len(want), res)
	}
	for _, x := range res {
		_, err := os.Stat(shm.Path(x.Name))
		gone := errors.Is(err, fs.ErrNotExist)
		if gone != want[x.Name] || x.Removed != want[x.Name] {
			t.Errorf("%s: removed=%v gone=%v (%s), want %v", x.Name, x.Removed, gone, x.Reason, want[x.Name])
		}
		if x.Name == "init-live" && !strings.Contains(x.Reason, "alive") {
			t.Errorf("init-live reason %q", x.Reason)
		}
	}
	// Past the grace period a file without a header goes too.
	time.Sleep(5 * time.Millisecond)
	res, _ = GC(GCOptions{Grace: time.Millisecond})
	for _, x := range res {
		if (x.Name == "empty" || x.Name == "zero") != x.Removed {
			t.Errorf("after grace: %s removed=%v (%s)", x.Name, x.Removed, x.Reason)
		}
	}
}

// TestGCKeepsHeldRing: a named ring whose creator died while a joined producer or its
// consumer still holds it is kept (PROTOCOL.md 3.7.4: the stream goes on, and a later --join
// must still find it); once no live process holds it, it is removed.
func TestGCKeepsHeldRing(t *testing.T) {
	useShmDir(t)
	l := streamLayout(2, 0, 1)
	pid, st := deadProcess(t)
	own, ownStart, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	for _, holder := range []string{"producer", "consumer"} {
		seg, err := shm.Create(holder, l.SegmentBytes())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seg.Close() })
		r, _ := Create(seg.Bytes(), l, true)
		// The creator (entry 0) is dead; a live process (this one) holds the ring.
		setCreator(r, pid, st)
		if holder == "producer" {
			atomic.StoreUint64(r.entryWordOf(1), entryWord(EntryActive, 0, uint32(own)))
			*r.u64(entryOff(1) + regStarttime) = ownStart
		} else if _, err := r.NewConsumer(); err != nil {
			t.Fatal(err)
		}
		res, err := GC(GCOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("creator pid %d is dead, but", pid)
		for _, x := range res {
			if x.Name == holder && (x.Removed || !strings.Contains(x.Reason, want) || !strings.Contains(x.Reason, fmt.Sprint(own))) {
				t.Errorf("%s held by this process: removed=%v (%s), want kept naming pid %d", holder, x.Removed, x.Reason, own)
			}
		}
		// The holder dies: nothing holds the ring any more.
		if holder == "producer" {
			*r.u64(entryOff(1) + regStarttime) = st
		} else {
			atomic.StoreUint64(r.u64(offConsumerState), claimWord(ConsumerAttached, pid))
			*r.u64(offConsumerStarttime) = st
		}
		res, _ = GC(GCOptions{})
		for _, x := range res {
			if x.Name == holder && !x.Removed {
				t.Errorf("%s after its holder died: kept (%s), want removed", holder, x.Reason)
			}
		}
	}
}

// TestAttachNamedWaitsForHeader: an attacher that opens the file between the creator's
// O_EXCL and its header write waits instead of refusing.
func TestAttachNamedWaitsForHeader(t *testing.T) {
	useShmDir(t)
	l := streamLayout(2, 0, 1)
	os.WriteFile(shm.Path("late"), nil, 0o600) // created, not reserved yet
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		seg, r, err := AttachNamed(ctx, "late", false)
		if err == nil {
			if r.Layout().Slots != 2 {
				err = errors.New("wrong layout")
			}
			seg.Close()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	os.Remove(shm.Path("late"))
	seg, err := shm.Create("late", l.SegmentBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	time.Sleep(30 * time.Millisecond) // reserved and zero: magic not written yet
	if _, err := Create(seg.Bytes(), l, true); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AttachNamed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := AttachNamed(ctx, "missing", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AttachNamed(missing) = %v", err)
	}
	// A zero header (magic 0) is waited on, bounded by ctx.
	os.WriteFile(shm.Path("zeros"), make([]byte, HeaderBytes+808), 0o600)
	if _, _, err := AttachNamed(ctx, "zeros", false); err == nil || !strings.Contains(err.Error(), "not written in time") {
		t.Errorf("AttachNamed(zeros) = %v", err)
	}
	os.WriteFile(shm.Path("junk"), []byte(strings.Repeat("x", HeaderBytes+808)), 0o600)
	if _, _, err := AttachNamed(ctx, "junk", false); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Errorf("AttachNamed(junk) = %v", err)
	}
}
