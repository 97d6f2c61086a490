package sampler

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// driveWindow runs n reads through w from workers goroutines against a simulated store: serve
// does one read (blocking as the store would) and says whether it failed. It returns the reads
// per second.
func driveWindow(w *readWindow, workers, n int, serve func() bool) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				w.acquire()
				t := time.Now()
				failed := serve()
				w.release(time.Since(t), failed, true)
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
	w := newReadWindow(64)
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
	w := newReadWindow(64)
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
	w := newReadWindow(32)
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
	w := newReadWindow(64)
	read := func(took time.Duration) {
		w.acquire()
		w.release(took, false, true)
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
