package sampler

import (
	"runtime"

	"github.com/gobatch/gobatch/readers/objstore"
)

// Chunk reads in flight. Decoding a chunk from a local disk is CPU-bound: a prefetch runs one
// read per core. Reading one from object storage is I/O-bound (tens of milliseconds per
// request, little CPU): a prefetch keeps fetch_depth reads in flight, far more than the cores,
// and the Go scheduler still runs only GOMAXPROCS of them at once, so decoding keeps its own
// parallelism. Each source bounds its reads in flight by fetch_depth and by fetch_buffer_mb
// (each read holds a compressed and a decoded chunk), whoever starts them: prefetches of
// several readers, gathers.

// remoteDataset is implemented by datasets whose store is in object storage.
type remoteDataset interface{ remote() bool }

// isRemote reports whether ds's store is in object storage.
func isRemote(ds Dataset) bool {
	r, ok := ds.(remoteDataset)
	return ok && r.remote()
}

// fetchDepth is source sp's bound on chunk reads in flight: fetch_depth, else
// objstore.DefaultInFlight for a remote store and GOMAXPROCS for a local one; at most as many
// as fetch_buffer_mb holds, at least one.
func fetchDepth(sp *Spec, remote bool, nativeChunkBytes int64) int {
	depth := sp.FetchDepth
	if depth == 0 {
		depth = runtime.GOMAXPROCS(0)
		if remote {
			depth = objstore.DefaultInFlight
		}
	}
	if perRead := 2 * max(nativeChunkBytes, 1); int64(depth)*perRead > sp.FetchBufferMB<<20 {
		depth = int(sp.FetchBufferMB << 20 / perRead)
	}
	return max(depth, 1)
}

// limitReads bounds the source's chunk reads in flight to depth.
func (c *chunked) limitReads(depth int) {
	c.depth = depth
	c.reads = make(chan struct{}, depth)
}

// beginRead waits for a place among the reads in flight; endRead gives it back.
func (c *chunked) beginRead() {
	if c.reads != nil {
		c.reads <- struct{}{}
	}
}

func (c *chunked) endRead() {
	if c.reads != nil {
		<-c.reads
	}
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
