package chunks

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func fillWith(v float32, loads *atomic.Int64) Loader {
	return func(key uint64, mem []byte) (func(), error) {
		loads.Add(1)
		dst := f32(mem)
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
	e, err := c.Acquire(k, 4*int64(n), fillWith(0, loads))
	if err != nil {
		t.Fatal(err)
	}
	if e.f32()[n-1] != float32(k) {
		t.Fatalf("entry %d holds %v", k, e.f32()[n-1])
	}
	c.Release(e)
}

// f32 is an entry's block as float32 (the test loaders' values).
func (e *Entry) f32() []float32 { return f32(e.mem) }

func f32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

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
	a, _ := c.Acquire(1, 4*n, fillWith(0, &loads))
	b, _ := c.Acquire(2, 4*n, fillWith(0, &loads))
	// Both pinned: a third load goes over budget rather than evicting memory in use.
	d, err := c.Acquire(3, 4*n, fillWith(0, &loads))
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.OverBudget != 1 || st.Evictions != 0 || a.f32()[0] != 1 || b.f32()[0] != 2 {
		t.Fatalf("stats %+v, a %v b %v", st, a.f32()[0], b.f32()[0])
	}
	c.Release(a)
	c.Release(d)
	// The next miss evicts the unpinned coldest (1), never the pinned 2.
	e, _ := c.Acquire(4, 4*n, fillWith(0, &loads))
	c.Release(e)
	if b.f32()[0] != 2 {
		t.Fatal("pinned entry overwritten")
	}
	if _, ok := c.entries[2]; !ok {
		t.Fatal("pinned entry evicted")
	}
	if _, ok := c.entries[1]; ok {
		t.Fatal("coldest unpinned entry kept")
	}
	c.Release(b)
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
		f32(mem)[0] = 42
		return nil, nil
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := c.Acquire(9, 4*16, slow)
			if err != nil || e.f32()[0] != 42 {
				t.Errorf("got %v %v", e, err)
				return
			}
			c.Release(e)
		}()
	}
	for c.Stats().Hits+c.Stats().Misses < 8 {
		// wait until every goroutine asked
		runtime.Gosched()
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
	if _, err := c.Acquire(5, 4*16, func(uint64, []byte) (func(), error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	var loads atomic.Int64
	e, err := c.Acquire(5, 4*16, fillWith(1, &loads))
	if err != nil || e.f32()[0] != 6 || loads.Load() != 1 {
		t.Fatalf("retry: %v %v", e, err)
	}
	c.Release(e)
	if c.Stats().ResidentBytes != 64 {
		t.Fatalf("resident %d", c.Stats().ResidentBytes)
	}
}

// errDeadline stands for the sampler's chunk deadline error (a read abandoned in time).
var errDeadline = errors.New("chunk read past its deadline")

// TestCacheSteadyMissesMapNothing: once the cache has filled, misses of one entry size reuse
// evicted entries' blocks: no mapping or unmapping, and the budget holds.
func TestCacheSteadyMissesMapNothing(t *testing.T) {
	const n = 1 << 14 // 64 KiB entries
	c := NewCache(4 * 4 * n)
	defer c.Close()
	var loads atomic.Int64
	for k := uint64(0); k < 200; k++ {
		getChecked(t, c, k, n, &loads)
	}
	st := c.Stats()
	if st.Misses != 200 || st.Maps != 4 || st.Unmaps != 0 || st.Evictions != 196 || st.PeakBytes > c.Budget() {
		t.Fatalf("200 misses of one size in a cache of 4: %+v; want 4 maps, no unmap", st)
	}
	// Two sizes: the budget holds, and a block of the evicted size is reused before any map.
	for k := uint64(1000); k < 1100; k++ {
		size := int64(4 * n)
		if k%3 == 0 {
			size = 4 * n / 4
		}
		e, err := c.Acquire(k, size, fillWith(0, &loads))
		if err != nil {
			t.Fatal(err)
		}
		c.Release(e)
		if st := c.Stats(); st.ResidentBytes > c.Budget() || st.OverBudget != 0 {
			t.Fatalf("mixed sizes: %+v", st)
		}
	}
	if st := c.Stats(); st.Maps-st.Unmaps > 16 || st.Maps >= 4+100 {
		t.Fatalf("mixed sizes: %d maps, %d unmaps for 100 misses", st.Maps, st.Unmaps)
	}
}

// TestAbandonedReadKeepsItsBlock: a load abandoned at its deadline while its read still writes
// into the entry's block never gives that block to another entry until the read returns; then
// the block is reused.
func TestAbandonedReadKeepsItsBlock(t *testing.T) {
	const n = 1024
	c := NewCache(3 * 4 * n)
	defer c.Close()
	hung := make(chan struct{})
	var late []byte
	var lateDone sync.WaitGroup
	lateDone.Add(1)
	abandon := func(key uint64, mem []byte) (func(), error) {
		late = mem
		done := make(chan struct{})
		go func() { // the read that returns only after the deadline, scribbling over its buffer
			<-hung
			for i := range mem {
				mem[i] = 0xAA
			}
			close(done)
			lateDone.Done()
		}()
		return func() { <-done }, fmt.Errorf("chunk %d: %w", key, errDeadline)
	}
	if _, err := c.Acquire(1, 4*n, abandon); err == nil {
		t.Fatal("an abandoned load succeeded")
	}
	var loads atomic.Int64
	check := func(round string) {
		for k := uint64(10); k < 30; k++ {
			e, err := c.Acquire(k, 4*n, fillWith(0, &loads))
			if err != nil {
				t.Fatal(err)
			}
			if unsafe.SliceData(e.mem) == unsafe.SliceData(late) && round == "pending" {
				t.Fatalf("entry %d was given the block of a read still writing it", k)
			}
			c.Release(e)
		}
	}
	check("pending")
	if st := c.Stats(); st.ResidentBytes > c.Budget() {
		t.Fatalf("the abandoned block is not counted in the budget: %+v", st)
	}
	// Pin the last entries (two: with the abandoned block, the budget), let the read scribble,
	// and check that none of them changed.
	var pinned []*Entry
	for k := uint64(28); k < 30; k++ {
		e, _ := c.Acquire(k, 4*n, fillWith(0, &loads))
		pinned = append(pinned, e)
	}
	close(hung)
	lateDone.Wait()
	for _, e := range pinned {
		if e.f32()[0] != float32(e.key) || e.f32()[n-1] != float32(e.key) {
			t.Fatalf("entry %d corrupted by the late read", e.key)
		}
		c.Release(e)
	}
	// The read has returned: its block goes back to the free list and serves later misses.
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().FreeBytes == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	maps := c.Stats().Maps
	e, err := c.Acquire(99, 4*n, fillWith(0, &loads))
	if err != nil {
		t.Fatal(err)
	}
	c.Release(e)
	if st := c.Stats(); unsafe.SliceData(e.mem) != unsafe.SliceData(late) || st.Maps != maps || st.ResidentBytes > c.Budget() {
		t.Fatalf("after the late read returned: reused its block %v, %+v", unsafe.SliceData(e.mem) == unsafe.SliceData(late), st)
	}
}
