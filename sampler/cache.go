package sampler

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cache holds decoded chunks as float32, ready to copy, within a memory budget, shared by every
// reader of a Job. An entry is pinned while a reader copies from it and is evicted, least
// recently used first, only when unpinned. Concurrent misses on one key decode it once: the
// other readers wait for the first.
//
// Entry memory is mapped outside the Go heap (anonymous mmap), so the budget is the resident
// size the cache can reach, the garbage collector never scans or delays it, and an evicted
// entry's memory goes back to the system at once (or is reused as is by the next miss of the
// same size).
type Cache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[uint64]*entry
	lru     entry // sentinel: lru.next is the most recently used

	hits, misses, evictions, overBudget atomic.Uint64
	loadNanos, waitNanos                atomic.Int64
	peak                                atomic.Int64
}

type entry struct {
	key        uint64
	data       []float32
	mem        []byte // the mapping behind data
	refs       int32
	ready      chan struct{} // closed when loaded (or failed)
	err        error
	prev, next *entry
}

// CacheStats is a snapshot of a cache's counters.
type CacheStats struct {
	Hits, Misses, Evictions uint64
	// OverBudget counts loads admitted while every resident entry was pinned, taking the
	// cache above its budget until some entry is released.
	OverBudget    uint64
	Entries       int
	ResidentBytes int64
	PeakBytes     int64
	BudgetBytes   int64
	LoadTime      time.Duration // total time spent decoding missed chunks
	WaitTime      time.Duration // total time readers waited for a chunk another reader decoded
}

// HitRate is hits / (hits + misses), 0 when nothing was asked.
func (s CacheStats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// NewCache makes an empty cache of budget bytes.
func NewCache(budget int64) *Cache {
	c := &Cache{budget: budget, entries: map[uint64]*entry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	n, used := len(c.entries), c.used
	c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		OverBudget: c.overBudget.Load(), Entries: n, ResidentBytes: used,
		PeakBytes: c.peak.Load(), BudgetBytes: c.budget,
		LoadTime: time.Duration(c.loadNanos.Load()), WaitTime: time.Duration(c.waitNanos.Load()),
	}
}

// Budget is the cache's budget in bytes.
func (c *Cache) Budget() int64 { return c.budget }

// chunkLoader fills dst (the entry, n float32 values) with the decoded chunk of key.
type chunkLoader func(key uint64, dst []float32) error

// acquire returns the entry of key pinned, loading it with load (n values) on a miss. The
// caller must release it.
func (c *Cache) acquire(key uint64, n int, load chunkLoader) (*entry, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		e.refs++
		c.moveFront(e)
		c.mu.Unlock()
		c.hits.Add(1)
		select {
		case <-e.ready:
		default:
			t := time.Now()
			<-e.ready
			c.waitNanos.Add(int64(time.Since(t)))
		}
		if e.err != nil {
			err := e.err
			c.release(e)
			return nil, err
		}
		return e, nil
	}
	c.misses.Add(1)
	size := int64(n) * 4
	var mem []byte
	// Make room: evict unpinned entries from the cold end; reuse a same-size mapping as is.
	for c.used+size > c.budget {
		v := c.coldestUnpinned()
		if v == nil {
			c.overBudget.Add(1)
			break
		}
		c.remove(v)
		c.evictions.Add(1)
		if mem == nil && len(v.mem) == int(size) {
			mem = v.mem
		} else {
			unmap(v.mem)
		}
	}
	if mem == nil {
		var err error
		mem, err = mapAnon(size)
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	e := &entry{key: key, mem: mem, data: unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), n),
		refs: 1, ready: make(chan struct{})}
	c.entries[key] = e
	c.pushFront(e)
	c.used += size
	if c.used > c.peak.Load() {
		c.peak.Store(c.used)
	}
	c.mu.Unlock()

	t := time.Now()
	err := load(key, e.data)
	c.loadNanos.Add(int64(time.Since(t)))
	if err != nil {
		c.mu.Lock()
		e.err = err
		if c.entries[key] == e {
			c.remove(e) // a later acquire retries
			unmap(e.mem)
			e.mem, e.data = nil, nil
		}
		close(e.ready)
		e.refs--
		c.mu.Unlock()
		return nil, err
	}
	close(e.ready)
	return e, nil
}

// release unpins an entry.
func (c *Cache) release(e *entry) {
	c.mu.Lock()
	e.refs--
	c.mu.Unlock()
}

// Close unmaps every entry. No reader may use the cache afterwards.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		c.remove(e)
		if e.mem != nil {
			unmap(e.mem)
		}
	}
}

func (c *Cache) coldestUnpinned() *entry {
	for e := c.lru.prev; e != &c.lru; e = e.prev {
		if e.refs == 0 {
			return e
		}
	}
	return nil
}

// remove unlinks e from the map and the list and uncounts its bytes.
func (c *Cache) remove(e *entry) {
	delete(c.entries, e.key)
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	c.used -= int64(len(e.mem))
}

func (c *Cache) pushFront(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *Cache) moveFront(e *entry) {
	if c.lru.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	c.pushFront(e)
}

const hugePage = 2 << 20

// mapAnon maps size bytes of anonymous memory, starting on a 2 MiB boundary so that the kernel
// can back it with transparent huge pages: rows are gathered from all over an entry, and huge
// pages spare most of the TLB misses. It maps a little more, then unmaps the unaligned head
// and tail.
func mapAnon(size int64) ([]byte, error) {
	n := uintptr(size)
	extra := uintptr(0)
	if n >= hugePage {
		extra = hugePage
	}
	p, err := unix.MmapPtr(-1, 0, nil, n+extra, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("chunk cache: map %d bytes: %w", size, err)
	}
	base := uintptr(p)
	start := base
	if extra > 0 {
		start = (base + hugePage - 1) &^ (hugePage - 1)
		if head := start - base; head > 0 {
			_ = unix.MunmapPtr(p, head)
		}
		if tail := base + n + extra - (start + n); tail > 0 {
			_ = unix.MunmapPtr(unsafe.Add(p, start-base+n), tail)
		}
	}
	mem := unsafe.Slice((*byte)(unsafe.Add(p, start-base)), n)
	// Advice only: the system may not have huge pages.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem, nil
}

func unmap(mem []byte) {
	if len(mem) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(&mem[0]), uintptr(len(mem)))
	}
}

// pinSet is the entries one reader holds while it assembles one source of one example: a
// small table looked up linearly, so that a row copy costs no lock.
type pinSet struct {
	c     *Cache
	keys  []uint64
	ents  []*entry
	limit int // release everything when this many are held (bounds what one reader pins)
}

func (p *pinSet) get(key uint64, n int, load chunkLoader) ([]float32, error) {
	for i, k := range p.keys {
		if k == key {
			return p.ents[i].data, nil
		}
	}
	if len(p.keys) >= p.limit {
		p.releaseAll()
	}
	e, err := p.c.acquire(key, n, load)
	if err != nil {
		return nil, err
	}
	p.keys = append(p.keys, key)
	p.ents = append(p.ents, e)
	return e.data, nil
}

func (p *pinSet) releaseAll() {
	for i, e := range p.ents {
		p.c.release(e)
		p.ents[i] = nil
	}
	p.keys = p.keys[:0]
	p.ents = p.ents[:0]
}
