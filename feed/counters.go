package feed

import (
	"time"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

// PublishEvery is how often a feed adds its source's counters to its ring.
const PublishEvery = 500 * time.Millisecond

// counter is one named statistic of a source, published as a ring counter (PROTOCOL.md 2.5a):
// its entry of the ring's counter table, and how to read its value(s) from the sampler's
// statistics (a per-source counter: one value per source, in configuration order).
type counter struct {
	ring.CounterDef
	value func(st sampler.Stats) []uint64
}

// counters is the job's counter table, the one place a sampler statistic becomes a ring
// counter: a consumer (libgobatch, gobatch.Loader.stats()) shows every entry under its name
// without knowing it. A new statistic is one more line here.
var counters = []counter{
	sum("cache_hits", func(st sampler.Stats) uint64 { return st.Cache.Hits }),
	sum("cache_misses", func(st sampler.Stats) uint64 { return st.Cache.Misses }),
	sum("cache_evictions", func(st sampler.Stats) uint64 { return st.Cache.Evictions }),
	gauge("cache_bytes", func(st sampler.Stats) uint64 { return uint64(st.Cache.ResidentBytes) }),
	gauge("cache_budget_bytes", func(st sampler.Stats) uint64 { return uint64(st.Cache.BudgetBytes) }),
	// The distinct time segments per batch (locality sampling): their sum and its batches.
	sum("segments_sum", func(st sampler.Stats) uint64 { return st.SegmentsSum }),
	sum("segments_batches", func(st sampler.Stats) uint64 { return segmentBatches(st) }),
	// Per source: chunks decoded, and those among them not stored (read as the fill value).
	perSource("chunks_decoded", func(st sampler.Stats) []uint64 { return st.ChunksDecoded[:] }),
	perSource("chunks_missing", func(st sampler.Stats) []uint64 { return st.ChunksMissing[:] }),
	// Per source: the bytes of the chunks decoded and of the source's tensor delivered (their
	// ratio is the decode amplification).
	perSource("decoded_bytes", func(st sampler.Stats) []uint64 { return st.DecodedBytes[:] }),
	perSource("delivered_bytes", func(st sampler.Stats) []uint64 { return st.DeliveredBytes[:] }),
	// The stages of a batch: busy time (ns, summed over what ran at once) and how many can run
	// at once; the consumer names the limiting one (python/gobatch/_stages.py).
	sum("read_ns", func(st sampler.Stats) uint64 { return st.ReadNS }),
	sum("decode_ns", func(st sampler.Stats) uint64 { return st.DecodeNS }),
	sum("gather_ns", func(st sampler.Stats) uint64 { return st.GatherNS }),
	gauge("read_slots", func(st sampler.Stats) uint64 { return uint64(st.ReadSlots) }),
	gauge("decode_slots", func(st sampler.Stats) uint64 { return uint64(st.DecodeSlots) }),
	gauge("gather_slots", func(st sampler.Stats) uint64 { return uint64(st.GatherSlots) }),
}

func sum(name string, v func(sampler.Stats) uint64) counter {
	return counter{ring.CounterDef{Name: name, Kind: ring.CounterSum}, func(st sampler.Stats) []uint64 { return []uint64{v(st)} }}
}

func gauge(name string, v func(sampler.Stats) uint64) counter {
	return counter{ring.CounterDef{Name: name, Kind: ring.CounterGauge}, func(st sampler.Stats) []uint64 { return []uint64{v(st)} }}
}

func perSource(name string, v func(sampler.Stats) []uint64) counter {
	return counter{ring.CounterDef{Name: name, Kind: ring.CounterSum, Scope: ring.ScopeSource}, v}
}

// segmentBatches counts the batches of segments_sum: none when sampling has no segments.
func segmentBatches(st sampler.Stats) uint64 {
	if st.SegmentsSum == 0 {
		return 0
	}
	return st.Batches
}

// counterDefs is the counter table a ring this process creates carries.
func counterDefs() []ring.CounterDef {
	out := make([]ring.CounterDef, len(counters))
	for i, c := range counters {
		out[i] = c.CounterDef
	}
	return out
}

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

// Counters turns a source's statistics into one ring's counters (PROTOCOL.md 2.5a): each
// Publish adds the counts since the last one and stores the gauges. Keep one per ring.
type Counters struct {
	index []int      // each counter's entry in the ring's table, -1 when the ring lacks it
	last  [][]uint64 // what was already added to the ring, per counter
}

// Publish adds st's counts since the last Publish to r's counters and stores its gauges. A
// counter the ring's table lacks (a ring made by another build, joined) is left out.
func (c *Counters) Publish(r *ring.Ring, st sampler.Stats) {
	if c.index == nil {
		c.index, c.last = make([]int, len(counters)), make([][]uint64, len(counters))
		for i, def := range counters {
			c.index[i] = r.CounterIndex(def.CounterDef)
		}
	}
	for i, def := range counters {
		if c.index[i] < 0 {
			continue
		}
		now := def.value(st)
		out := now
		if def.Kind == ring.CounterSum {
			out = make([]uint64, len(now))
			for v := range now {
				out[v] = now[v]
				if v < len(c.last[i]) {
					out[v] -= c.last[i][v]
				}
			}
		}
		r.UpdateCounter(c.index[i], out)
		c.last[i] = append(c.last[i][:0], now...)
	}
}
