package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/rs/zerolog"
)

// The sampler's side of `shmloader run`: configurations whose sources have kind = "zarr" are
// served by a sampler.Job, which lays out the ring's tensors itself (the data sources, then
// t0, x, y and the point ids) and fills whole batches. Importing package sampler registers the
// "zarr" source kind with package config.
//
// run.go: when hasZarrSources(cfg), newZarrJob (a failure is a configuration error, exit 2),
// the ring layout from job.layout, warm (unless --join: the ring's start is not known yet), and each reader calls job.Fill(slot.Seq(), slot tensors);
// LogStats at exit. The job's cache is never unmapped: readers may still be inside Fill when
// run returns, and the process exit frees it.

// zarrFlags are the run flags of zarr jobs (--data-root is run's own); --rank and --world-size
// apply to synthetic sources too.
type zarrFlags struct {
	rank      int
	worldSize int
	cacheMB   int64
}

func addZarrFlags(fs *flag.FlagSet) *zarrFlags {
	z := &zarrFlags{}
	fs.IntVar(&z.rank, "rank", 0, "data-parallel rank: this process produces global batches k*world_size + rank")
	fs.IntVar(&z.worldSize, "world-size", 1, "number of data-parallel ranks")
	fs.Int64Var(&z.cacheMB, "cache-mb", 0, "decoded-chunk cache budget in MiB (default: the anchor source's cache_mb)")
	return z
}

// hasZarrSources reports whether cfg is a sampler configuration.
func hasZarrSources(cfg *config.Config) bool {
	for _, s := range cfg.Sources {
		if _, ok := s.Spec.(*sampler.Spec); ok {
			return true
		}
	}
	return false
}

// heapLimit is the Go heap's soft limit for zarr jobs.
const heapLimit = 64 << 20

// processStart is when the process began (package initialisation): the start-up timings in
// the debug log count from it.
var processStart = time.Now()

// debugBatches is how many of the first fills log their timings at debug level.
const debugBatches = 4

// zarrJob is a sampler.Job with logging.
type zarrJob struct {
	*sampler.Job
	log   zerolog.Logger
	start time.Time
	fills atomic.Int64 // Fill calls so far (the first debugBatches are logged)

	reported ring.JobCounters // counters already added to the ring (publish)
}

// publishEvery is how often the job's counters reach the ring (PROTOCOL.md 2.5a).
const publishEvery = 500 * time.Millisecond

// publish adds the job's counters since the last call to the ring's job counters and stores
// the gauges, so that the consumer's stats() shows the cache hit rate and evictions. Called
// from one goroutine.
func (z *zarrJob) publish(r *ring.Ring) {
	st := z.Stats()
	now := ring.JobCounters{
		CacheHits: st.Cache.Hits, CacheMisses: st.Cache.Misses, CacheEvictions: st.Cache.Evictions,
		CacheBytes: uint64(st.Cache.ResidentBytes), CacheBudget: uint64(st.Cache.BudgetBytes),
	}
	if st.SegmentsSum > 0 {
		now.SegmentsSum, now.SegmentsBatches = st.SegmentsSum, st.Batches
	}
	last := z.reported
	r.AddJobCounters(ring.JobCounters{
		CacheHits: now.CacheHits - last.CacheHits, CacheMisses: now.CacheMisses - last.CacheMisses,
		CacheEvictions: now.CacheEvictions - last.CacheEvictions,
		CacheBytes:     now.CacheBytes, CacheBudget: now.CacheBudget,
		SegmentsSum: now.SegmentsSum - last.SegmentsSum, SegmentsBatches: now.SegmentsBatches - last.SegmentsBatches,
	})
	z.reported = now
}

// newZarrJob opens the stores (metadata and coordinates only) and prepares the sampling. Its
// errors are configuration errors (exit status 2).
func newZarrJob(cfg *config.Config, dataRoot string, f *zarrFlags, log zerolog.Logger) (*zarrJob, error) {
	t := time.Now()
	if f.worldSize < 1 || f.rank < 0 || f.rank >= f.worldSize {
		return nil, fmt.Errorf("--rank %d --world-size %d: expected world size >= 1 and 0 <= rank < world size", f.rank, f.worldSize)
	}
	j, err := sampler.NewJob(cfg, sampler.Options{DataRoot: dataRoot, Rank: f.rank, WorldSize: f.worldSize, CacheMB: f.cacheMB})
	if err != nil {
		return nil, err
	}
	// The cache lives outside the Go heap (its own mappings, within cache_mb). What the heap
	// holds is small (coordinates, decode scratch), so keep the collector close to it: the
	// brief's bound is RSS <= cache_mb + 100 MB. GOMEMLIMIT, when set, wins.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(heapLimit)
	}
	z := &zarrJob{Job: j, log: log, start: time.Now()}
	ev := log.Info().Str("mode", j.Mode()).Int("t0_candidates", j.Candidates()).
		Int64("decoded_mb", j.DataBytes()>>20).Int64("cache_mb", j.Cache().Budget()>>20).
		Int("rank", f.rank).Int("world_size", f.worldSize).Dur("open", time.Since(t)).
		Dur("since_exec", time.Since(processStart))
	if st := j.Stats(); st.ResidentSegments > 0 {
		ev = ev.Int("resident_segments", st.ResidentSegments)
	}
	ev.Msg("zarr sampler ready")
	if log.GetLevel() <= zerolog.InfoLevel {
		go func() { // progress for -v: the counters every statsEvery, until the process exits
			for range time.Tick(statsEvery) {
				z.LogStats()
			}
		}()
	}
	return z, nil
}

// Fill is the job's Fill; the first few calls log, at debug level, when they began and ended
// (since the process started) and what they decoded, which is where the time to the first
// batch goes.
func (z *zarrJob) Fill(batch uint64, tensors [][]byte) error {
	if z.fills.Add(1) > debugBatches || z.log.GetLevel() > zerolog.DebugLevel {
		return z.Job.Fill(batch, tensors)
	}
	t := time.Now()
	err := z.Job.Fill(batch, tensors)
	c := z.Job.Cache().Stats()
	z.log.Debug().Uint64("batch", batch).Dur("began", t.Sub(processStart)).Dur("fill", time.Since(t)).
		Dur("since_exec", time.Since(processStart)).Uint64("cache_misses", c.Misses).
		Dur("decode_time", c.LoadTime).Err(err).Msg("zarr fill")
	return err
}

// warm decodes the chunks of batch k (the first this process fills) in the background, while
// run creates the ring and the consumer attaches: the first batch's decoding then starts at
// once instead of after that work.
func (z *zarrJob) warm(batch uint64) {
	go func() {
		t := time.Now()
		z.Prefetch(batch)
		z.log.Debug().Uint64("batch", batch).Dur("began", t.Sub(processStart)).Dur("prefetch", time.Since(t)).
			Dur("since_exec", time.Since(processStart)).Msg("zarr warm")
	}()
}

// statsEvery is how often -v logs the sampler's counters.
const statsEvery = 10 * time.Second

// layout is the ring layout: run's layoutFor (slots, start, stream length) with the sampler's
// tensors (the data sources, then t0, x, y and the point ids).
func (z *zarrJob) layout(cfg *config.Config, start uint64) (ring.Layout, error) {
	l, err := layoutFor(cfg, start)
	if err != nil {
		return l, err
	}
	l.Tensors = l.Tensors[:0]
	for _, t := range z.Tensors() {
		l.Tensors = append(l.Tensors, ring.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return l, l.Validate()
}

// LogStats logs the cache and sampling counters.
func (z *zarrJob) LogStats() {
	st := z.Stats()
	c := st.Cache
	ev := z.log.Info().Uint64("batches", st.Batches).Float64("cache_hit_rate", c.HitRate()).
		Uint64("cache_hits", c.Hits).Uint64("cache_misses", c.Misses).Uint64("cache_evictions", c.Evictions).
		Uint64("cache_over_budget", c.OverBudget).Int64("cache_resident_mb", c.ResidentBytes>>20).
		Int64("cache_peak_mb", c.PeakBytes>>20).Dur("decode_time", c.LoadTime).Dur("wait_time", c.WaitTime).
		Dur("elapsed", time.Since(z.start))
	if st.Mode == sampler.SampleLocality {
		ev = ev.Float64("segments_per_batch", st.SegmentsPerBatch).Int("resident_segments", st.ResidentSegments)
	}
	ev.Msg("zarr sampler stats")
}
