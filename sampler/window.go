package sampler

import (
	"sync"
	"time"
)

// Reads in flight to object storage, adapted. The right number depends on the store and the
// path to it: a server on loopback sharing the cores wants few (more only queue behind its
// CPU), one 30 ms away wants dozens (each read mostly waits). So a remote source's reads go
// through a window that adapts as TCP Vegas does with packets: the smallest latency seen is
// a read that did not queue; the smoothed latency above it, times the window, estimates the
// reads queued at the store. Fewer than windowAlpha queued: the window grows by one read per
// window of completions (additive increase); more than windowBeta: it shrinks to the window
// that would leave about (windowAlpha + windowBeta) / 2 queued, at most by half; a failed
// read halves it (multiplicative decrease); at most one decrease per window of completions. It
// stays between 1 and fetch_depth (the upper bound), and starts at windowStart so that the
// first batch's reads go out together. Latency does not shrink it before windowEpoch
// completions: those are the first batches' reads, all needed at once, and while their chunks
// are decoded the latency rises with the CPU the decoding takes, not with reads queued at the
// store (shrinking there left a source 4-6 reads in flight, 30 ms away, for the rest of the
// first batch; see benchmarks/README.md).

const (
	windowAlpha = 3   // reads queued at the store below which the window grows
	windowBeta  = 6   // above which it shrinks
	windowStart = 32  // the first window (at most the bound)
	windowEpoch = 256 // completions after which the smallest latency is measured anew
	windowFail  = 0.5 // the decrease on a failed read, and the most on queueing
)

// readWindow is a source's adaptive bound on reads in flight.
type readWindow struct {
	mu       sync.Mutex
	cond     sync.Cond
	bound    int
	win      float64 // the window: reads allowed in flight
	inflight int
	hold     int           // completions before the next decrease
	minRTT   time.Duration // the smallest latency of the previous windowEpoch completions (or so far)
	epochMin time.Duration // the smallest of the current ones
	srtt     time.Duration // smoothed latency
	n        int
	peak     int // the largest window reached (Stats, tests)
}

func newReadWindow(bound int) *readWindow {
	w := &readWindow{bound: max(bound, 1)}
	w.win = float64(min(w.bound, windowStart))
	w.peak = int(w.win)
	w.cond.L = &w.mu
	return w
}

// acquire waits for a place in the window.
func (w *readWindow) acquire() {
	w.mu.Lock()
	for w.inflight >= int(w.win) {
		w.cond.Wait()
	}
	w.inflight++
	w.mu.Unlock()
}

// release ends a read that took took; failed when it failed, sample when its latency is
// a fair sample (a stored chunk's read: one that is not found returns sooner).
func (w *readWindow) release(took time.Duration, failed, sample bool) {
	w.mu.Lock()
	w.inflight--
	if w.hold > 0 {
		w.hold--
	}
	was := int(w.win)
	switch {
	case failed:
		w.shrink(windowFail)
	case sample:
		w.observe(took)
	}
	grew := int(w.win) > was
	w.mu.Unlock()
	// One place freed: wake one waiter (waking all of dozens of prefetch goroutines per read
	// costs more CPU than the reads); a window that grew may let several go.
	if grew {
		w.cond.Broadcast()
	} else {
		w.cond.Signal()
	}
}

// observe adapts the window to one read's latency.
func (w *readWindow) observe(took time.Duration) {
	took = max(took, time.Microsecond)
	if w.epochMin == 0 || took < w.epochMin {
		w.epochMin = took
	}
	if w.minRTT == 0 || took < w.minRTT {
		w.minRTT = took
	}
	if w.n++; w.n%windowEpoch == 0 { // the store's latency may rise for good: forget the old minimum
		w.minRTT, w.epochMin = w.epochMin, 0
	}
	if w.srtt == 0 {
		w.srtt = took
	} else {
		w.srtt += (took - w.srtt) / 8
	}
	queued := w.win * (1 - float64(w.minRTT)/float64(max(w.srtt, w.minRTT)))
	switch {
	case queued < windowAlpha:
		w.win = min(w.win+1/w.win, float64(w.bound))
		w.peak = max(w.peak, int(w.win))
	case queued > windowBeta && w.n > windowEpoch:
		// Down to the window that would leave between alpha and beta queued, but by half at
		// most: the smoothed latency lags.
		w.shrink(max(windowFail, 1-(queued-(windowAlpha+windowBeta)/2)/w.win))
	}
}

// shrink multiplies the window by f, unless it shrank within the last window of completions.
func (w *readWindow) shrink(f float64) {
	if w.hold > 0 {
		return
	}
	w.win = max(1, w.win*f)
	w.hold = int(w.win)
}

// size is the window now.
func (w *readWindow) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.win)
}
