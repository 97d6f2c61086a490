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
		ctx, cancel := context.WithTimeout(context.Background(), ring.DefaultAttachTimeout)
		pr.seg, pr.r, err = ring.AttachNamed(ctx, f.ring, true)
		cancel()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("--join: no ring %q (%s): start its creator first", f.ring, shm.Path(f.ring))
			}
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
		if err := pr.compatible(); err != nil {
			pr.seg.Close()
			return usageError("run", fmt.Errorf("--join %s: %w", f.ring, err))
		}
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

// compatible refuses to join a ring whose layout differs from the one this configuration makes.
func (pr *producerRun) compatible() error {
	if err := pr.r.Compatible(pr.layout); err != nil {
		return err
	}
	have, want := pr.r.Layout(), pr.layout
	switch {
	case have.Slots != want.Slots:
		return fmt.Errorf("the ring has %d slots, this configuration %d", have.Slots, want.Slots)
	case have.BatchSize != want.BatchSize:
		return fmt.Errorf("the ring has batch size %d, this configuration %d", have.BatchSize, want.BatchSize)
	case pr.flags.startSet && have.StartBatch != want.StartBatch:
		return fmt.Errorf("the ring starts at batch %d, --start says %d", have.StartBatch, want.StartBatch)
	case pr.cfg.Batch.Batches != 0 && have.StartBatch+have.TotalBatches != pr.cfg.Batch.Batches,
		pr.cfg.Batch.Batches == 0 && have.TotalBatches != 0:
		return fmt.Errorf("the ring's stream ends at batch %d (start %d + total %d), this configuration's at %d (0 = unbounded)",
			have.StartBatch+have.TotalBatches, have.StartBatch, have.TotalBatches, pr.cfg.Batch.Batches)
	}
	pr.layout = have // the ring's own start and total (relevant without --start)
	return nil
}
