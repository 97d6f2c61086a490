package main

import (
	"context"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/sampler"
)

// The source side of `shmloader run` and `serve`: the configured sources as one
// sampler.Source, with the process's logging around it (start-up facts, the first fills' timings at debug level,
// progress with -v). Package feed publishes its counters to the ring.

// heapLimit is the Go heap's soft limit beside the chunk reads in flight. The decoded-chunk
// cache lives outside the Go heap (its own mappings, within cache_mb); what the heap holds is
// small (coordinates, decode scratch) but for the reads in flight (the stored bytes of up to
// fetch_depth chunks per source of object storage, within fetch_buffer_mb), so keep the
// collector close to that: the bound is RSS <= cache_mb + the reads' buffers + 100 MB. A limit
// below the reads' buffers would have the collector run without end while they are full.
// GOMEMLIMIT, when set, wins.
const heapLimit = 64 << 20

// debugBatches is how many of the first fills log their timings at debug level.
const debugBatches = 4

// statsEvery is how often -v logs the source's counters.
const statsEvery = 10 * time.Second

// runSource is the process's sampler.Source with logging.
type runSource struct {
	sampler.Source
	log   zerolog.Logger
	start time.Time
	fills atomic.Int64  // Fill calls so far (the first debugBatches are logged)
	stop  chan struct{} // closed by close: the progress log ends
	once  sync.Once

	rejections []sampler.Rejection // anchor times each zarr source rules out as t0 (logged at start-up)
}

// openSources opens the configured sources (for zarr: metadata and coordinates only). Its
// errors are configuration errors (exit status 2).
func openSources(cfg *config.Config, f sourceFlags, stream sampler.Stream, log zerolog.Logger) (*runSource, error) {
	return openSourcesIn(cfg, f, stream, nil, log)
}

// openSourcesIn is openSources with the decoded-chunk cache shared (nil: one of its own).
func openSourcesIn(cfg *config.Config, f sourceFlags, stream sampler.Stream, shared *sampler.SharedCache, log zerolog.Logger) (*runSource, error) {
	t := time.Now()
	src, err := sampler.Open(cfg, sampler.Options{DataRoot: f.dataRoot, CacheMB: f.cacheMB, Stream: stream, Shared: shared})
	if err != nil {
		return nil, err
	}
	countReads(src, true)
	s := &runSource{Source: src, log: log, start: time.Now(), rejections: src.Rejections(), stop: make(chan struct{})}
	st := src.Stats()
	ev := log.Info().Int("tensors", len(src.Tensors())).Uint64("rank", stream.Rank).Uint64("world_size", stream.WorldSize).
		Dur("open", time.Since(t)).Dur("since_exec", time.Since(processStart))
	if st.Mode != "" {
		ev = ev.Str("mode", st.Mode).Int("t0_candidates", st.Candidates).Int64("decoded_mb", st.DataBytes>>20).
			Int64("cache_mb", st.Cache.BudgetBytes>>20).Str("sampling_why", st.Why)
		if st.ResidentSegments > 0 {
			ev = ev.Int("resident_segments", st.ResidentSegments)
		}
		if st.Pairs > 0 { // rules = "ocf": the (t0, location) pairs, not the t0 candidates, are the samples
			ev = ev.Uint64("ocf_pairs", st.Pairs)
		}
		if st.Order == config.OrderEpochs {
			ev = ev.Str("order", st.Order).Uint64("samples", st.Samples).Uint64("epoch_batches", st.EpochBatches)
		}
		if st.Locations > 0 { // site-anchored
			ev = ev.Int("locations", st.Locations).Int("locations_dropped", st.LocationsDropped)
		}
	}
	ev.Msg("sources ready")
	// rules = "ocf": locations ocf-data-sampler could not sample (a crop that leaves a grid)
	// are left out of the job; one warning per source that leaves some out.
	for _, e := range src.SiteExclusions() {
		log.Warn().Str("source", e.Field).Str("name", e.Name).Ints64("location_ids", e.IDs).
			Str("first", e.First).Msg("locations left out: the source cannot crop them by ocf-data-sampler's rule")
	}
	// Which anchor times each source rules out as t0 (a gap, the window past an end, no NWP run
	// old enough) and the first such time: the first thing to look at when there are fewer
	// candidates than the data suggests.
	for _, r := range s.rejections {
		log.Info().Str("source", r.Field).Str("name", r.Name).Int("rejected_t0", r.Count).
			Str("first", r.First).Msg("t0 rejections")
	}
	if log.GetLevel() <= zerolog.InfoLevel {
		go func() { // progress for -v: the counters every statsEvery, until close
			tick := time.NewTicker(statsEvery)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					s.logStats()
				case <-s.stop:
					return
				}
			}
		}()
	}
	return s, nil
}

// heapLimits is the reads' buffers of every source open in the process (a sharing node
// loader opens several): the heap limit is heapLimit beside all of them.
var heapLimits struct {
	sync.Mutex
	reads map[sampler.Source]int64
}

// countReads counts src's read buffers in the heap limit (open) or takes them out (a source
// closed), and sets the limit, unless GOMEMLIMIT set it.
func countReads(src sampler.Source, open bool) {
	heapLimits.Lock()
	defer heapLimits.Unlock()
	if heapLimits.reads == nil {
		heapLimits.reads = map[sampler.Source]int64{}
	}
	r, ok := src.(interface{ ReadBufferBytes() int64 })
	if open && ok {
		heapLimits.reads[src] = r.ReadBufferBytes()
	} else {
		delete(heapLimits.reads, src)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var sum int64
	for _, n := range heapLimits.reads {
		sum += n
	}
	debug.SetMemoryLimit(heapLimit + sum)
}

// close logs the counters a last time and releases the sources (a node loader's job that
// ended); no Fill may run afterwards.
func (s *runSource) close() {
	s.once.Do(func() {
		close(s.stop)
		s.logStats()
		if c, ok := s.Source.(interface{ Close() }); ok {
			c.Close()
		}
		countReads(s.Source, false)
	})
}

// Fill is the source's Fill; the first few calls log, at debug level, when they began and
// ended (since the process started) and what they decoded, which is where the time to the
// first batch goes.
func (s *runSource) Fill(ctx context.Context, g uint64, dst [][]byte) error {
	if s.fills.Add(1) > debugBatches || s.log.GetLevel() > zerolog.DebugLevel {
		return s.Source.Fill(ctx, g, dst)
	}
	t := time.Now()
	err := s.Source.Fill(ctx, g, dst)
	c := s.Stats().Cache
	s.log.Debug().Uint64("batch", g).Dur("began", t.Sub(processStart)).Dur("fill", time.Since(t)).
		Dur("since_exec", time.Since(processStart)).Uint64("cache_misses", c.Misses).
		Dur("decode_time", c.LoadTime).Err(err).Msg("fill")
	return err
}

// warm prefetches global batch g (the first this process fills) in the background, while run
// creates the ring and the consumer attaches: the first batch's decoding then starts at once
// instead of after that work.
func (s *runSource) warm(g uint64) {
	go func() {
		t := time.Now()
		s.Prefetch(g)
		s.log.Debug().Uint64("batch", g).Dur("began", t.Sub(processStart)).Dur("prefetch", time.Since(t)).
			Dur("since_exec", time.Since(processStart)).Msg("warm")
	}()
}

// logStats logs the cache and sampling counters (sources that keep them).
func (s *runSource) logStats() {
	st := s.Stats()
	if st.Mode == "" {
		return
	}
	c := st.Cache
	ev := s.log.Info().Uint64("batches", st.Batches).Float64("cache_hit_rate", c.HitRate()).
		Uint64("cache_hits", c.Hits).Uint64("cache_misses", c.Misses).Uint64("cache_evictions", c.Evictions).
		Uint64("cache_over_budget", c.OverBudget).Int64("cache_resident_mb", c.ResidentBytes>>20).
		Int64("cache_peak_mb", c.PeakBytes>>20).Int64("cache_free_mb", c.FreeBytes>>20).
		Uint64("cache_blocks_mapped", c.Maps).Uint64("cache_blocks_unmapped", c.Unmaps).
		Dur("decode_time", c.LoadTime).Dur("wait_time", c.WaitTime).
		Dur("elapsed", time.Since(s.start))
	if st.Mode == sampler.SampleLocality {
		ev = ev.Float64("segments_per_batch", st.SegmentsPerBatch).Int("resident_segments", st.ResidentSegments)
	}
	ev.Msg("sampler stats")
	for i, m := range st.ChunksMissing {
		if m > 0 { // a store cut short: say so once more at exit, beside the consumer's stats
			s.log.Warn().Int("source", i).Uint64("chunks_missing", m).Uint64("chunks_decoded", st.ChunksDecoded[i]).
				Float64("missing_fraction", float64(m)/float64(st.ChunksDecoded[i])).Msg("chunks not stored were read as the fill value")
		}
	}
}
