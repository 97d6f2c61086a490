package chunks

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// driveWindow runs n reads through w from workers goroutines against a simulated store: serve
// does one read (blocking as the store would) and says whether it failed. It returns the reads
// per second.
func driveWindow(w *ReadWindow, workers, n int, serve func() bool) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				ahead := w.Acquire()
				t := time.Now()
				failed := serve()
				w.Release(ahead, time.Since(t), failed, true)
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// A store that serves k reads at a time (a server sharing the cores): the window settles a
// few reads above k, at the store's full rate, instead of queueing the bound's worth.
func TestReadWindowFindsABusyStoresDepth(t *testing.T) {
	const k, service = 4, 2 * time.Millisecond
	slots := make(chan struct{}, k)
	w := NewReadWindow(64)
	rate := driveWindow(w, 64, 4000, func() bool {
		slots <- struct{}{}
		time.Sleep(service)
		<-slots
		return false
	})
	full := float64(k) / service.Seconds()
	t.Logf("window %d (peak %d), %.0f reads/s of the store's %.0f", w.size(), w.peak, rate, full)
	// Bounds loose enough for a loaded machine (sleeps overshoot), far from the start (32)
	// and the bound (64).
	if w.size() < k/2 || w.size() > k+2*windowBeta+4 {
		t.Errorf("window %d for a store that serves %d at a time: expected between %d and %d", w.size(), k, k/2, k+2*windowBeta+4)
	}
	if rate < 0.5*full {
		t.Errorf("%.0f reads/s, below half the store's %.0f", rate, full)
	}
}

// A store far away (every read waits 20 ms, none queues): the window grows to the bound.
func TestReadWindowGrowsForLatency(t *testing.T) {
	w := NewReadWindow(64)
	rate := driveWindow(w, 64, 3000, func() bool {
		time.Sleep(20 * time.Millisecond)
		return false
	})
	t.Logf("window %d (peak %d), %.0f reads/s", w.size(), w.peak, rate)
	if w.peak < 48 {
		t.Errorf("window peaked at %d for 20 ms reads that never queue: expected it to grow well above its start (32) toward the bound 64", w.peak)
	}
}

// Failed reads (503s) halve the window, once per window of completions; it recovers after.
func TestReadWindowShrinksOnFailures(t *testing.T) {
	w := NewReadWindow(32)
	var calls atomic.Int64
	driveWindow(w, 32, 400, func() bool {
		time.Sleep(time.Millisecond)
		return calls.Add(1)%4 == 0 // a quarter of the reads fail
	})
	if w.size() > 4 {
		t.Errorf("window %d after a quarter of the reads failed: expected it to have shrunk to a few", w.size())
	}
	small := w.size()
	driveWindow(w, 32, 2000, func() bool { time.Sleep(2 * time.Millisecond); return false })
	if w.size() <= small {
		t.Errorf("window %d after the failures stopped: expected it to grow back from %d", w.size(), small)
	}
	t.Logf("window %d after failures, %d after recovery", small, w.size())
}

// The first windowEpoch completions (the first batches' reads) do not shrink the window
// however their latency rises; later ones do. Latencies are given, not slept.
func TestReadWindowHoldsForTheFirstBatches(t *testing.T) {
	w := NewReadWindow(64)
	read := func(took time.Duration) {
		w.Release(w.Acquire(), took, false, true)
	}
	read(time.Millisecond) // the smallest latency: a read that did not queue
	for w.n < windowEpoch {
		read(10 * time.Millisecond) // ten times it: about 29 of the 32 reads "queued"
	}
	if w.size() != windowStart {
		t.Fatalf("window %d after %d slow reads at start-up: want it held at %d", w.size(), w.n, windowStart)
	}
	for range windowStart {
		read(10 * time.Millisecond)
	}
	if w.size() >= windowStart {
		t.Fatalf("window %d after %d slow reads: want it shrunk below %d once start-up is over", w.size(), w.n, windowStart)
	}
}

// simStore is a simulated store that serves k reads at a time, first come first served, each
// taking service(now), on a simulated clock that w reads; run sends reads whenever the window
// has room, as the prefetchers do.
type simStore struct {
	w       *ReadWindow
	k       int
	service func(now time.Duration) time.Duration
	clock   time.Duration
	waiting []simRead // sent, waiting for a server
	busy    doneHeap  // in service
}

func newSimStore(w *ReadWindow, k int, service func(now time.Duration) time.Duration) *simStore {
	s := &simStore{w: w, k: k, service: service}
	w.now = func() time.Time { return time.Unix(0, 0).Add(s.clock) }
	return s
}

// run goes on until the clock reaches until; it returns the reads per simulated second.
func (s *simStore) run(until time.Duration) float64 {
	from, completed := s.clock, 0
	for s.clock < until {
		for s.w.inflight < s.w.limit() {
			s.waiting = append(s.waiting, simRead{ahead: s.w.Acquire(), sent: s.clock})
		}
		for s.busy.Len() < s.k && len(s.waiting) > 0 {
			r := s.waiting[0]
			s.waiting = s.waiting[1:]
			r.done = s.clock + s.service(s.clock)
			heap.Push(&s.busy, r)
		}
		r := heap.Pop(&s.busy).(simRead)
		s.clock = r.done
		s.w.Release(r.ahead, r.done-r.sent, false, true)
		completed++
	}
	return float64(completed) / (s.clock - from).Seconds()
}

type simRead struct {
	ahead      int
	sent, done time.Duration
}

// doneHeap orders reads in service by when they complete.
type doneHeap []simRead

func (h doneHeap) Len() int           { return len(h) }
func (h doneHeap) Less(i, j int) bool { return h[i].done < h[j].done }
func (h doneHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *doneHeap) Push(x any)        { *h = append(*h, x.(simRead)) }
func (h *doneHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Minutes against a store that serves 4 at a time (simulated, so no load can bend it): the
// window stays where Vegas puts it (windowAlpha to windowBeta reads queued above the 4), probe
// after probe. Taking the base latency from the last few hundred reads instead let it ratchet:
// with reads always queued, each new "smallest" latency was a queued one.
func TestReadWindowHoldsABusyStoresDepthForMinutes(t *testing.T) {
	const k, service = 4, 2 * time.Millisecond
	w := NewReadWindow(64)
	store := newSimStore(w, k, func(time.Duration) time.Duration { return service })
	low, high := 64, 0
	for minute := range 3 {
		rate := store.run(time.Duration(minute+1) * time.Minute)
		if minute > 0 {
			low, high = min(low, w.size()), max(high, w.size())
		}
		if full := float64(k) / service.Seconds(); rate < 0.95*full {
			t.Errorf("minute %d: %.0f reads/s, below the store's %.0f", minute, rate, full)
		}
	}
	t.Logf("window %d to %d after the first minute, %d probes", low, high, w.probes)
	if low < k+windowAlpha-1 || high > k+windowBeta+1 {
		t.Errorf("window %d to %d for a store that serves %d at a time: expected %d to %d", low, high, k, k+windowAlpha-1, k+windowBeta+1)
	}
	if w.probes < 10 {
		t.Errorf("%d probes in 3 minutes of standing queue: expected one every %v", w.probes, probeEvery)
	}
}

// A store whose latency rises tenfold for good (never queueing: 64 servers): the window first
// reads the rise as queueing and shrinks, then the probe measures the new base and it grows
// back to the bound.
func TestReadWindowMeasuresARisenLatency(t *testing.T) {
	const rise = 20 * time.Second
	w := NewReadWindow(64)
	latency := func(now time.Duration) time.Duration {
		if now < rise {
			return 2 * time.Millisecond
		}
		return 20 * time.Millisecond
	}
	store := newSimStore(w, 64, latency)
	store.run(rise)
	before := w.size()
	store.run(rise + 2*time.Second)
	shrunk := w.size()
	store.run(rise + 2*probeEvery + time.Minute)
	t.Logf("window %d before the rise, %d just after, %d a minute later (%d probes)", before, shrunk, w.size(), w.probes)
	if before < 60 || shrunk > 16 {
		t.Errorf("window %d before the rise, %d 2 s after: expected the bound before and a small window just after", before, shrunk)
	}
	if w.size() < 60 {
		t.Errorf("window %d a minute after the latency rose for good: expected it back near the bound 64", w.size())
	}
}
