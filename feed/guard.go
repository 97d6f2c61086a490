package feed

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// A ring's file cut short under a live producer (a named ring truncated by a process of its
// user; a memfd is sealed against it) would kill the producer with SIGBUS at its first write
// past the new end. The producer instead stops with an error that names the ring and both
// sizes: its owner checks the file's size every wait slice (CutCheck), and every goroutine
// that writes into the mapping turns a memory fault into that error (Guard).

// CutError says that the ring's file is shorter than the ring.
type CutError struct {
	Ring       string // the ring's name and path, or its memfd
	Have, Want int64
}

func (e *CutError) Error() string {
	return fmt.Sprintf("ring %s was truncated to %d bytes while this producer wrote to it, but the ring is %d bytes "+
		"(segment_bytes): another process cut its file, so the stream cannot go on", e.Ring, e.Have, e.Want)
}

// CutCheck returns a *CutError when the ring's file is now shorter than the ring.
func (r *Ring) CutCheck() error {
	have, err := r.Seg.FileSize()
	if err != nil {
		return fmt.Errorf("ring %s: %w", r.label, err)
	}
	if want := r.R.SegmentBytes(); have < want {
		return &CutError{Ring: r.label, Have: have, Want: want}
	}
	return nil
}

// Guard runs f, which writes into the mapping, with memory faults turned into errors: a
// *CutError when the file was cut, the fault itself otherwise. Other panics go on.
func (r *Ring) Guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer r.recoverFault(&err)
	return f()
}

func (r *Ring) recoverFault(err *error) {
	v := recover()
	if v == nil {
		return
	}
	fault, ok := v.(interface {
		runtime.Error
		Addr() uintptr
	})
	if !ok {
		panic(v)
	}
	if cut := r.CutCheck(); cut != nil {
		*err = cut
		return
	}
	*err = fmt.Errorf("ring %s: memory fault writing a slot at address %#x, though its file is whole: %v", r.label, fault.Addr(), fault)
}
