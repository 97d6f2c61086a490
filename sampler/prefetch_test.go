package sampler

import (
	"slices"
	"sync"
	"testing"
)

// The decode queue hands out the lowest batch's chunks first, whoever asks, and stops a
// prefetch's goroutines once their own batch has nothing left to start.
func TestDecodeQueueLowestBatchFirst(t *testing.T) {
	var q decodeQueue
	w2 := &decodeWork{g: 2, keys: []uint64{20, 21}}
	w1 := &decodeWork{g: 1, keys: []uint64{10, 11}}
	w0 := &decodeWork{g: 0, keys: []uint64{1, 2, 3}}
	q.add(w2)
	q.add(w0)
	q.add(w1)
	var got []uint64
	for {
		k, ok := q.take(w2) // batch 2's goroutine decodes batches 0 and 1 first
		if !ok {
			break
		}
		got = append(got, k)
	}
	if want := []uint64{1, 2, 3, 10, 11, 20, 21}; !slices.Equal(got, want) {
		t.Fatalf("batch 2's goroutine took %v, want %v", got, want)
	}

	q = decodeQueue{}
	w0 = &decodeWork{g: 0, keys: []uint64{1}}
	w1 = &decodeWork{g: 1, keys: []uint64{10}}
	q.add(w0)
	q.add(w1)
	if k, ok := q.take(w0); !ok || k != 1 {
		t.Fatalf("take(batch 0) = %d, %v; want 1, true", k, ok)
	}
	if k, ok := q.take(w0); ok {
		t.Fatalf("batch 0 has nothing left, but its goroutine took %d (batch 1's)", k)
	}
	q.remove(w0)
	if len(q.work) != 1 || q.work[0] != w1 {
		t.Fatalf("after remove: %d prefetches queued, want batch 1 only", len(q.work))
	}
}

// Concurrent takes start every key exactly once.
func TestDecodeQueueConcurrent(t *testing.T) {
	var q decodeQueue
	works := make([]*decodeWork, 4)
	for i := range works {
		keys := make([]uint64, 100)
		for k := range keys {
			keys[k] = uint64(i*1000 + k)
		}
		works[i] = &decodeWork{g: uint64(i), keys: keys}
		q.add(works[i])
	}
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for _, w := range works {
		for range 3 {
			wg.Go(func() {
				for {
					k, ok := q.take(w)
					if !ok {
						return
					}
					mu.Lock()
					seen[k]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(seen) != 400 {
		t.Fatalf("%d distinct keys started, want 400", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("key %d started %d times", k, n)
		}
	}
}
