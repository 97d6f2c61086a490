package chunks

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cache holds decoded chunks within a memory budget, shared by every reader of a Job: a chunk
// whose stored element is narrower than float32 (int8, uint8, int16, uint16, float16) in its
// stored type, the gather converting each row as it copies it, and a wider one converted to
// float32 when it is loaded (chunked.go says which). An Entry is pinned while a reader copies
// from it and is evicted, least recently used first, only when unpinned. Concurrent misses on
// one key decode it once: the other readers wait for the first.
//
// Entry memory is mapped outside the Go heap (anonymous mmap), so the garbage collector never
// scans or delays it, and the budget is the resident size the cache can reach: every block it
// has mapped, whether it holds an Entry, waits on a free list, or belongs to a read abandoned at
// its deadline. Blocks are reused rather than unmapped: an evicted Entry's block goes on the
// free list of its size, and a miss takes a block of its size from there before it maps a new
// one. Per-size free lists of whole blocks, rather than one arena carved into variable ranges:
// a job has one Entry size per source (a handful), every Entry of a source has the same size,
// so a block always fits exactly, nothing fragments, and a block stays a 2 MiB-aligned mapping
// of its own (transparent huge pages). In steady state a miss evicts the coldest entries until
// one of its size frees a block and reuses it: no munmap, no mmap, so no TLB shootdown and no
// page clearing per miss. The entries of other sizes it evicts on the way (several sources of
// different chunk sizes) leave their blocks on their free lists for the next misses of their
// size; only when those hold more than 1/freeSlack of the budget are they unmapped to make
// room. The budget holds whatever the mix.
type Cache struct {
	mu      sync.Mutex
	budget  int64
	held    int64 // bytes of every block mapped: entries, free lists, abandoned reads
	entries map[uint64]*Entry
	lru     Entry              // sentinel: lru.next is the most recently used
	free    map[int64][][]byte // unused blocks by size
	freeN   int64              // bytes on the free lists
	closed  bool

	hits, misses, evictions, overBudget atomic.Uint64
	maps, unmaps                        atomic.Uint64
	loadNanos, waitNanos                atomic.Int64
	peak                                atomic.Int64
}

type Entry struct {
	key        uint64
	mem        []byte // the block: the chunk in the cache's form (chunked.go)
	refs       int32
	ready      chan struct{} // closed when loaded (or failed)
	err        error
	prev, next *Entry
}

// CacheStats is a snapshot of a cache's counters.
type Stats struct {
	Hits, Misses, Evictions uint64
	// OverBudget counts loads admitted while every resident Entry was pinned, taking the
	// cache above its budget until some Entry is released.
	OverBudget uint64
	Entries    int
	// ResidentBytes is the memory the cache has mapped (entries, free blocks and blocks of
	// abandoned reads), FreeBytes the part of it on the free lists; PeakBytes is the highest
	// ResidentBytes so far.
	ResidentBytes int64
	FreeBytes     int64
	PeakBytes     int64
	BudgetBytes   int64
	// Maps and Unmaps count the blocks mapped and unmapped: after the cache has filled, a
	// job with one Entry size does neither.
	Maps, Unmaps uint64
	LoadTime     time.Duration // total time spent decoding missed chunks
	WaitTime     time.Duration // total time readers waited for a chunk another reader decoded
}

// HitRate is hits / (hits + misses), 0 when nothing was asked.
func (s Stats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// NewCache makes an empty cache of budget bytes.
func NewCache(budget int64) *Cache {
	c := &Cache{budget: budget, entries: map[uint64]*Entry{}, free: map[int64][][]byte{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	n, held, free := len(c.entries), c.held, c.freeN
	c.mu.Unlock()
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		OverBudget: c.overBudget.Load(), Entries: n, ResidentBytes: held, FreeBytes: free,
		PeakBytes: c.peak.Load(), BudgetBytes: c.budget, Maps: c.maps.Load(), Unmaps: c.unmaps.Load(),
		LoadTime: time.Duration(c.loadNanos.Load()), WaitTime: time.Duration(c.waitNanos.Load()),
	}
}

// Budget is the cache's budget in bytes.
func (c *Cache) Budget() int64 { return c.budget }

// SetBudget changes the budget; the cache shrinks to it as misses evict (tests make a job's
// cache small this way).
func (c *Cache) SetBudget(b int64) {
	c.mu.Lock()
	c.budget = b
	c.mu.Unlock()
}

// Has reports whether key is cached (or being loaded).
func (c *Cache) Has(key uint64) bool {
	c.mu.Lock()
	_, ok := c.entries[key]
	c.mu.Unlock()
	return ok
}

// Mem is the entry's block: the chunk in the cache's form.
func (e *Entry) Mem() []byte { return e.mem }

// Loader fills dst (an Entry's block) with chunk key in the cache's form. A read that
// did not finish in time returns an error and, when it may still write into dst, wait: a
// function that returns once it no longer does (the block is not reused before).
type Loader func(key uint64, dst []byte) (wait func(), err error)

// Acquire returns the Entry of key pinned, loading it with load into a block of size bytes on
// a miss. The caller must release it.
func (c *Cache) Acquire(key uint64, size int64, load Loader) (*Entry, error) {
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
			c.Release(e)
			return nil, err
		}
		return e, nil
	}
	c.misses.Add(1)
	mem, err := c.block(size)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	e := &Entry{key: key, mem: mem, refs: 1, ready: make(chan struct{})}
	c.entries[key] = e
	c.pushFront(e)
	c.mu.Unlock()

	t := time.Now()
	wait, err := load(key, e.mem)
	c.loadNanos.Add(int64(time.Since(t)))
	if err != nil {
		c.failed(e, err, wait)
		return nil, err
	}
	close(e.ready)
	return e, nil
}

// failed takes the Entry of a load that failed out of the cache (a later acquire retries) and
// gives its block back: at once, or when the abandoned read that still writes into it returns.
func (c *Cache) failed(e *Entry, err error, wait func()) {
	c.mu.Lock()
	e.err = err
	mem := e.mem
	if c.entries[e.key] == e {
		c.remove(e)
	}
	e.mem = nil
	close(e.ready)
	e.refs--
	if wait == nil {
		c.putFree(mem)
	}
	c.mu.Unlock()
	if wait != nil {
		go func() {
			wait()
			c.mu.Lock()
			c.putFree(mem)
			c.mu.Unlock()
		}()
	}
}

// block finds size bytes for a new Entry, c.mu held: a free block of that size, else a new
// mapping when it fits the budget, else room made by evicting the coldest unpinned entries
// (their blocks go to the free lists) until a block of that size is free. Free blocks of other
// sizes wait for misses of their size, up to freeSlack of the budget: beyond that, or when
// nothing is left to evict, they are unmapped to make room. With every Entry pinned it maps
// above the budget.
func (c *Cache) block(size int64) ([]byte, error) {
	for {
		if mem := c.takeFree(size); mem != nil {
			c.shrink(0)
			return mem, nil
		}
		if c.held+size <= c.budget {
			break
		}
		if c.freeN > c.budget/freeSlack && c.held-c.freeN+size <= c.budget {
			c.shrink(size) // more free blocks of other sizes than misses are likely to take
			break
		}
		v := c.coldestUnpinned()
		if v == nil {
			c.shrink(size)
			if c.held+size > c.budget {
				c.overBudget.Add(1)
			}
			break
		}
		c.remove(v)
		c.evictions.Add(1)
		c.putFree(v.mem)
		v.mem = nil
	}
	mem, err := MapBlock(size)
	if err != nil {
		return nil, err
	}
	c.maps.Add(1)
	c.held += size
	if c.held > c.peak.Load() {
		c.peak.Store(c.held)
	}
	return mem, nil
}

// freeSlack: free blocks of sizes other than a miss's may hold up to 1/freeSlack of the budget
// before the miss unmaps them rather than evicting more entries.
const freeSlack = 8

// takeFree takes a free block of size bytes off its list (nil when there is none). It stays
// counted in held.
func (c *Cache) takeFree(size int64) []byte {
	l := c.free[size]
	if len(l) == 0 {
		return nil
	}
	mem := l[len(l)-1]
	l[len(l)-1] = nil
	c.free[size] = l[:len(l)-1]
	c.freeN -= size
	return mem
}

// putFree puts a block no Entry holds on the free list of its size, or unmaps it when the
// cache is above its budget (an over-budget load has been released) or closed.
func (c *Cache) putFree(mem []byte) {
	size := int64(len(mem))
	if c.closed || c.held > c.budget {
		c.unmapBlock(mem)
		return
	}
	c.free[size] = append(c.free[size], mem)
	c.freeN += size
}

// shrink unmaps free blocks until held + more fits the budget, or none is left.
func (c *Cache) shrink(more int64) {
	for size, l := range c.free {
		for len(l) > 0 && c.held+more > c.budget {
			c.unmapBlock(l[len(l)-1])
			l[len(l)-1] = nil
			l = l[:len(l)-1]
			c.freeN -= size
		}
		c.free[size] = l
	}
}

func (c *Cache) unmapBlock(mem []byte) {
	UnmapBlock(mem)
	c.unmaps.Add(1)
	c.held -= int64(len(mem))
}

// Release unpins an entry; the last release after Close unmaps it.
func (c *Cache) Release(e *Entry) {
	c.mu.Lock()
	e.refs--
	if c.closed && e.refs == 0 && c.entries[e.key] == e {
		c.remove(e)
		c.unmapBlock(e.mem)
	}
	c.mu.Unlock()
}

// Close unmaps every block no reader holds. No reader may start using the cache afterwards;
// the block of an Entry still pinned or loading is unmapped at its last release or when its
// load fails, and one an abandoned read still writes into when that read returns.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, e := range c.entries {
		if e.refs == 0 {
			c.remove(e)
			c.unmapBlock(e.mem)
		}
	}
	for _, l := range c.free {
		for _, mem := range l {
			c.unmapBlock(mem)
		}
	}
	clear(c.free)
	c.freeN = 0
}

func (c *Cache) coldestUnpinned() *Entry {
	for e := c.lru.prev; e != &c.lru; e = e.prev {
		if e.refs == 0 {
			return e
		}
	}
	return nil
}

// remove unlinks e from the map and the list.
func (c *Cache) remove(e *Entry) {
	delete(c.entries, e.key)
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) pushFront(e *Entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *Cache) moveFront(e *Entry) {
	if c.lru.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	c.pushFront(e)
}

const hugePage = 2 << 20

// MapBlock maps size bytes of anonymous memory, starting on a 2 MiB boundary so that the kernel
// can back it with transparent huge pages: rows are gathered from all over an Entry, and huge
// pages spare most of the TLB misses. It maps a little more, then unmaps the unaligned head
// and tail.
func MapBlock(size int64) ([]byte, error) {
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

// UnmapBlock unmaps a block MapBlock mapped.
func UnmapBlock(mem []byte) {
	if len(mem) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(&mem[0]), uintptr(len(mem)))
	}
}

// Pins are the entries one reader holds while it assembles one source of one example: a
// small table looked up linearly, so that a row copy costs no lock.
type Pins struct {
	c     *Cache
	keys  []uint64
	ents  []*Entry
	limit int           // release everything when this many are held (bounds what one reader pins)
	wait  time.Duration // spent in the cache getting chunks not yet pinned: loads, and waits for others' (Waited)
}

// NewPins is an empty set of pins on c, releasing everything when limit are held.
func NewPins(c *Cache, limit int) Pins { return Pins{c: c, limit: limit} }

// Get returns the block of chunk key (size bytes), pinned until ReleaseAll.
func (p *Pins) Get(key uint64, size int64, load Loader) ([]byte, error) {
	for i, k := range p.keys {
		if k == key {
			return p.ents[i].mem, nil
		}
	}
	if len(p.keys) >= p.limit {
		p.ReleaseAll()
	}
	start := time.Now()
	e, err := p.c.Acquire(key, size, load)
	p.wait += time.Since(start)
	if err != nil {
		return nil, err
	}
	p.keys = append(p.keys, key)
	p.ents = append(p.ents, e)
	return e.mem, nil
}

// Waited is the time Get has spent in the cache so far (a chunk's load, or the wait for
// another reader's): what a gather waited for rather than copied.
func (p *Pins) Waited() time.Duration { return p.wait }

// Full reports whether the next get of a chunk not held releases every pin first.
func (p *Pins) Full() bool { return len(p.keys) >= p.limit }

func (p *Pins) ReleaseAll() {
	for i, e := range p.ents {
		p.c.Release(e)
		p.ents[i] = nil
	}
	p.keys = p.keys[:0]
	p.ents = p.ents[:0]
}
