package sampler

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobatch/gobatch/sampler/rules"
)

// A rule set's own sample space (rules.Rules.Pairs): for a site-anchored job, the rule set may
// replace gobatch's (every location with every t0 candidate) by (t0, location) pairs of its
// own, found from the sources' times. The job gives
// it the times of the anchor, of every NWP (with the staleness of its window rule) and of the
// locations source, and a scan of the locations source's values; it draws examples from the
// pairs it gets back (placePair). When every location pairs with the same t0s and those are
// anchor times, the pairs are the t0 candidates times the sites (or the rule set's sites among
// them), gobatch's own site-anchored sample space, so that locality sampling and the epochs'
// block shuffle serve them unchanged (drawsPairs).

// findPairs asks the rule set for the job's sample space; with none, the t0 candidates.
func (j *Job) findPairs() error {
	space, err := j.rules.Pairs(j.spaceInput())
	for _, s := range j.srcs {
		if n, ok := s.(*nwpSource); ok {
			n.layFine() // every valid t0 seen: one run each, or keep the resolution's steps
		}
	}
	j.sortCauses()
	var ke *rules.KeyError
	switch {
	case errors.As(err, &ke):
		return j.cfg.Errorf(ke.Field, "%s", ke.Msg)
	case err != nil:
		return j.cfg.Errorf("source", "%v", err)
	case space == nil:
		return j.findCandidates()
	}
	j.space = space
	if t0s, locs := space.Grid(); t0s != nil {
		// t0s times locations: gobatch's own site-anchored sample space, over the rule set's
		// locations (ocf's leave location 0 out when there are others)
		if j.cands = anchorCandidates(j.times, t0s); j.cands != nil && len(locs) < j.sites.n() {
			j.drawSites = locs
		}
	}
	return nil
}

// sampledSites is the number of locations examples are drawn from: every location, or the rule
// set's when its sample space is its t0s times some of them (drawSites).
func (j *Job) sampledSites() int {
	if j.drawSites != nil {
		return len(j.drawSites)
	}
	return j.sites.n()
}

// sampledSite is the location of drawn location index k (< sampledSites).
func (j *Job) sampledSite(k int) int {
	if j.drawSites != nil {
		return j.drawSites[k]
	}
	return k
}

// spaceInput is what the rule set's sample space is found from.
func (j *Job) spaceInput() *rules.SpaceInput {
	in := &rules.SpaceInput{}
	if a := j.anchor; a != nil {
		in.Anchor = &rules.Series{Field: a.s.Field, Name: a.s.Name, Times: a.times.vals, Window: a.win.public()}
	}
	for _, s := range j.srcs {
		n, ok := s.(*nwpSource)
		if !ok || n.targets == nil {
			continue
		}
		sp := n.s
		in.NWP = append(in.NWP, rules.NWPSeries{Field: sp.Field, Name: sp.Name, Inits: n.inits.vals,
			IntervalStart: sp.IntervalStartMinutes * 60, FirstStep: n.steps.vals[0], MaxStaleness: n.maxStaleness(),
			DropoutTimedelta: sp.DropoutTimedeltasMinutes})
	}
	if ps := j.t0Periods(); ps != nil {
		in.T0Periods = ps
		in.T0PeriodsNote = j.rangeNote()
	}
	j.rejections = make([]Rejection, len(j.srcs))
	for si, s := range j.srcs {
		j.rejections[si] = Rejection{Field: s.spec().Field, Name: s.spec().Name}
	}
	in.Valid = j.validT0
	p := j.sites.src
	in.Locations = rules.LocationSeries{
		Series: rules.Series{Field: p.s.Field, Name: p.s.Name, Times: p.times.vals, Window: p.win.public()},
		IDs:    p.ids, Sites: j.sites.sys, ResMin: p.s.TimeResolutionMinutes,
		Scan: func(valid func(sys int, t int64), nan func(sys int)) error { return j.scanValues(p, valid, nan) },
	}
	return in
}

// validT0 says whether every source's window can be laid at t0 (the rule set's pairs keep only
// such t0s), and counts what each source rules out (Rejections).
func (j *Job) validT0(t0 int64) bool {
	ok := true
	for si, s := range j.srcs {
		if !s.fits(t0) {
			ok = false
			j.rejections[si].add(t0, s)
		}
	}
	if ok {
		for _, s := range j.srcs {
			if n, isNWP := s.(*nwpSource); isNWP {
				n.checkRuns(t0) // whether its window may lie on finer steps (nwptargets.go)
			}
		}
	}
	return ok
}

// anchorCandidates are the anchor time indices of t0s when every one of them is an anchor
// time (the usual case: the locations' grid is coarser than the anchor's); nil otherwise.
func anchorCandidates(times *timeAxis, t0s []int64) []int32 {
	out := make([]int32, 0, len(t0s))
	for _, t0 := range t0s {
		ti, ok := times.index(t0)
		if !ok {
			return nil
		}
		out = append(out, int32(ti))
	}
	return out
}

// drawsPairs says whether examples are drawn from the rule set's pairs one by one (placePair):
// with a rule set's sample space unless the pairs are the t0 candidates times the sites.
func (j *Job) drawsPairs() bool { return j.space != nil && j.cands == nil }

// scanValues reads points source p's data array chunk by chunk, time chunks in order, and
// calls valid(sys, t) for every value that is not NaN (for each system in ascending time) and
// nan(sys) for every NaN; a chunk that is not stored is the fill value, NaN (xarray masks it).
// Only a chunk is held at a time.
func (j *Job) scanValues(p *pointSource, valid func(sys int, t int64), nan func(sys int)) error {
	c := p.c
	nt, nk := c.shape[0], c.shape[1] // canonical (time, system)
	ct, ck := c.chunks[0], c.chunks[1]
	bp := c.nativeBuf()
	defer c.scratch.Put(bp)
	vals := make([]float32, c.elems)
	idx, sidx := make([]int, 2), make([]int, c.storeRank)
	for ti := 0; ti < c.grid[0]; ti++ {
		for ki := 0; ki < c.grid[1]; ki++ {
			idx[0], idx[1] = ti, ki
			found, err := c.decodeNow(c.storeIndex(idx, sidx), *bp)
			if err != nil {
				return fmt.Errorf("%s: chunk %v: reading the values that decide the sample space: %w", c.what, sidx, err)
			}
			if !found {
				for i := range vals {
					vals[i] = float32(math.NaN())
				}
			} else {
				c.convert(vals, *bp)
			}
			for dt := 0; dt < ct && ti*ct+dt < nt; dt++ {
				t := p.times.vals[ti*ct+dt]
				for dk := 0; dk < ck && ki*ck+dk < nk; dk++ {
					if v := vals[dt*ck+dk]; v != v {
						nan(ki*ck + dk)
					} else {
						valid(ki*ck+dk, t)
					}
				}
			}
		}
	}
	return nil
}

// placePair places an example on pair s: its t0, its location and that location's centre;
// its anchor time index when t0 is an anchor time (-1 otherwise).
func (j *Job) placePair(ex *example, s uint64) {
	t0, loc := j.space.Pair(s)
	ex.t0, ex.site = t0, loc
	ex.ti = -1
	if i, ok := j.times.index(t0); ok {
		ex.ti = i
	}
	ex.cy, ex.cx = j.sites.centre(loc)
}

// SpaceInfo describes a rule set's sample space (rules.SpaceInfo).
type SpaceInfo = rules.SpaceInfo

// SampleSpace describes the job's (t0, location) pairs when its rule set has its own; nil
// otherwise.
func (j *Job) SampleSpace() *SpaceInfo {
	if j.space == nil {
		return nil
	}
	info := j.space.Info()
	return &info
}
