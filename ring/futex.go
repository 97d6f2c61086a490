package ring

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Shared (not FUTEX_PRIVATE) operations: the words live in a file mapping shared between
// processes (PROTOCOL.md 3.4).
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// waitSlice bounds every sleep so that liveness is checked at least this often.
const waitSlice = 100 * time.Millisecond

// WaitSlice is the protocol's longest sleep of a wait and its watchdog period (PROTOCOL.md
// 3.4, 3.5), for callers that check something of their own that often.
const WaitSlice = waitSlice

// takeoverGrace is how long a consumer waits for live producers to take a dead one's claims
// over before it reports the death (PROTOCOL.md 3.5 step 2).
const takeoverGrace = 10 * waitSlice

// futexWait sleeps while *addr == val, at most d. Spurious returns are fine: callers re-check.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every waiter on addr.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, math.MaxInt32, 0, 0, 0)
}

// waitRound waits at most d for *w == want with the waiters protocol of PROTOCOL.md 3.4,
// after spinning up to spin loads. It reports whether it saw want. A false result means a
// timeout, a wake-up for another reason (an error, a close) or a signal: run the checks.
func waitRound(w, waiters *uint32, want uint32, d time.Duration, spin int) bool {
	for i := 0; i < spin; i++ {
		if atomic.LoadUint32(w) == want {
			return true
		}
	}
	v := atomic.LoadUint32(w)
	if v == want {
		return true
	}
	atomic.AddUint32(waiters, 1)
	v = atomic.LoadUint32(w)
	if v != want {
		futexWait(w, v, d)
	}
	atomic.AddUint32(waiters, ^uint32(0))
	return atomic.LoadUint32(w) == want
}

// wake wakes the waiters of w if there are any (the waker half of 3.4).
func wake(w, waiters *uint32) {
	if atomic.LoadUint32(waiters) != 0 {
		futexWake(w)
	}
}

// monoBase is CLOCK_MONOTONIC read by a clock_gettime system call at start-up and monoStart
// the Go runtime's monotonic reading at the same instant: monoNs adds the time elapsed since,
// which Go reads from the same clock through the vDSO, so a batch costs no system call.
var monoBase, monoStart = calibrateMonotonic()

// calibrateMonotonic pairs a clock_gettime(CLOCK_MONOTONIC) with the midpoint of the two
// runtime readings around it, keeping the tightest of a few tries (a preemption between the
// readings would otherwise offset every publish_ns).
func calibrateMonotonic() (uint64, time.Time) {
	var base uint64
	var start time.Time
	best := time.Duration(math.MaxInt64)
	for range 8 {
		t0 := time.Now()
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		if d := time.Since(t0); d < best {
			best, base, start = d, uint64(ts.Nano()), t0.Add(d/2)
		}
	}
	return base, start
}

// monoNs returns CLOCK_MONOTONIC in nanoseconds (the clock of the slot's publish_ns).
func monoNs() uint64 { return monoBase + uint64(time.Since(monoStart)) }

// MonotonicNs returns CLOCK_MONOTONIC in nanoseconds, the clock of ReadSlot.PublishNs.
func MonotonicNs() uint64 { return monoNs() }
