package ring

import (
	"testing"

	"golang.org/x/sys/unix"
)

// monoNs must read CLOCK_MONOTONIC, the clock the C consumer compares publish_ns with: each
// reading lies between two clock_gettime system calls made around it.
func TestMonoNsIsClockMonotonic(t *testing.T) {
	const slack = 20_000 // ns: the calibration's error bound is far below this
	for range 1000 {
		var a, b unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		m := monoNs()
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if lo, hi := uint64(a.Nano()), uint64(b.Nano()); m+slack < lo || m > hi+slack {
			t.Fatalf("monoNs %d outside [%d, %d] (CLOCK_MONOTONIC before and after) by more than %d ns", m, lo, hi, slack)
		}
	}
}
