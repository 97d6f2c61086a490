package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/gobatch/gobatch/shm"
)

// A ring's file cut short under a live producer (a named ring truncated by a process of its
// user; a memfd is sealed against it) would kill the producer with SIGBUS at its first write
// past the new end. The producer instead stops with an error that names the ring and both
// sizes: the watchdog loop checks the file's size every wait slice, and each reader goroutine
// turns a memory fault in its slot writes into that error (debug.SetPanicOnFault).

// ringCutError says that the ring's file is shorter than the ring.
type ringCutError struct {
	ring       string // the ring's name and path, or the memfd
	have, want int64
}

func (e *ringCutError) Error() string {
	return fmt.Sprintf("ring %s was truncated to %d bytes while this producer wrote to it, but the ring is %d bytes "+
		"(segment_bytes): another process cut its file, so the stream cannot go on", e.ring, e.have, e.want)
}

// ringLabel names the ring in messages: its name and path, or its memfd.
func (pr *producerRun) ringLabel() string {
	if pr.flags.ring != "" {
		return fmt.Sprintf("%s (%s)", pr.flags.ring, shm.Path(pr.flags.ring))
	}
	return fmt.Sprintf("memfd %d", pr.flags.memfd)
}

// cutCheck returns a *ringCutError when the ring's file is now shorter than the ring.
func (pr *producerRun) cutCheck() error {
	have, err := pr.seg.FileSize()
	if err != nil {
		return fmt.Errorf("ring %s: %w", pr.ringLabel(), err)
	}
	if want := pr.r.SegmentBytes(); have < want {
		return &ringCutError{ring: pr.ringLabel(), have: have, want: want}
	}
	return nil
}

// guardFaults is deferred by a goroutine that writes into the mapping, after
// debug.SetPanicOnFault(true): it turns a memory fault into *err, a *ringCutError when the file
// was cut (or the fault itself otherwise), and re-panics anything else.
func (pr *producerRun) guardFaults(err *error) {
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
	if cut := pr.cutCheck(); cut != nil {
		*err = cut
		return
	}
	*err = fmt.Errorf("ring %s: memory fault writing a slot at address %#x, though its file is whole: %v", pr.ringLabel(), fault.Addr(), fault)
}

// withFaultGuard runs f, which writes into the mapping, with memory faults turned into errors.
func (pr *producerRun) withFaultGuard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer pr.guardFaults(&err)
	return f()
}
