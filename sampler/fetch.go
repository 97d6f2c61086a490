package sampler

import (
	"errors"
	"runtime"
	"time"

	"github.com/gobatch/gobatch/sampler/chunks"
)

// Chunk reads in flight. Decoding a chunk from a local disk is CPU-bound: a prefetch runs one
// read per core. Reading one from object storage is I/O-bound (tens of milliseconds per
// request, little CPU): a prefetch keeps many reads in flight, far more than the cores, their
// number adapted to the store (chunks/window.go) below fetch_depth.
// A chunk load is therefore two steps with separate bounds: fetching its stored bytes
// (FetchChunk; at most fetch_depth per source, each into a buffer of the source's free list,
// within fetch_buffer_mb), then decoding them (DecodeFetched; at most GOMAXPROCS at once in
// the whole job, so that decodes run to completion on warm caches instead of dozens
// interleaving, each with its own chunk-sized buffers). Whoever starts a load obeys both:
// prefetches of several readers, the background prefetch ahead, gathers.

// remoteDataset is implemented by datasets whose store is in object storage.
type remoteDataset interface{ remote() bool }

// isRemote reports whether ds's store is in object storage.
func isRemote(ds Dataset) bool {
	r, ok := ds.(remoteDataset)
	return ok && r.remote()
}

// DefaultRemoteDepth is the default upper bound on a remote source's reads in flight; the
// window (chunks/window.go) finds the number the store wants below it.
const DefaultRemoteDepth = 64

// fetchDepth is source sp's bound on chunk reads in flight: fetch_depth, else
// DefaultRemoteDepth for a remote store and GOMAXPROCS for a local one; at most as many as
// fetch_buffer_mb holds, at least one. A read holds perRead bytes: its stored bytes (at most
// what the chunk's codecs can encode) and the decoded chunk.
func fetchDepth(sp *Spec, remote bool, perRead int64) int {
	depth := sp.FetchDepth
	if depth == 0 {
		depth = runtime.GOMAXPROCS(0)
		if remote {
			depth = DefaultRemoteDepth
		}
	}
	if perRead = max(perRead, 1); int64(depth)*perRead > sp.FetchBufferMB<<20 {
		depth = int(sp.FetchBufferMB << 20 / perRead)
	}
	return max(depth, 1)
}

// fetchingArray is implemented by arrays that can fetch a chunk's stored bytes and decode them
// in two steps (the store-backed arrays, and their concatenations). FetchChunk returns errWhole
// for a chunk that it cannot fetch apart from its decode: fetchDecode then reads and decodes
// it whole in its decode step.
type fetchingArray interface {
	FetchChunk(idx []int, buf []byte) (raw []byte, found bool, err error)
	DecodeFetched(idx []int, raw []byte, found bool, dst []byte) error
	rawChunkBytes() int
}

// errWhole is FetchChunk's answer for a chunk read and decoded in one step (a concatenation's
// chunk that a store boundary cuts: concat.go).
var errWhole = errors.New("chunk read and decoded whole")

// decodeWhole reads and decodes chunk sidx in one step, telling a chunk that is not stored
// where the array can.
func (c *chunked) decodeWhole(sidx []int, dst []byte) (bool, error) {
	if p, ok := c.arr.(presenceArray); ok {
		return p.DecodeChunkFound(sidx, dst)
	}
	return true, c.arr.DecodeChunk(sidx, dst)
}

// readBytes is what one chunk read of c holds: the stored bytes (the array's bound when it
// fetches in two steps, else as many as decoded) and the decoded chunk.
func (c *chunked) readBytes() int64 {
	decoded := int64(c.elems * c.itemLen)
	if f, ok := c.arr.(fetchingArray); ok {
		return int64(f.rawChunkBytes()) + decoded
	}
	return 2 * decoded
}

// ReadBufferBytes is the most the job's chunk reads in flight hold in the Go heap at once:
// each source's reads (depth) of its stored bytes and decode buffer (readBytes), as
// fetch_buffer_mb bounds them. A process that keeps its heap small (GOMEMLIMIT) must leave
// room for them, or its collector runs without end while object storage is read.
func (j *Job) ReadBufferBytes() int64 {
	var n int64
	for _, s := range j.srcs {
		c := s.data()
		n += int64(c.depth) * c.readBytes()
	}
	return n
}

// limitReads bounds the source's chunk reads in flight to depth; a remote source's reads go
// through an adaptive window below it.
func (c *chunked) limitReads(depth int) {
	c.depth = depth
	c.reads = make(chan struct{}, depth)
	c.rawBufs = make(chan []byte, depth)
	if c.remote {
		c.window = chunks.NewReadWindow(depth)
	}
}

// shareDecodes gives every source the job's decode slots: one per core; and sets the places
// for decodes above a gathering batch: one core fewer (prefetch.go).
func (j *Job) shareDecodes() {
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, s := range j.srcs {
		s.data().decodes = slots
	}
	j.decodes.spare = make(chan struct{}, max(runtime.GOMAXPROCS(0)-1, 1))
}

// slot waits for a place in sem (nil: no bound); the returned func gives it back.
func slot(sem chan struct{}) func() {
	if sem == nil {
		return func() {}
	}
	sem <- struct{}{}
	return func() { <-sem }
}

// fetchDecode loads chunk sidx in the two bounded steps into dst (an entry's block or a native
// buffer, written only by the decode: a read waiting on the network holds its compressed bytes).
func (c *chunked) fetchDecode(f fetchingArray, sidx []int, dst []byte) (bool, error) {
	done := slot(c.reads)
	var buf []byte
	select {
	case buf = <-c.rawBufs:
	default:
		buf = make([]byte, 0, f.rawChunkBytes())
	}
	var ahead int
	if c.window != nil {
		ahead = c.window.Acquire()
	}
	start := time.Now()
	raw, found, err := f.FetchChunk(sidx, buf)
	whole := errors.Is(err, errWhole)
	if whole {
		err = nil
	}
	took := time.Since(start)
	c.readNS.Add(uint64(took))
	if c.window != nil {
		c.window.Release(ahead, took, err != nil, found)
	}
	done()
	if err == nil {
		done = slot(c.decodes)
		start = time.Now()
		if whole {
			found, err = c.decodeWhole(sidx, dst)
		} else {
			err = f.DecodeFetched(sidx, raw, found, dst)
		}
		c.decodeNS.Add(uint64(time.Since(start)))
		done()
	}
	if cap(raw) > 0 && &raw[:1][0] == &buf[:1][0] { // our buffer (not the store's memory): reuse it
		select {
		case c.rawBufs <- raw[:0]:
		default:
		}
	}
	return found, err
}

// aheadBatches is how far ahead the job prefetches: the anchor's fetch_ahead_batches, else
// DefaultFetchAheadBatches when a source's store is in object storage, and 0 (off) when all
// are local (a local miss costs a decode, which the gather's own prefetch parallelises).
func (j *Job) aheadBatches(anchor *Spec) int {
	if anchor.FetchAheadBatches >= 0 {
		return anchor.FetchAheadBatches
	}
	for _, s := range j.srcs {
		if s.data().remote {
			return DefaultFetchAheadBatches
		}
	}
	return 0
}

// prefetchWorkers is how many goroutines a prefetch runs: enough for the source with the most
// reads in flight, and one per core at least.
func (j *Job) prefetchWorkers() int {
	n := runtime.GOMAXPROCS(0)
	for _, s := range j.srcs {
		n = max(n, s.data().depth)
	}
	return n
}

// Read-ahead. A local store's chunk read is a memory copy when its pages are in the page cache
// and a wait for the disk when they are not (a cold cache: the first batch after a reboot, or
// a dataset larger than memory). A prefetch decodes one chunk per core, and each of those
// goroutines would alternate between waiting for its read and decoding; so while the decoders
// work, the prefetch asks the kernel to read the next readAheadChunks chunks in the background
// (zarr.Array.ReadAhead: POSIX_FADV_WILLNEED), and the decoders' reads find them in memory.
// The reads are the kernel's, into the page cache (no buffer of ours), at most
// readAheadChunks chunks ahead of the decoders. Object storage has fetch_depth instead.

// readAheadChunks is how many chunks a prefetch's read-ahead keeps requested ahead of its
// decoders: enough to keep a disk's queue busy (about 40 MB of nowcast-ref satellite chunks).
const readAheadChunks = 16

// readAheadArray is implemented by arrays whose store can read ahead (a local directory).
type readAheadArray interface{ ReadAhead(idx []int) }

// readsAhead reports whether the source's reads benefit from read-ahead: a local store whose
// array can read ahead.
func (c *chunked) readsAhead() bool {
	_, ok := c.arr.(readAheadArray)
	return ok && !c.remote
}

// readAhead asks the store to start reading chunk key (a cache key of this source).
func (c *chunked) readAhead(key uint64) {
	ra, ok := c.arr.(readAheadArray)
	if !ok || c.remote {
		return
	}
	ip, _, sidx := c.indices(key)
	ra.ReadAhead(sidx)
	c.idxPool.Put(ip)
}
