package ring

import (
	"errors"
	"fmt"
)

// Errors a producer's Claim (or its watchdog) returns when it must stop.
var (
	// ErrConsumerGone: the attached consumer process died (shmloader exits with status 3).
	ErrConsumerGone = errors.New("gobatch ring: the consumer died")
	// ErrConsumerClosed: the consumer detached (shmloader exits with status 0).
	ErrConsumerClosed = errors.New("gobatch ring: the consumer closed the ring")
	// ErrParentDied: the process that started this producer (--memfd) is gone.
	ErrParentDied = errors.New("gobatch ring: the parent process died")
	// ErrClosed: the Go consumer was used after Close.
	ErrClosed = errors.New("gobatch ring: consumer is closed")
	// ErrSlotsHeld: Next was called while the consumer holds every slot, so the next batch
	// has none (PROTOCOL.md 3.3 step 5).
	ErrSlotsHeld = errors.New("gobatch ring: every slot is held")
)

// HeaderError refuses a segment whose header or tensor table is not a valid ring
// (PROTOCOL.md 3.6). Field names the protocol field at fault.
type HeaderError struct {
	Field  string
	Detail string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("gobatch ring: %s: %s", e.Field, e.Detail)
}

func headerErr(field, format string, args ...any) error {
	return &HeaderError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// ProducerDiedError: a registered producer process died while the consumer waited.
// NotTakenOver says that live producers were left and none took its claims over within
// the takeover grace (PROTOCOL.md 3.5 step 2); otherwise no live producer was left.
type ProducerDiedError struct {
	PID          uint32
	Entry        int // registry index
	Batch        uint64
	NotTakenOver bool
}

func (e *ProducerDiedError) Error() string {
	if e.NotTakenOver {
		return fmt.Sprintf("gobatch ring: producer pid %d died (registry entry %d) before batch %d and no live producer took over its batches within %d ms",
			e.PID, e.Entry, e.Batch, takeoverGrace.Milliseconds())
	}
	return fmt.Sprintf("gobatch ring: producer pid %d died (registry entry %d) before batch %d", e.PID, e.Entry, e.Batch)
}

// ProducerError carries a producer's error record (PROTOCOL.md 2.5).
type ProducerError struct {
	Producer int // registry index + 1 of the failing producer, 0 = unknown
	Text     string
}

func (e *ProducerError) Error() string {
	return fmt.Sprintf("gobatch ring: producer %d failed: %s", e.Producer, e.Text)
}

// TruncatedError: every producer finished (DONE or FAILED) before the awaited batch.
type TruncatedError struct {
	Batch uint64 // absolute index of the batch that never came
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("gobatch ring: all producers finished before batch %d", e.Batch)
}

// ProtocolError: a peer broke the slot protocol (a state or seq that cannot happen).
type ProtocolError struct {
	Slot   int
	Detail string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("gobatch ring: protocol violation on slot %d: %s", e.Slot, e.Detail)
}
