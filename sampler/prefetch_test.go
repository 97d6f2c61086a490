package sampler

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
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

// Prefetch(0) running while two readers fill batches 0 and 1 (shmloader's start-up) decodes
// every chunk once and changes no byte of the batches.
func TestPrefetchDuringFills(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("prefetch decodes in parallel only with GOMAXPROCS >= 2")
	}
	ref, _ := newMemJob(t, smallMem, "", Options{})
	want := fillRange(t, ref, 0, 2, 1)
	wantMisses := ref.Cache().Stats().Misses

	j, _ := newMemJob(t, smallMem, "", Options{})
	j.Prefetch(0)
	if m := j.Cache().Stats().Misses; m == 0 {
		t.Fatal("Prefetch(0) decoded nothing")
	}
	j2, _ := newMemJob(t, smallMem, "", Options{})
	var wg sync.WaitGroup
	wg.Go(func() { j2.Prefetch(0) })
	got := make([][][]byte, 2)
	for b := range 2 {
		wg.Go(func() {
			got[b] = batchBuf(j2)
			if err := j2.Fill(ctx, uint64(b), got[b]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for b := range 2 {
		if !bytes.Equal(bytes.Join(got[b], nil), want[b]) {
			t.Fatalf("batch %d differs with a concurrent Prefetch", b)
		}
	}
	if m := j2.Cache().Stats().Misses; m != wantMisses {
		t.Fatalf("%d chunks decoded with a concurrent Prefetch, %d without", m, wantMisses)
	}
}

// TestPrefetchReadsAhead: while a prefetch decodes, it asks the store to read the next chunks
// ahead (once each, only chunks it then decodes), never more than readAheadChunks beyond
// the chunks its decoders have started, and it asks nothing more once it has returned.
func TestPrefetchReadsAhead(t *testing.T) {
	cfg, err := parseCfg(t, fmt.Sprintf(memConfig, ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.Size = 32 // enough chunks for several windows of read-ahead
	ds := newMemNowcast(smallMem)
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sat := ds["satellite.zarr"].arrays["data"]
	var mu sync.Mutex
	entered := 0                 // satellite decodes begun
	asked := map[string]int{}    // read-ahead requests per chunk
	aheadOfDecode := 0           // chunks asked for before their decode began
	decoded := map[string]bool{} // chunks decoded
	maxLead := 0                 // most requests beyond the decodes begun
	sat.onReadAhead = func(idx []int) {
		mu.Lock()
		defer mu.Unlock()
		asked[fmt.Sprint(idx)]++
		maxLead = max(maxLead, len(asked)-entered)
	}
	sat.onDecode = func(idx []int) {
		mu.Lock()
		entered++
		k := fmt.Sprint(idx)
		decoded[k] = true
		if asked[k] > 0 {
			aheadOfDecode++
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // a decode that takes time: the read-ahead runs ahead of it
	}
	j.Prefetch(0)
	mu.Lock()
	n, lead, ahead := len(asked), maxLead, aheadOfDecode
	for k, c := range asked {
		if c != 1 {
			t.Errorf("chunk %s read ahead %d times, want once", k, c)
		}
		if !decoded[k] {
			t.Errorf("chunk %s read ahead but not decoded by the prefetch", k)
		}
	}
	mu.Unlock()
	if len(decoded) <= readAheadChunks+j.prefetchWorkers() {
		t.Fatalf("batch 0 decodes %d satellite chunks: too few to see the read-ahead's bound", len(decoded))
	}
	if bound := readAheadChunks + j.prefetchWorkers(); lead > bound {
		t.Errorf("read-ahead ran %d chunks beyond the decodes begun, want at most %d (readAheadChunks + workers)", lead, bound)
	}
	if ahead < len(decoded)/2 {
		t.Errorf("%d of %d chunks were read ahead before their decode began, want at least half", ahead, len(decoded))
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(asked) != n {
		t.Errorf("%d read-ahead requests after Prefetch returned", len(asked)-n)
	}
	mu.Unlock()
	t.Logf("%d satellite chunks decoded, %d read ahead (%d before their decode), lead at most %d", len(decoded), n, ahead, lead)
}

// TestDecodesYieldToGather: while a lower batch is being gathered, a prefetch decodes at
// most GOMAXPROCS-1 chunks at once (the gather keeps a core); otherwise one per core.
func TestDecodesYieldToGather(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("with one core there is no core to leave to the gather")
	}
	maxDecodes := func(gathering bool) int {
		j, ds := newMemJob(t, smallMem, "", Options{})
		var mu sync.Mutex
		now, most := 0, 0
		ds["satellite.zarr"].arrays["data"].onDecode = func([]int) {
			mu.Lock()
			now++
			most = max(most, now)
			mu.Unlock()
			time.Sleep(3 * time.Millisecond)
			mu.Lock()
			now--
			mu.Unlock()
		}
		if gathering {
			j.decodes.gather(0)
			defer j.decodes.gathered(0)
		}
		for g := uint64(1); g <= 3; g++ {
			j.Prefetch(g)
		}
		if j.Cache().Stats().Misses == 0 {
			t.Fatal("the prefetches decoded nothing")
		}
		return most
	}
	if got, want := maxDecodes(true), runtime.GOMAXPROCS(0)-1; got > want {
		t.Errorf("with batch 0 gathering, %d decodes of later batches ran at once, want at most %d", got, want)
	}
	if got := maxDecodes(false); got < 2 {
		t.Errorf("with no batch gathering, at most %d decode ran at once, want several (one per core)", got)
	}
}
