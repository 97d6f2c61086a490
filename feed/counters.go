package feed

import (
	"time"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

// PublishEvery is how often a feed adds its source's counters to its ring.
const PublishEvery = 500 * time.Millisecond

// publish adds the source's counters to the ring's job counters every PublishEvery, and once
// more when Stop asks, so that the consumer's stats() show the cache hit rate and evictions.
// With several rings fed from one source (shmloader serve) each ring shows the one source's
// figures: its misses counted once. The ring's first batch is published after the counters
// of its fill (fill calls publishCounters), so that stats() are right from the first batch.
func (f *Feed) publish() {
	defer close(f.pubDone)
	t := time.NewTicker(PublishEvery)
	defer t.Stop()
	for {
		select {
		case <-f.stopPub:
			f.publishCounters()
			return
		case <-t.C:
			f.publishCounters()
		}
	}
}

// publishCounters adds the source's counters since the last call to the ring's job counters.
func (f *Feed) publishCounters() {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	f.counters.Publish(f.r.R, f.pool.src.Stats())
}

// Counters turns a source's statistics into one ring's job counters (PROTOCOL.md 2.5a): each
// Publish adds the counts since the last one and stores the gauges. Keep one per ring.
type Counters struct {
	last ring.JobCounters // what was already added to the ring
}

// Publish adds st's counts since the last Publish to r's job counters and stores its gauges.
func (c *Counters) Publish(r *ring.Ring, st sampler.Stats) {
	now := ring.JobCounters{
		CacheHits: st.Cache.Hits, CacheMisses: st.Cache.Misses, CacheEvictions: st.Cache.Evictions,
		CacheBytes: uint64(st.Cache.ResidentBytes), CacheBudget: uint64(st.Cache.BudgetBytes),
		ChunksDecoded: st.ChunksDecoded, ChunksMissing: st.ChunksMissing,
	}
	if st.SegmentsSum > 0 {
		now.SegmentsSum, now.SegmentsBatches = st.SegmentsSum, st.Batches
	}
	last := c.last
	d := ring.JobCounters{
		CacheHits: now.CacheHits - last.CacheHits, CacheMisses: now.CacheMisses - last.CacheMisses,
		CacheEvictions: now.CacheEvictions - last.CacheEvictions,
		CacheBytes:     now.CacheBytes, CacheBudget: now.CacheBudget,
		SegmentsSum: now.SegmentsSum - last.SegmentsSum, SegmentsBatches: now.SegmentsBatches - last.SegmentsBatches,
	}
	for i := range d.ChunksDecoded {
		d.ChunksDecoded[i] = now.ChunksDecoded[i] - last.ChunksDecoded[i]
		d.ChunksMissing[i] = now.ChunksMissing[i] - last.ChunksMissing[i]
	}
	r.AddJobCounters(d)
	c.last = now
}
