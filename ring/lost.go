package ring

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A named ring's file can be cut short (ftruncate) by a process of its user while this
// process has it mapped (PROTOCOL.md 1.1). A touch of a page past the file's new end is
// SIGBUS, which ends a Go process unless the goroutine asked for a panic instead
// (debug.SetPanicOnFault). A producer's reader goroutines guard their slot writes themselves;
// the methods it runs on its other goroutines (Watch, Stats, Counters, UpdateCounter,
// Fail) recover such a fault here. The first one maps zero-filled private memory over the
// whole mapping, so that no later touch faults, in any goroutine, and the ring is lost: Watch
// returns a *LostError, which stops the producer with a clear error instead of SIGBUS.

// ErrSegmentLost is wrapped by the error of a ring whose file was cut short under its mapping.
var ErrSegmentLost = errors.New("ring segment lost")

// LostError says that a memory fault touched the ring past its file's end.
type LostError struct {
	Addr         uintptr // the faulting address
	SegmentBytes int64
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%v: a memory fault at %#x touched a page past the end of its file: the file was cut short "+
		"(truncated by another process of its user) under this process's mapping of the %d-byte ring, so the stream cannot go on",
		ErrSegmentLost, e.Addr, e.SegmentBytes)
}

func (e *LostError) Unwrap() error { return ErrSegmentLost }

// recoverFault is deferred, with the result of debug.SetPanicOnFault(true), by a method that
// touches the mapping: it restores the goroutine's setting, and turns a memory fault inside
// the mapping into the ring's loss (*err, when err is not nil), re-panicking anything else.
func (r *Ring) recoverFault(old bool, err *error) {
	debug.SetPanicOnFault(old)
	v := recover()
	if v == nil {
		return
	}
	fault, ok := v.(interface {
		runtime.Error
		Addr() uintptr
	})
	if !ok || !r.contains(fault.Addr()) {
		panic(v)
	}
	lost := r.lose(fault.Addr())
	if err != nil {
		*err = lost
	}
}

// contains reports whether addr lies in the ring's mapping.
func (r *Ring) contains(addr uintptr) bool {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
	return addr >= base && addr < base+uintptr(len(r.mem))
}

// lose maps zero-filled private memory over the ring's mapping (once) and returns the loss's
// error. Writes that land after it go nowhere; reads see zeros.
func (r *Ring) lose(addr uintptr) *LostError {
	if r.lost.CompareAndSwap(nil, &LostError{Addr: addr, SegmentBytes: r.SegmentBytes()}) {
		_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(r.mem)), uintptr(len(r.mem)),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
		if err != nil {
			panic(fmt.Sprintf("ring: cannot map memory over a lost segment: %v", err))
		}
	}
	return r.lost.Load()
}

// Lost returns the *LostError of a ring whose segment was cut short under its mapping, or nil.
func (r *Ring) Lost() error {
	if e := r.lost.Load(); e != nil {
		return e
	}
	return nil
}
