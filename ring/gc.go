package ring

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gobatch/gobatch/shm"
	"golang.org/x/sys/unix"
)

// GCOptions configure GC.
type GCOptions struct {
	// Grace is how old (by modification time) a segment without a readable header must be
	// before GC removes it: its creator may be between open and header write. 0 means 60 s.
	Grace time.Duration
	// DryRun reports what would be removed without removing it.
	DryRun bool
	// AllowUID, if above 0, is a uid whose segments GC judges besides its own user's
	// (`shmloader gc --allow-uid`). Others' segments, symlinks and non-regular files are kept
	// untouched, with the reason (PROTOCOL.md 1.1).
	AllowUID int
}

// GCResult is GC's verdict on one named segment.
type GCResult struct {
	Name    string
	Removed bool   // removed (or, with DryRun, would be)
	Reason  string // why it was removed or kept
}

// GC looks at every named segment in shm.Dir and removes those whose creator is dead (pid
// plus starttime; PROTOCOL.md 3.5), whatever their state, unless a live process still holds
// the ring: a registered producer (ACTIVE or CLAIMING, say a --join producer that goes on
// feeding the stream after the creator died) or its consumer (CLAIMING or ATTACHED), 3.7.4. It
// never removes a segment whose creator is alive, so a live ring that is still initialising is
// safe; a file without a header yet is removed only once it is older than the grace period.
// Mappings of removed segments stay valid.
func GC(opt GCOptions) ([]GCResult, error) {
	if opt.Grace <= 0 {
		opt.Grace = 60 * time.Second
	}
	names, err := shm.List()
	if err != nil {
		return nil, err
	}
	var out []GCResult
	var errs []error
	for _, n := range names {
		res, err := gcOne(n, opt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}

func gcOne(name string, opt GCOptions) (GCResult, error) {
	res := GCResult{Name: name}
	path := shm.Path(name)
	allow := shm.NoOtherUID
	if opt.AllowUID > 0 {
		allow = opt.AllowUID
	}
	// Read-only when read-write is not permitted: judged, removed if dead; a claim cannot be
	// reclaimed then.
	f, err := shm.OpenFile(path, allow, true)
	if err != nil {
		var refused *shm.RefusedError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			res.Reason = "already gone"
			return res, nil
		case errors.As(err, &refused) && !errors.Is(err, fs.ErrPermission):
			res.Reason = "not judged: " + refused.Reason
			return res, nil
		}
		return res, fmt.Errorf("gc %s: %w", path, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return res, fmt.Errorf("gc %s: %w", path, err)
	}
	hdr := make([]byte, offTensorTable) // the identity, the consumer record and the registry
	n, _ := f.ReadAt(hdr, 0)
	remove := false
	if n < len(hdr) || binary.LittleEndian.Uint64(hdr[offMagic:]) != Magic || binary.LittleEndian.Uint32(hdr[offCreatorPID:]) == 0 {
		age := time.Since(time.Unix(st.Mtim.Unix()))
		if ct := time.Since(time.Unix(st.Ctim.Unix())); ct < age {
			age = ct
		}
		if age < opt.Grace {
			res.Reason = fmt.Sprintf("no ring header yet, %s old (creator may still be initialising)", age.Round(time.Millisecond))
			return res, nil
		}
		remove, res.Reason = true, fmt.Sprintf("no ring header after %s (not a ring, or its creator crashed during creation)", age.Round(time.Second))
	} else {
		pid := binary.LittleEndian.Uint32(hdr[offCreatorPID:])
		start := binary.LittleEndian.Uint64(hdr[offCreatorStarttime:])
		state := binary.LittleEndian.Uint32(hdr[offState:])
		if Alive(pid, start) {
			res.Reason = fmt.Sprintf("creator pid %d is alive", pid) + reclaimClaim(f, hdr, opt.DryRun)
			return res, nil
		}
		what := "ready"
		if state != stateReady {
			what = "initialising"
		}
		if holder := liveHolder(hdr); holder != "" {
			res.Reason = fmt.Sprintf("creator pid %d is dead, but %s is alive and holds the ring", pid, holder)
			return res, nil
		}
		remove, res.Reason = true, fmt.Sprintf("creator pid %d is dead (ring %s)", pid, what)
	}
	if !remove || opt.DryRun {
		res.Removed = remove
		return res, nil
	}
	// Remove only the file we judged: the name may have been removed and created again.
	var now unix.Stat_t
	if err := unix.Stat(path, &now); err != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		res.Reason = "replaced while being checked; kept"
		return res, nil
	}
	if err := shm.Unlink(name); err != nil {
		return res, err
	}
	res.Removed = true
	return res, nil
}

// liveHolder names a live process that holds the ring whose header (up to the tensor table) is
// hdr: its consumer, claiming or attached, or a registered producer (PROTOCOL.md 2.4, 2.6, 3.5);
// "" when there is none. hdr is a copy read from the file, so its words are plain loads.
func liveHolder(hdr []byte) string {
	le := binary.LittleEndian
	cw := le.Uint64(hdr[offConsumerState:])
	cst, cpid := uint32(cw), uint32(cw>>32)
	switch {
	case cst == ConsumerClaiming && cpid != 0 && !pidGone(cpid):
		return fmt.Sprintf("its consumer pid %d (claiming)", cpid)
	case cst == ConsumerAttached && Alive(cpid, le.Uint64(hdr[offConsumerStarttime:])):
		return fmt.Sprintf("its consumer pid %d", cpid)
	}
	for e := 0; e < MaxProducers; e++ {
		off := entryOff(e)
		st, _, pid := entryParts(le.Uint64(hdr[off+regState:]))
		switch {
		case st == EntryClaiming && (pid == 0 || !pidGone(pid)),
			st == EntryActive && Alive(pid, le.Uint64(hdr[off+regStarttime:])):
			return fmt.Sprintf("producer pid %d (registry entry %d)", pid, e)
		}
	}
	return ""
}

// reclaimClaim resets a dead consumer's CLAIMING claim of a live ring to NONE (PROTOCOL.md
// 3.5) so that the next consumer can attach, and says what it did for the verdict.
func reclaimClaim(f *os.File, hdr []byte, dry bool) string {
	if binary.LittleEndian.Uint32(hdr[offConsumerState:]) != ConsumerClaiming {
		return ""
	}
	m, err := unix.Mmap(int(f.Fd()), 0, HeaderBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Sprintf("; its consumer claim could not be checked (%v)", err)
	}
	defer unix.Munmap(m)
	r := &Ring{mem: m}
	st, pid := r.consumerClaim()
	if st != ConsumerClaiming || !r.claimDead(st, pid) {
		return ""
	}
	if dry {
		return fmt.Sprintf("; would reclaim the consumer claim of dead pid %d", pid)
	}
	if r.ReclaimDeadClaim() == 0 {
		return ""
	}
	return fmt.Sprintf("; reclaimed the consumer claim of dead pid %d (the next consumer can attach)", pid)
}

// AttachNamed opens the named segment and attaches a Ring to it, waiting (until ctx ends) for
// a segment whose creator has not yet reserved it or written its header. populate prefaults
// the mapping (pass false for a header-only view such as `shmloader stat`). The caller closes
// the segment after the last use of the ring. Without a deadline on ctx it waits at most
// DefaultAttachTimeout.
func AttachNamed(ctx context.Context, name string, populate bool) (*shm.Segment, *Ring, error) {
	return AttachNamedAllowing(ctx, name, populate, shm.NoOtherUID)
}

// AttachNamedAllowing is [AttachNamed] that also accepts a segment owned by allowUID
// (shm.OpenAllowing). A segment the opening rules refuse (PROTOCOL.md 1.1: a symlink, not a
// regular file, another user's, writable by others, permission denied) is refused at once,
// wrapping the *shm.RefusedError: waiting cannot change it.
func AttachNamedAllowing(ctx context.Context, name string, populate bool, allowUID int) (*shm.Segment, *Ring, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAttachTimeout)
		defer cancel()
	}
	var last error
	for {
		seg, err := shm.OpenAllowing(name, populate, allowUID)
		var refused *shm.RefusedError
		if err == nil {
			mem := seg.Bytes()
			if len(mem) >= HeaderBytes {
				r, err := OpenContext(ctx, mem)
				if err == nil {
					return seg, r, nil
				}
				seg.Close()
				return nil, nil, fmt.Errorf("ring %s (%s): %w", name, shm.Path(name), err)
			}
			seg.Close()
			last = fmt.Errorf("file of %d bytes, smaller than a ring header", len(mem))
		} else if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		} else if errors.As(err, &refused) {
			// Waiting cannot help: say so at once instead of "not initialised in time".
			return nil, nil, fmt.Errorf("ring %s: %w", name, err)
		} else {
			last = err // e.g. empty: created, not yet reserved
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("ring %s (%s): not initialised in time (%v): %w", name, shm.Path(name), last, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
