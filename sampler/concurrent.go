package sampler

import (
	"fmt"

	"github.com/gobatch/gobatch/config"
)

// Concurrent batches ([batch] concurrent = true): every batch is one t0 with every location,
// row k the job's k-th location, as ocf-data-sampler's PVNetConcurrentDataset stacks a sample.
// The order draws t0s: independently per batch (order = "stream"), or each once per epoch
// (order = "epochs": an epoch permutes the t0s, one per batch; with the data larger than the
// cache, the block shuffle walks them in time segments: concurrentEpochs). The batch size is
// the number of locations. The t0s are those every location pairs with: gobatch's t0
// candidates, or the rule set's common t0s (rules.PairSpace.Grid); a rule set whose locations
// do not share their t0s (ocf's per-location mode, where PVNetConcurrentDataset has no t0s
// either) is refused.
//
// One batch reads its t0's chunks once for all its locations: the cache holds a t0's windows
// whatever the cache size. The windows of nearby t0s overlap (a satellite window of an hour at
// 5 minutes, t0s every 30 minutes), which only an order that keeps them together reuses.
// Dropout is drawn once per batch and source, as ocf-data-sampler slices time (and drops out)
// once per concurrent sample.

// concurrent is the grid of a concurrent job: its t0s and, for each row, the location.
type concurrent struct {
	t0s  []int64
	ti   []int32 // each t0's anchor time index; -1: not an anchor time
	locs []int   // the location of each row
}

// groupByT0 sets the job up for concurrent batches when [batch] concurrent asks for them: the
// t0s every location shares and the batch size (the locations).
func (j *Job) groupByT0() error {
	if !j.cfg.Batch.Concurrent {
		return nil
	}
	if j.sites == nil {
		return j.cfg.Errorf("batch.concurrent", "true, but the examples are not centred on locations; expected locations on the anchor, or a points anchor")
	}
	c := &concurrent{}
	switch {
	case j.space != nil:
		if c.t0s, c.locs = j.space.Grid(); c.t0s == nil {
			info := j.space.Info()
			return j.cfg.Errorf("batch.concurrent", "true, but the locations do not share their t0s under rules %q (%s mode: each location has t0s of its own); expected a sample space of common t0s (under ocf's rules, generation without NaN, as ocf-data-sampler's PVNetConcurrentDataset needs)",
				info.Rules, info.Mode)
		}
	default:
		for _, ci := range j.cands {
			c.t0s = append(c.t0s, j.times.value(int(ci)))
		}
		for k := range j.sites.n() {
			c.locs = append(c.locs, k)
		}
	}
	if len(c.t0s) == 0 || len(c.locs) == 0 {
		return j.cfg.Errorf("batch.concurrent", "true, but no t0 pairs with every location")
	}
	c.ti = make([]int32, len(c.t0s))
	for k, t0 := range c.t0s {
		c.ti[k] = -1
		if i, ok := j.times.index(t0); ok {
			c.ti[k] = int32(i)
		}
	}
	if j.size != 0 && j.size != len(c.locs) {
		return j.cfg.Errorf("batch.size", "%d with concurrent batches of %d locations; expected no batch size, or %d", j.size, len(c.locs), len(c.locs))
	}
	j.size, j.conc = len(c.locs), c
	return nil
}

// drawConcurrent places example e of global batch g: the batch's t0 (drawn, or the epoch's),
// row e's location.
func (j *Job) drawConcurrent(g uint64, e int, ex *example) {
	c := j.conc
	var k uint64
	if j.epochs != nil {
		_, k = j.epochs.sample(j.seed, g, 0) // an epoch permutes the t0s, one per batch
	} else {
		k = uniform64(hashKey(j.seed, drawT0, g, 0), uint64(len(c.t0s)))
	}
	ex.t0, ex.ti = c.t0s[k], int(c.ti[k])
	ex.site = c.locs[e]
	ex.cy, ex.cx = j.sites.centre(ex.site)
}

// concurrentWhy says how a concurrent job reads, for the plan and the start-up log.
func (j *Job) concurrentWhy() string {
	return fmt.Sprintf("concurrent: each batch is one t0 with all %d locations, its chunks decoded once for all of them (%d t0s); the %.0f MB of decoded data against cache_mb %d need no locality sampling",
		len(j.conc.locs), len(j.conc.t0s), float64(j.dataBytes)/(1<<20), j.cache.Budget()>>20)
}

// concurrentEpochs lays epochs over the t0s, one per batch: a permutation of them, or with the
// decoded data larger than the cache (and sampling not "random") the block shuffle of the
// t0s in time segments, so that the windows of consecutive batches' t0s share their chunks.
func (j *Job) concurrentEpochs(a *Spec, s Stream) error {
	n := uint64(len(j.conc.t0s))
	if _, perRank := s.Epoch(n); perRank == 0 && !j.cfg.Batch.KeepLast {
		return j.cfg.Errorf("batch.concurrent", "true with order = %q: %d t0s, fewer than one batch for each of %d ranks", config.OrderEpochs, n, max(s.WorldSize, 1))
	}
	var err error
	if j.epochs, err = newEpochs(j.cfg, n, 1, 1, s); err != nil {
		return err
	}
	if a.Sampling == SampleRandom || (j.dataFits() && a.Sampling == SampleAuto) || uint64(len(j.cands)) != n {
		return nil // the t0s in the cache, or not all anchor times (j.cands are then not the t0s)
	}
	j.mode = SampleLocality
	_, segments := j.blockShuffle(a, func(l *locality, group int) *blocks { return newBlocks(l, 1, group, j.seed) })
	j.why = fmt.Sprintf("concurrent: each batch is one t0 with all %d locations, its chunks decoded once for all of them (%d t0s); %s; consecutive batches' t0s share their windows' chunks (a batch is one t0 whatever the order); cache_mb >= %d would hold everything",
		len(j.conc.locs), n, segments, j.dataBytes*10/9>>20+1)
	return nil
}
