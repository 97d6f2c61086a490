package rowconv

import "golang.org/x/sys/unix"

// threadCPU is the calling thread's CPU time in ns: benchmarks report it beside the
// wall time, which on a shared machine counts the time other processes ran.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
