package sampler

import (
	"context"
	"slices"
	"sync"
)

// Prefetch: before a Fill gathers, it lists the chunks its examples need and, when several are
// missing from the cache, decodes them on all cores at once. With a warm cache this costs a few
// hundred lookups per batch; with a cold one (the first batches, a locality rotation) it turns
// one reader's sequential decoding into parallel decoding, which is what bounds the time to
// the first batch.
//
// The readers' prefetches share one queue, and every decoding goroutine takes its next chunk
// from the lowest batch that still has chunks to start: when several readers begin at once
// (start-up: reader r fills batch r), they all decode batch 0's chunks first, then batch 1's,
// instead of each decoding its own batch on a share of the cores, which would make batch 0
// (the one the consumer waits for) as late as the last.

// A batch whose chunks are all cached is gathered by its reader while the other readers'
// prefetches decode the chunks of later batches. At start-up those are the first batch (the
// consumer waits for it) and the next ones, and a gather that shares the cores with one
// decoder per core gets a fraction of one: the first batch would wait for decodes of later
// batches. So while a batch is gathering, the decodes of higher batches' chunks from local
// stores run at most GOMAXPROCS-1 at a time (spare), which leaves the gather a core. The
// decodes of its own batch and of lower ones are not held back, nor reads from object
// storage (I/O-bound: fetch_depth bounds them).

// decodeQueue holds the prefetches in progress, in ascending batch order, and the batches
// being gathered.
type decodeQueue struct {
	mu        sync.Mutex
	work      []*decodeWork
	gathering []uint64      // batches whose Fill is gathering (its prefetch done)
	spare     chan struct{} // places for decodes of batches above a gathering one; nil: no bound
}

// decodeWork is one prefetch: the missing chunks of one batch.
type decodeWork struct {
	g        uint64
	keys     []uint64 // to decode; keys[:next] are started
	next     int
	progress chan struct{} // one token when next has moved (the read-ahead waits on it); may be nil
}

// add queues w in batch order.
func (q *decodeQueue) add(w *decodeWork) {
	q.mu.Lock()
	i := len(q.work)
	for i > 0 && q.work[i-1].g > w.g {
		i--
	}
	q.work = slices.Insert(q.work, i, w)
	q.mu.Unlock()
}

// take returns the next chunk to decode, from the lowest batch that has one left, as long as
// own (the caller's batch) has chunks left to start; false when it has none.
func (q *decodeQueue) take(own *decodeWork) (uint64, bool) {
	k, _, ok := q.takeBatch(own)
	return k, ok
}

// takeBatch is take that also returns the batch whose chunk it is.
func (q *decodeQueue) takeBatch(own *decodeWork) (key, g uint64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if own.next == len(own.keys) {
		return 0, 0, false
	}
	for _, w := range q.work {
		if w.next < len(w.keys) {
			k := w.keys[w.next]
			w.next++
			select {
			case w.progress <- struct{}{}:
			default: // a token is waiting already (or nobody reads ahead)
			}
			return k, w.g, true
		}
	}
	return 0, 0, false // unreachable: own is queued and has a key left
}

// gather records that batch g is being gathered, until gathered(g).
func (q *decodeQueue) gather(g uint64) {
	q.mu.Lock()
	q.gathering = append(q.gathering, g)
	q.mu.Unlock()
}

// gathered records that batch g's gather is over.
func (q *decodeQueue) gathered(g uint64) {
	q.mu.Lock()
	if i := slices.Index(q.gathering, g); i >= 0 {
		q.gathering = slices.Delete(q.gathering, i, i+1)
	}
	q.mu.Unlock()
}

// yieldTo waits, when a batch lower than g is being gathered, for a spare place, and returns
// the func that gives it back (a no-op when none was taken).
func (q *decodeQueue) yieldTo(g uint64) func() {
	if q.spare == nil {
		return func() {}
	}
	q.mu.Lock()
	below := slices.ContainsFunc(q.gathering, func(b uint64) bool { return b < g })
	q.mu.Unlock()
	if !below {
		return func() {}
	}
	return slot(q.spare)
}

// started is how many of w's chunks have been started.
func (q *decodeQueue) started(w *decodeWork) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return w.next
}

// remove takes w (every chunk started) out of the queue.
func (q *decodeQueue) remove(w *decodeWork) {
	q.mu.Lock()
	if i := slices.Index(q.work, w); i >= 0 {
		q.work = slices.Delete(q.work, i, i+1)
	}
	q.mu.Unlock()
}

// addBoxKeys adds the keys of the chunks a box4 touches (a indices in [aLo, aHi]).
func addBoxKeys(c *chunked, bx *box4, keys []uint64) []uint64 {
	d := 0
	leadKey := 0
	if bx.lead >= 0 {
		d = 1
		leadKey = bx.lead / c.chunks[0] * c.gstride[0]
	}
	ca, cb, cy, cx := c.chunks[d], c.chunks[d+1], c.chunks[d+2], c.chunks[d+3]
	n := min(bx.na, bx.nanFrom) // the steps from nanFrom on are filled, unless some follow the dropout
	if bx.nanTo < bx.na {
		n = bx.na
	}
	if n < 1 {
		return keys
	}
	aLo, aHi := bx.a0, bx.a0+(n-1)*bx.aStride
	if bx.at != nil {
		aLo, aHi = bx.at[0], bx.at[n-1]
	}
	for ka := aLo / ca; ka <= aHi/ca; ka++ {
		lastKb := -1
		for _, b := range bx.b {
			kb := b / cb
			if kb == lastKb {
				continue
			}
			lastKb = kb
			for ky := bx.y0 / cy; ky <= (bx.y0+bx.h-1)/cy; ky++ {
				for kx := bx.x0 / cx; kx <= (bx.x0+bx.w-1)/cx; kx++ {
					keys = append(keys, c.key(leadKey+ka*c.gstride[d]+kb*c.gstride[d+1]+ky*c.gstride[d+2]+kx*c.gstride[d+3]))
				}
			}
		}
	}
	return keys
}

// prefetch decodes, in parallel, the missing chunks of global batch g's windows (grid, NWP and
// the points' nearest systems), when there are at least two. Then batch g is gathering until
// the caller calls j.decodes.gathered(g) (decodes of higher batches leave it a core).
func (j *Job) prefetch(ctx context.Context, g uint64, rs *readerState) {
	j.prefetchBatch(ctx, g, rs, 2)
	j.decodes.gather(g)
}

// prefetchBatch is prefetch for at least minChunks missing chunks (one when fetching ahead,
// where even one chunk's request is worth starting early).
func (j *Job) prefetchBatch(ctx context.Context, g uint64, rs *readerState, minChunks int) {
	keys := j.batchKeys(g, rs)
	missing := keys[:0] // in place: rs.keys is scratch
	var bytes int64
	for _, k := range keys {
		if !j.cache.Has(k) {
			missing = append(missing, k)
			bytes += j.srcs[j.keyed(k)].data().chunkBytes()
		}
	}
	workers := min(j.prefetchWorkers(), len(missing))
	// Only when it helps (several chunks, or any ahead) and fits (loading more than the cache
	// holds would evict what this very batch needs).
	if len(missing) < minChunks || workers < 1 || bytes > j.cache.Budget()/2 {
		return
	}
	j.loadParallel(ctx, g, missing, workers)
}

// batchKeys lists the cache keys of the chunks global batch g's examples touch (grid and NWP
// windows, the points' nearest systems), sorted and distinct, in rs.keys.
func (j *Job) batchKeys(g uint64, rs *readerState) []uint64 {
	keys := rs.keys[:0]
	ex := &rs.ex
	for e := 0; e < j.size; e++ {
		j.draw(g, e, ex, nil)
		for _, s := range j.srcs {
			var bx box4
			found := false
			switch v := s.(type) { // concrete calls: bx stays on the stack
			case *gridSource:
				found = v.box(ex, &bx, rs.timeScratch(v.win.n))
			case *nwpSource:
				if v.targets != nil {
					keys = v.addKeysTargets(rs, ex, keys)
					continue
				}
				found = v.box(ex, &bx, rs.timeScratch(v.rule.window.n))
			case *pointSource:
				keys = v.addKeys(rs, ex, keys)
			}
			if found {
				keys = addBoxKeys(s.data(), &bx, keys)
			}
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	rs.keys = keys
	return keys
}

// loadParallel decodes the chunks of keys (batch g's) into the cache with workers goroutines,
// which start the chunks of lower batches being prefetched by other readers first. It returns
// when every chunk of keys is decoded, when ctx ends (each worker finishes the chunk it is
// decoding), or at a worker's first failure (the gather reports the
// error and retries).
func (j *Job) loadParallel(ctx context.Context, g uint64, keys []uint64, workers int) {
	w := &decodeWork{g: g, keys: keys, progress: make(chan struct{}, 1)}
	j.decodes.add(w)
	var wg, ahead sync.WaitGroup
	stop := make(chan struct{}) // the decoders are done: the read-ahead has nothing left to do
	if j.readsAhead(keys) {
		ahead.Go(func() { j.readAhead(w, stop) })
	}
	for range workers {
		wg.Go(func() {
			for {
				if ctx.Err() != nil {
					return // the process is stopping (the consumer is gone): no more decoding
				}
				k, kg, ok := j.decodes.takeBatch(w)
				if !ok {
					return
				}
				c := j.srcs[j.keyed(k)].data()
				yield := func() {}
				if !c.remote {
					yield = j.decodes.yieldTo(kg) // a lower batch's gather keeps a core
				}
				e, err := j.cache.Acquire(k, c.chunkBytes(), c.load)
				yield()
				if err != nil {
					// The gather meets the same error and reports it: loading the rest first
					// would only delay that (by a deadline per chunk on a hung mount).
					return
				}
				j.cache.Release(e)
			}
		})
	}
	wg.Wait()
	close(stop)
	ahead.Wait()
	j.decodes.remove(w)
	// Chunks of keys started by other readers' goroutines may still be decoding: the gather's
	// acquire waits for them (a cache entry exists from the start of its load).
}

// readsAhead reports whether a chunk of keys belongs to a source that reads ahead.
func (j *Job) readsAhead(keys []uint64) bool {
	for _, k := range keys {
		if j.srcs[j.keyed(k)].data().readsAhead() {
			return true
		}
	}
	return false
}

// readAhead asks the stores to read w's chunks in key order, each once no more than
// readAheadChunks chunks are requested and not yet started by a decoder; a chunk a decoder
// has started already is skipped (its read is under way). It returns when every chunk is
// requested or started, or when stop is closed (the decoders gave up: an error, or ctx).
func (j *Job) readAhead(w *decodeWork, stop <-chan struct{}) {
	for i, k := range w.keys {
		for {
			started := j.decodes.started(w)
			if i < started {
				break
			}
			if i < started+readAheadChunks {
				j.srcs[j.keyed(k)].data().readAhead(k)
				break
			}
			select {
			case <-w.progress:
			case <-stop:
				return
			}
		}
	}
}

// Prefetch implements Source: it decodes the missing chunks of global batch g (as Fill would
// before it gathers) and returns when they are in the cache. A process that has other start-up
// work before its readers can begin (creating the ring) runs it in the background for its first
// batch, so that the decoding overlaps with that work: Fill then finds the chunks present or
// being decoded, and the readers' own prefetches help with what is left, lowest batch first.
func (j *Job) Prefetch(g uint64) {
	rs := j.state()
	defer j.putState(rs)
	j.prefetchBatch(context.Background(), g, rs, 2)
}
