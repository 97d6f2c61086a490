package chunks

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
//
// The store's latency may rise for good (a busier server, another path), so the smallest
// latency is measured again when no read has come within an eighth of it for probeEvery: as
// BBR's ProbeRTT does, the window is held at probeWin until probeSamples reads sent with fewer
// than probeWin ahead have completed, and the smallest of those is the new base. Taking instead the
// smallest latency of the last few hundred reads (as this did before) ratchets: in the steady
// state Vegas keeps a few reads queued at the store, so every read waits, the "smallest" is a
// queued one, and the window grows by that queue each time (a store serving 4 at a time was
// left 23 reads in flight). A probe costs about two round trips every probeEvery.

const (
	windowAlpha  = 3                // reads queued at the store below which the window grows
	windowBeta   = 6                // above which it shrinks
	windowStart  = 32               // the first window (at most the bound)
	windowEpoch  = 256              // completions during which latency does not shrink the window
	windowFail   = 0.5              // the decrease on a failed read, and the most on queueing
	probeEvery   = 10 * time.Second // how long the smallest latency stands unmatched before a probe
	probeWin     = 4                // reads in flight while probing
	probeSamples = 8                // probe reads whose smallest latency is the new base
)

// ReadWindow is a source's adaptive bound on reads in flight.
type ReadWindow struct {
	mu       sync.Mutex
	cond     sync.Cond
	now      func() time.Time // time.Now; tests give a simulated clock
	bound    int
	win      float64 // the window: reads allowed in flight
	inflight int
	hold     int           // completions before the next decrease
	minRTT   time.Duration // the smallest latency: a read that did not queue
	minAt    time.Time     // when a read last came within an eighth of minRTT
	probing  bool          // the window is held at probeWin to measure minRTT again
	probeMin time.Duration // the smallest latency of the probe's reads so far
	probeN   int           // the probe's reads so far
	srtt     time.Duration // smoothed latency
	n        int
	peak     int // the largest window reached (Stats, tests)
	probes   int // probes done (tests)
}

// NewReadWindow is a window of at most bound reads in flight.
func NewReadWindow(bound int) *ReadWindow {
	w := &ReadWindow{bound: max(bound, 1), now: time.Now}
	w.win = float64(min(w.bound, windowStart))
	w.peak = int(w.win)
	w.cond.L = &w.mu
	return w
}

// limit is the number of reads allowed in flight now.
// Bound is the most reads the window allows in flight (fetch_depth).
func (w *ReadWindow) Bound() int { return w.bound }

func (w *ReadWindow) limit() int {
	if w.probing {
		return min(int(w.win), probeWin)
	}
	return int(w.win)
}

// Acquire waits for a place in the window; it returns the reads in flight before this one,
// which release needs back.
func (w *ReadWindow) Acquire() int {
	w.mu.Lock()
	for w.inflight >= w.limit() {
		w.cond.Wait()
	}
	ahead := w.inflight
	w.inflight++
	w.mu.Unlock()
	return ahead
}

// Release ends a read that took took and was sent with ahead others in flight; failed when it
// failed, sample when its latency is a fair sample (a stored chunk's read: one that is not
// found returns sooner).
func (w *ReadWindow) Release(ahead int, took time.Duration, failed, sample bool) {
	w.mu.Lock()
	w.inflight--
	if w.hold > 0 {
		w.hold--
	}
	was := w.limit()
	switch {
	case failed:
		w.shrink(windowFail)
	case sample:
		w.observe(ahead, took)
	}
	grew := w.limit() > was
	w.mu.Unlock()
	// One place freed: wake one waiter (waking all of dozens of prefetch goroutines per read
	// costs more CPU than the reads); a window that grew (or a probe's end) may let several go.
	if grew {
		w.cond.Broadcast()
	} else {
		w.cond.Signal()
	}
}

// observe adapts the window to one read's latency.
func (w *ReadWindow) observe(ahead int, took time.Duration) {
	took = max(took, time.Microsecond)
	now := w.now()
	switch {
	case w.minRTT == 0 || took < w.minRTT:
		w.minRTT, w.minAt = took, now
	case took <= w.minRTT+w.minRTT/8: // within noise of it: the base still holds
		w.minAt = now
	}
	w.n++
	if w.srtt == 0 {
		w.srtt = took
	} else {
		w.srtt += (took - w.srtt) / 8
	}
	if w.probing {
		w.probe(ahead, took, now)
		return
	}
	if w.n > windowEpoch && now.Sub(w.minAt) > probeEvery {
		w.probing, w.probeMin, w.probeN = true, 0, 0
		return
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

// probe counts one read toward the new base: only reads sent with fewer than probeWin ahead
// (the reads in flight when the probe began still come back queued).
func (w *ReadWindow) probe(ahead int, took time.Duration, now time.Time) {
	if ahead >= probeWin {
		return
	}
	if w.probeN == 0 || took < w.probeMin {
		w.probeMin = took
	}
	if w.probeN++; w.probeN < probeSamples {
		return
	}
	w.minRTT, w.minAt = w.probeMin, now
	w.probing = false
	w.probes++
}

// shrink multiplies the window by f, unless it shrank within the last window of completions.
func (w *ReadWindow) shrink(f float64) {
	if w.hold > 0 {
		return
	}
	w.win = max(1, w.win*f)
	w.hold = int(w.win)
}

// size is the window now.
func (w *ReadWindow) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.win)
}
