package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// The ring side of `shmloader run`: check that the segment fits, then create it (a named ring
// or the trainer's memfd) or join an existing named ring, and register this process's
// producer entry.

// preflight refuses a segment that cannot fit before anything is reserved. fallocate on a
// tmpfs as large as RAM (the usual /dev/shm) would fill memory up to ENOSPC, and wake the OOM
// killer, before it fails.
func preflight(need int64, named bool) error {
	if named {
		var st unix.Statfs_t
		if err := unix.Statfs(shm.Dir, &st); err == nil {
			if avail := int64(st.Bavail) * int64(st.Bsize); need > avail {
				return fmt.Errorf("the ring needs %d bytes (%s) of shared memory and %s has %d (%s) free: "+
					"use fewer or smaller ring slots or batches, or make the mount larger (Docker --shm-size)",
					need, mb(need), shm.Dir, avail, mb(avail))
			}
		}
	}
	if avail, ok := memAvailable(); ok && need > avail {
		return fmt.Errorf("the ring needs %d bytes (%s) of shared memory, more than the %d (%s) of memory available: "+
			"use fewer or smaller ring slots or batches", need, mb(need), avail, mb(avail))
	}
	return nil
}

// memAvailable reads MemAvailable from /proc/meminfo.
func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10, true
			}
		}
	}
	return 0, false
}

// joinRing maps the existing ring that --join names: the named ring, or the trainer's memfd
// (a restarted child of gobatch.Loader), waiting for it to be ready.
func joinRing(f runFlags) (*shm.Segment, *ring.Ring, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ring.DefaultAttachTimeout)
	defer cancel()
	if f.ring == "" {
		seg, err := shm.FromFD(f.memfd, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("--join --memfd %d: %w", f.memfd, err)
		}
		r, err := ring.OpenContext(ctx, seg.Bytes())
		if err != nil {
			seg.Close()
			return nil, nil, fmt.Errorf("--join --memfd %d: %w", f.memfd, err)
		}
		return seg, r, nil
	}
	seg, r, err := ring.AttachNamedAllowing(ctx, f.ring, true, f.allowedUID())
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("--join: no ring %q (%s): start its creator first", f.ring, shm.Path(f.ring))
	}
	return seg, r, err
}

// layoutEnd is the absolute index where the layout's stream ends (0 = unbounded): with --epoch
// the end of that epoch, else batch.batches.
func layoutEnd(l ring.Layout) uint64 {
	if l.TotalBatches == 0 {
		return 0
	}
	return l.StartBatch + l.TotalBatches
}

// attach creates the segment and the ring (or joins one) and registers this producer.
func (pr *producerRun) attach() int {
	f, l := pr.flags, pr.layout
	var err error
	if !f.join {
		if err := preflight(l.SegmentBytes(), f.ring != ""); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
	}
	switch {
	case f.join:
		if pr.seg, pr.r, err = joinRing(f); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
		// The ring decides whether this configuration can join it, and its own layout (start
		// and total) is the one to fill (PROTOCOL.md 3.7.4).
		joined, err := pr.r.JoinLayout(pr.layout, pr.flags.startSet, layoutEnd(pr.layout))
		if err != nil {
			pr.seg.Close()
			what := f.ring
			if what == "" {
				what = fmt.Sprintf("--memfd %d", f.memfd)
			}
			return usageError("run", fmt.Errorf("--join %s: %w", what, err))
		}
		pr.layout = joined
	case f.ring != "":
		if pr.seg, err = shm.Create(f.ring, l.SegmentBytes()); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
		pr.creator = true
		if pr.r, err = ring.Create(pr.seg.Bytes(), l, true); err != nil {
			shm.Unlink(f.ring)
			pr.seg.Close()
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
	default:
		if pr.seg, err = shm.FromFD(f.memfd, l.SegmentBytes()); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: --memfd %d: %v\n", f.memfd, err)
			return exitFailure
		}
		pr.creator = true
		if pr.r, err = ring.Create(pr.seg.Bytes(), l, false); err != nil {
			pr.seg.Close()
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
	}
	if pr.p, err = pr.r.NewProducer(f.readers); err != nil {
		if pr.creator && f.ring != "" {
			shm.Unlink(f.ring)
		}
		pr.seg.Close()
		fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// ringReceivedAll reports whether the consumer has taken every batch of r's bounded stream:
// released them all, or all but those it still holds (a consumer may exit holding the last
// one). A consumer that exits after that has not died mid-stream.
func ringReceivedAll(r *ring.Ring) bool {
	st := r.Stats()
	held := uint64(0)
	for _, sl := range st.SlotState {
		if sl.State == ring.SlotReading {
			held++
		}
	}
	return st.TotalBatches != 0 && st.BatchesRead+held >= st.TotalBatches
}
