package feed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// Ring is a ring this process produces into: its mapping, the ring and this process's
// producer entry. The constructors check that a new segment fits, make or join it and
// register the producer, and on any failure undo what they did (unmap, unlink a named ring
// they created, close a memfd they made), so that a caller never cleans up after them.
type Ring struct {
	Seg     *shm.Segment
	R       *ring.Ring
	P       *ring.Producer
	Creator bool   // this process made the ring
	name    string // a named ring's name ("" for a memfd)
	label   string // the ring in messages: its name and path, or its memfd
}

// Layout is the layout the ring carries (a joiner's is the ring's own).
func (r *Ring) Layout() ring.Layout { return r.R.Layout() }

// CreateNamed makes the named ring /dev/shm/gobatch-NAME (shm.Dir) for l, with this process
// as its producer.
func CreateNamed(name string, l ring.Layout, writers int) (*Ring, error) {
	if err := shm.Fits(l.SegmentBytes(), true); err != nil {
		return nil, err
	}
	seg, err := shm.Create(name, l.SegmentBytes())
	if err != nil {
		return nil, err
	}
	r, err := create(seg, l, writers, true)
	if err != nil {
		shm.Unlink(name)
		return nil, err
	}
	r.name = name
	return r, nil
}

// CreateInFD makes the ring for l in fd, an empty memfd another process passed (the trainer's
// gobatch.Loader), with this process as its producer. fd is the caller's on error.
func CreateInFD(fd int, l ring.Layout, writers int) (*Ring, error) {
	if err := shm.Fits(l.SegmentBytes(), false); err != nil {
		return nil, err
	}
	seg, err := shm.FromFD(fd, l.SegmentBytes())
	if err != nil {
		return nil, err
	}
	return create(seg, l, writers, false)
}

// CreateMemfd makes a memfd named name (/proc/PID/fd shows it) and the ring for l in it, with
// this process as its producer: a ring to send to another process (shmloader serve).
func CreateMemfd(name string, l ring.Layout, writers int) (*Ring, error) {
	if err := shm.Fits(l.SegmentBytes(), false); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	seg, err := shm.FromFD(fd, l.SegmentBytes())
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return create(seg, l, writers, false)
}

// create writes the ring into seg, with the job's counter table, and registers the producer;
// it unmaps seg on error.
func create(seg *shm.Segment, l ring.Layout, writers int, named bool) (*Ring, error) {
	l.Counters = counterDefs()
	r, err := ring.Create(seg.Bytes(), l, named)
	if err != nil {
		seg.Close()
		return nil, err
	}
	return register(seg, r, writers, true)
}

// JoinNamed attaches to the existing named ring as one more producer process (allowUID:
// shm.OpenAllowing's), waiting for it to be ready. want is the joiner's own layout: the ring
// decides whether this configuration may join it (a *RequestError when not), and its own
// layout is the one to fill (PROTOCOL.md 3.7.4).
func JoinNamed(name string, allowUID int, want ring.Layout, startGiven bool, writers int) (*Ring, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ring.DefaultAttachTimeout)
	defer cancel()
	seg, r, err := ring.AttachNamedAllowing(ctx, name, true, allowUID)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no ring %q (%s): start its creator first", name, shm.Path(name))
	}
	if err != nil {
		return nil, err
	}
	return join(seg, r, want, startGiven, writers)
}

// JoinFD is JoinNamed for the ring in fd, a memfd another process passed (a restarted child
// of gobatch.Loader).
func JoinFD(fd int, want ring.Layout, startGiven bool, writers int) (*Ring, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ring.DefaultAttachTimeout)
	defer cancel()
	seg, err := shm.FromFD(fd, 0)
	if err != nil {
		return nil, err
	}
	r, err := ring.OpenContext(ctx, seg.Bytes())
	if err != nil {
		seg.Close()
		return nil, err
	}
	return join(seg, r, want, startGiven, writers)
}

func join(seg *shm.Segment, r *ring.Ring, want ring.Layout, startGiven bool, writers int) (*Ring, error) {
	if _, err := r.JoinLayout(want, startGiven, End(want)); err != nil {
		seg.Close()
		return nil, &RequestError{err}
	}
	return register(seg, r, writers, false)
}

// register adds this process's producer entry; it unmaps seg on error (the caller unlinks).
func register(seg *shm.Segment, r *ring.Ring, writers int, creator bool) (*Ring, error) {
	p, err := r.NewProducer(writers)
	if err != nil {
		seg.Close()
		return nil, err
	}
	fr := &Ring{Seg: seg, R: r, P: p, Creator: creator, label: fmt.Sprintf("memfd %d", seg.Fd())}
	if seg.Name() != "" {
		fr.label = fmt.Sprintf("%s (%s)", seg.Name(), shm.Path(seg.Name()))
	}
	return fr, nil
}

// Unlink removes a named ring this process created (its name goes; mappings stay); nothing
// otherwise.
func (r *Ring) Unlink() error {
	if !r.Creator || r.name == "" {
		return nil
	}
	return shm.Unlink(r.name)
}

// Close unmaps the ring. Call it only once nothing writes into it (Feed.Stop returned true).
func (r *Ring) Close() error { return r.Seg.Close() }
