package sampler

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func fillWith(v float32, loads *atomic.Int64) chunkLoader {
	return func(key uint64, mem []byte) (func(), error) {
		loads.Add(1)
		dst := bytesAsFloat32(mem)
		for i := range dst {
			dst[i] = v + float32(key)
		}
		return nil, nil
	}
}

// getChecked acquires key k (n float32 values, filled by fillWith(0)), checks its last value
// and releases it.
func getChecked(t *testing.T, c *Cache, k uint64, n int, loads *atomic.Int64) {
	t.Helper()
	e, err := c.acquire(k, 4*int64(n), fillWith(0, loads))
	if err != nil {
		t.Fatal(err)
	}
	if e.f32()[n-1] != float32(k) {
		t.Fatalf("entry %d holds %v", k, e.f32()[n-1])
	}
	c.release(e)
}

// f32 is an entry's block as float32 (the test loaders' values).
func (e *entry) f32() []float32 { return bytesAsFloat32(e.mem) }

func TestCacheBudgetAndLRU(t *testing.T) {
	const n = 1024 // 4 KiB entries
	c := NewCache(3 * 4 * n)
	defer c.Close()
	var loads atomic.Int64
	get := func(k uint64) { getChecked(t, c, k, n, &loads) }
	get(1)
	get(2)
	get(3)
	get(1) // hit; 2 is now the coldest
	get(4) // evicts 2
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 4 || st.Evictions != 1 || st.ResidentBytes != 3*4*n || st.Entries != 3 {
		t.Fatalf("stats %+v", st)
	}
	get(1)
	get(3)
	if c.Stats().Misses != 4 {
		t.Fatal("1 or 3 was evicted instead of 2")
	}
	get(2)
	if c.Stats().Misses != 5 || c.Stats().Evictions != 2 {
		t.Fatalf("2 was not evicted: %+v", c.Stats())
	}
	if c.Stats().PeakBytes > c.Budget() {
		t.Fatalf("peak %d above budget %d", c.Stats().PeakBytes, c.Budget())
	}
}

func TestCachePinnedEntriesAreNotEvicted(t *testing.T) {
	const n = 1024
	c := NewCache(2 * 4 * n)
	defer c.Close()
	var loads atomic.Int64
	a, _ := c.acquire(1, 4*n, fillWith(0, &loads))
	b, _ := c.acquire(2, 4*n, fillWith(0, &loads))
	// Both pinned: a third load goes over budget rather than evicting memory in use.
	d, err := c.acquire(3, 4*n, fillWith(0, &loads))
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.OverBudget != 1 || st.Evictions != 0 || a.f32()[0] != 1 || b.f32()[0] != 2 {
		t.Fatalf("stats %+v, a %v b %v", st, a.f32()[0], b.f32()[0])
	}
	c.release(a)
	c.release(d)
	// The next miss evicts the unpinned coldest (1), never the pinned 2.
	e, _ := c.acquire(4, 4*n, fillWith(0, &loads))
	c.release(e)
	if b.f32()[0] != 2 {
		t.Fatal("pinned entry overwritten")
	}
	if _, ok := c.entries[2]; !ok {
		t.Fatal("pinned entry evicted")
	}
	if _, ok := c.entries[1]; ok {
		t.Fatal("coldest unpinned entry kept")
	}
	c.release(b)
	if c.Stats().ResidentBytes > c.Budget() {
		t.Fatalf("resident %d above budget after releases", c.Stats().ResidentBytes)
	}
}

func TestCacheConcurrentMissLoadsOnce(t *testing.T) {
	c := NewCache(1 << 20)
	defer c.Close()
	var loads atomic.Int64
	release := make(chan struct{})
	slow := func(key uint64, mem []byte) (func(), error) {
		loads.Add(1)
		<-release
		bytesAsFloat32(mem)[0] = 42
		return nil, nil
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := c.acquire(9, 4*16, slow)
			if err != nil || e.f32()[0] != 42 {
				t.Errorf("got %v %v", e, err)
				return
			}
			c.release(e)
		}()
	}
	for c.Stats().Hits+c.Stats().Misses < 8 {
		// wait until every goroutine asked
		runtimeGosched()
	}
	close(release)
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("%d loads of one key", loads.Load())
	}
}

func TestCacheFailedLoadIsRetried(t *testing.T) {
	c := NewCache(1 << 20)
	defer c.Close()
	boom := errors.New("boom")
	if _, err := c.acquire(5, 4*16, func(uint64, []byte) (func(), error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	var loads atomic.Int64
	e, err := c.acquire(5, 4*16, fillWith(1, &loads))
	if err != nil || e.f32()[0] != 6 || loads.Load() != 1 {
		t.Fatalf("retry: %v %v", e, err)
	}
	c.release(e)
	if c.Stats().ResidentBytes != 64 {
		t.Fatalf("resident %d", c.Stats().ResidentBytes)
	}
}

// A job whose cache holds a fraction of the data still produces the same stream.
func TestSmallCacheSameStream(t *testing.T) {
	big, _ := newMemJob(t, smallMem, "", Options{})
	want := fillRange(t, big, 0, 12, 2)
	small, _ := newMemJob(t, smallMem, "sampling = \"random\"", Options{CacheMB: 1})
	// 1 MiB holds ~5 satellite chunks of 147 KiB... force it smaller still:
	small.cache.budget = 300 << 10
	got := fillRange(t, small, 0, 12, 2)
	for b := range want {
		if string(want[b]) != string(got[b]) {
			t.Fatalf("batch %d differs with a small cache", b)
		}
	}
	st := small.cache.Stats()
	// Two readers each pin at most one time-chunk row of 2 x 2 spatial chunks.
	if st.Evictions == 0 || st.PeakBytes > small.cache.budget+2*4*small.anchor.c.chunkBytes() {
		t.Fatalf("small cache stats %+v", st)
	}
}

func runtimeGosched() { runtime.Gosched() }
