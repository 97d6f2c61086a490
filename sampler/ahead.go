package sampler

import (
	"context"
	"sync"
	"sync/atomic"
)

// Fetching ahead. A Fill prefetches its own batch's chunks; with the stores in object storage
// a miss then costs the consumer a request's latency (tens of milliseconds) each time the
// locality window rotates. So each Fill also starts, in the background, the prefetch of the
// batch fetch_ahead_batches further in this rank's stream (Stream.Ahead): its chunks are
// fetched while the batches before it are gathered. One such prefetch runs at a time (a Fill
// that finds one running starts none: the batch is then prefetched by its own Fill), its reads
// count against the sources' fetch_depth and its chunks against the cache budget as any
// prefetch's do (prefetch skips a batch whose chunks would take more than half the cache).

// aheadFetcher is the job's background prefetch of batches ahead.
type aheadFetcher struct {
	batches uint64 // how far ahead (0: off)
	stream  Stream
	busy    atomic.Bool
	next    atomic.Uint64 // block shuffle: the next global batch to prefetch (0: none yet)
	wg      sync.WaitGroup
	ctx     context.Context // cancelled by Close
	stop    context.CancelFunc
}

func newAheadFetcher(batches int, s Stream) *aheadFetcher {
	ctx, stop := context.WithCancel(context.Background())
	return &aheadFetcher{batches: uint64(batches), stream: s, ctx: ctx, stop: stop}
}

// fetchAhead starts the prefetch of the batch a.batches after global batch g, unless one is
// running or fetching ahead is off.
func (j *Job) fetchAhead(g uint64) {
	a := j.ahead
	if a == nil || a.batches == 0 || !a.busy.CompareAndSwap(false, true) {
		return
	}
	if j.epochs != nil && j.epochs.blocks != nil {
		j.fetchGroupsAhead(g)
		return
	}
	target := a.stream.Ahead(g, a.batches)
	a.wg.Go(func() {
		defer a.busy.Store(false)
		rs := j.state()
		defer j.putState(rs)
		j.prefetchBatch(a.ctx, target, rs, 1)
	})
}

// fetchGroupsAhead prefetches, in the background, this rank's batches after g up to the end
// of the group after g's (the caller holds a.busy).
func (j *Job) fetchGroupsAhead(g uint64) {
	a := j.ahead
	limit := j.epochs.nextGroupEnd(g)
	from := max(a.next.Load(), a.stream.Ahead(g, 1))
	step := max(a.stream.WorldSize, 1)
	a.wg.Go(func() {
		defer a.busy.Store(false)
		rs := j.state()
		defer j.putState(rs)
		for b := from; b < limit && a.ctx.Err() == nil; b += step {
			j.prefetchBatch(a.ctx, b, rs, 1)
			a.next.Store(b + step)
		}
	})
}

// closeAhead stops fetching ahead and waits for the prefetch running (its chunk in flight).
func (j *Job) closeAhead() {
	if j.ahead != nil {
		j.ahead.stop()
		j.ahead.wg.Wait()
	}
}

// waitAhead waits for the prefetch running, if any, to finish (tests).
func (j *Job) waitAhead() { j.ahead.wg.Wait() }
