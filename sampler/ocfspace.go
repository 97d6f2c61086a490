package sampler

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The sample space under rules = "ocf" (docs/OCF.md, "Sample space"): ocf-data-sampler
// 1.0.24's valid (t0, location) pairs replace gobatch's own t0 candidates. Each source gives
// contiguous t0 periods (periods.go): the anchor (the satellite) and the generation (the
// locations source) from their time coordinates, every NWP from its init times and
// staleness; the periods are intersected and filled on the generation's resolution grid.
// When the generation array holds no NaN (complete mode) every location pairs with every t0;
// otherwise (per-location mode) each location's own NaN-free generation times give its
// periods. t0_start .. t0_end restrict the t0s as ocf's time_periods do.

// Sample space modes (Plan.SampleSpace.Mode).
const (
	SpaceComplete    = "complete"     // no NaN in the generation: every location x every valid t0
	SpacePerLocation = "per-location" // NaN in the generation: each location's own t0s
)

// pairSpace is the set of (t0, location) pairs, numbered: in complete mode pair i is
// location locs[i / n(t0s)] at t0 i mod n(t0s) (ocf's order); in per-location mode the pairs
// are ordered by location, then t0. locs are the job's location indices that ocf keeps (not
// location 0, ocfKeeps). It holds periods, never a table of pairs.
type pairSpace struct {
	mode    string
	locs    []int    // the location indices (sites) that have pairs, ascending
	shared  t0Grid   // complete mode: the t0s every location has
	perLoc  []t0Grid // per-location mode: the t0s of locs[k]
	cum     []uint64 // per-location mode: cum[k] pairs before locs[k]
	periods int      // non-empty filled periods (shared, or summed over the locations)
}

// n is the number of pairs.
func (s *pairSpace) n() uint64 {
	if s.mode == SpaceComplete {
		return s.shared.n() * uint64(len(s.locs))
	}
	return s.cum[len(s.cum)-1]
}

// pair is pair i (< n): its t0 (unix seconds) and location index.
func (s *pairSpace) pair(i uint64) (t0 int64, loc int) {
	if s.mode == SpaceComplete {
		nt := s.shared.n()
		return s.shared.at(i % nt), s.locs[i/nt]
	}
	k := sort.Search(len(s.locs), func(k int) bool { return s.cum[k+1] > i })
	return s.perLoc[k].at(i - s.cum[k]), s.locs[k]
}

// newPairSpace builds the pairs of locations locs from the periods the other sources allow
// (common) on the generation's grid of res: in complete mode (locPeriods nil) each location
// has the generation's own periods genPeriods; in per-location mode locs[k] has its NaN-free
// generation periods locPeriods[k].
func newPairSpace(common []period, res int64, locs []int, genPeriods []period, locPeriods [][]period) *pairSpace {
	s := &pairSpace{locs: locs}
	if locPeriods == nil {
		s.mode = SpaceComplete
		s.shared = fillPeriods(intersectPeriods(common, genPeriods), res)
		s.periods = s.shared.periods()
		return s
	}
	s.mode = SpacePerLocation
	s.cum = make([]uint64, 1, len(locs)+1)
	for _, lp := range locPeriods {
		g := fillPeriods(intersectPeriods(common, lp), res)
		s.perLoc = append(s.perLoc, g)
		s.cum = append(s.cum, s.cum[len(s.cum)-1]+g.n())
		s.periods += g.periods()
	}
	return s
}

// findOCFSpace builds the job's pairs (ocf rules, site-anchored): the periods of the anchor and
// of every NWP, [batch] t0_start .. t0_end, and the generation's, as ocf finds them.
func (j *Job) findOCFSpace() error {
	a := j.anchor.s
	common := contiguousT0Periods(j.anchor.times.vals, a.TimeResolutionMinutes*60, a.IntervalStartMinutes*60, a.IntervalEndMinutes*60)
	counts := []string{fmt.Sprintf("%s (%s) %d", a.Field, a.Name, len(common))} // periods per source, for the error
	for _, s := range j.srcs {
		n, ok := s.(*nwpSource)
		if !ok {
			continue
		}
		ps, err := j.nwpPeriods(n)
		if err != nil {
			return err
		}
		counts = append(counts, fmt.Sprintf("%s (%s) %d", n.s.Field, n.s.Name, len(ps)))
		common = intersectPeriods(common, ps)
	}
	if r, ok := j.t0Bounds(); ok {
		common = intersectPeriods(common, []period{r})
	}
	gen := j.sites.src
	gs := gen.s
	res, start, end := gs.TimeResolutionMinutes*60, gs.IntervalStartMinutes*60, gs.IntervalEndMinutes*60
	per, anyNaN, err := j.generationPeriods(gen, res, start, end)
	if err != nil {
		return err
	}
	kept := ocfKeeps(gen.ids)
	var locs []int
	var locPeriods [][]period
	for i, sys := range j.sites.sys {
		if kept[sys] {
			locs = append(locs, i)
			locPeriods = append(locPeriods, per[sys])
		}
	}
	if len(locs) == 0 {
		return j.cfg.Errorf(a.Field+".locations", "rules = %q: no location but location_id 0, which ocf-data-sampler drops when there are others", RulesOCF)
	}
	if anyNaN {
		j.space = newPairSpace(common, res, locs, nil, locPeriods)
	} else {
		j.space = newPairSpace(common, res, locs, contiguousT0Periods(gen.times.vals, res, start, end), nil)
	}
	if j.space.mode == SpaceComplete && len(locs) == j.sites.n() {
		j.cands = anchorCandidates(&j.anchor.times, j.space.shared)
	}
	if j.space.n() == 0 {
		genCount := 0
		for _, lp := range locPeriods {
			genCount += len(lp)
		}
		counts = append(counts, fmt.Sprintf("%s (%s) %d over its locations", gs.Field, gs.Name, genCount))
		return j.cfg.Errorf("source", "no valid (t0, location) pair under rules = %q (%s mode, %d locations): the contiguous t0 periods (%s; a period needs a run of times longer than the window, without a gap) do not overlap%s on the generation's %d-minute grid",
			RulesOCF, j.space.mode, len(locs), strings.Join(counts, ", "), j.rangeNote(), gs.TimeResolutionMinutes)
	}
	return nil
}

// anchorCandidates are the anchor time indices of the t0s of g when every one of them is an
// anchor time (the usual case: the generation's grid is coarser than the satellite's); nil
// otherwise. With every location paired with every t0, ocf's pairs are then exactly the
// t0 candidates times the sites, gobatch's own site-anchored sample space, so that locality
// sampling and the epochs' block shuffle serve them unchanged (drawsPairs).
func anchorCandidates(times *timeAxis, g t0Grid) []int32 {
	out := make([]int32, 0, g.n())
	for i := uint64(0); i < g.n(); i++ {
		ti, ok := times.index(g.at(i))
		if !ok {
			return nil
		}
		out = append(out, int32(ti))
	}
	return out
}

// drawsPairs says whether examples are drawn from ocf's pairs one by one (placePair): under
// rules = "ocf" unless the pairs are the t0 candidates times the sites (anchorCandidates).
func (j *Job) drawsPairs() bool { return j.space != nil && j.cands == nil }

// rangeNote names [batch] t0_start .. t0_end when they are set.
func (j *Job) rangeNote() string {
	if j.cfg.Batch.T0Start == nil && j.cfg.Batch.T0End == nil {
		return ""
	}
	return fmt.Sprintf(" within t0_start .. t0_end (%s .. %s)", fmtBound(j.cfg.Batch.T0Start), fmtBound(j.cfg.Batch.T0End))
}

// t0Bounds is [batch] t0_start .. t0_end as a period of whole seconds (both included); false
// when neither is set.
func (j *Job) t0Bounds() (period, bool) {
	b := j.cfg.Batch
	if b.T0Start == nil && b.T0End == nil {
		return period{}, false
	}
	p := period{math.MinInt64, math.MaxInt64}
	if s := b.T0Start; s != nil {
		p.start = s.Unix()
		if s.Nanosecond() > 0 {
			p.start++
		}
	}
	if e := b.T0End; e != nil {
		p.end = e.Unix()
	}
	return p, true
}

// nwpPeriods are NWP source n's t0 periods: its init times, its staleness under ocf's rules
// (maxStaleness: max_staleness_minutes or ocf's default, checked against the steps when the
// source was opened), its largest dropout and its first step.
func (j *Job) nwpPeriods(n *nwpSource) ([]period, error) {
	sp := n.s
	stale := n.maxStaleness()
	var maxDropout int64
	for _, d := range sp.DropoutTimedeltasMinutes {
		maxDropout = max(maxDropout, -d*60)
	}
	if maxDropout > stale || stale < 0 {
		return nil, j.cfg.Errorf(sp.Field+".dropout_timedeltas_minutes", "the largest dropout (%d min) must be between 0 and the staleness (%d min), as ocf-data-sampler requires",
			maxDropout/60, stale/60)
	}
	return nonEmpty(nwpT0Periods(n.inits.vals, sp.IntervalStartMinutes*60, stale, maxDropout, n.steps.vals[0])), nil
}

// generationPeriods reads the generation's data array chunk by chunk and returns every
// system's t0 periods from its NaN-free times, and whether any system that ocf keeps (all but
// location 0, ocfKeeps) has a NaN. ocf reads the whole array into memory; here only a chunk
// and the periods are held.
func (j *Job) generationPeriods(p *pointSource, res, start, end int64) (per [][]period, anyNaN bool, err error) {
	c := p.c
	nt, nk := c.shape[0], c.shape[1] // canonical (time, system)
	ct, ck := c.chunks[0], c.chunks[1]
	kept := ocfKeeps(p.ids)
	runs := make([]*runFinder, nk)
	for k := range runs {
		runs[k] = newRunFinder(res, start, end)
	}
	bp := c.nativeBuf()
	defer c.scratch.Put(bp)
	vals := make([]float32, c.elems)
	idx, sidx := make([]int, 2), make([]int, c.storeRank)
	for ti := 0; ti < c.grid[0]; ti++ { // time chunks in order: each system's times ascend
		for ki := 0; ki < c.grid[1]; ki++ {
			idx[0], idx[1] = ti, ki
			found, err := c.decodeNow(c.storeIndex(idx, sidx), *bp)
			if err != nil {
				return nil, false, j.cfg.Errorf(p.s.Field+".store", "%s: chunk %v: reading the generation to find ocf's valid t0s: %v", c.what, sidx, err)
			}
			if !found { // not stored: the fill value, NaN for ocf (xarray masks it)
				for i := range vals {
					vals[i] = float32(math.NaN())
				}
			} else {
				c.convert(vals, *bp)
			}
			for dt := 0; dt < ct && ti*ct+dt < nt; dt++ {
				t := p.times.vals[ti*ct+dt]
				for dk := 0; dk < ck && ki*ck+dk < nk; dk++ {
					k := ki*ck + dk
					if v := vals[dt*ck+dk]; v != v {
						anyNaN = anyNaN || kept[k]
						continue
					}
					runs[k].add(t)
				}
			}
		}
	}
	per = make([][]period, nk)
	for k, r := range runs {
		per[k] = r.periods()
	}
	return per, anyNaN, nil
}

// ocfKeeps says which systems ocf keeps as locations: all, except that with more than one
// system and an id 0 among them (a national total, "for summation models") the ids below 1
// go, as ocf's label slice location_id >= 1 on its sorted ids does. Such a location stays
// among the job's sites but has no pair, so no example is drawn there.
func ocfKeeps(ids []int64) []bool {
	zero := false
	for _, id := range ids {
		zero = zero || id == 0
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = !zero || len(ids) < 2 || id >= 1
	}
	return out
}

// placePair places an example on pair s: its t0, its location and that location's centre;
// its anchor time index when t0 is an anchor time (-1 otherwise).
func (j *Job) placePair(ex *example, s uint64) {
	t0, loc := j.space.pair(s)
	ex.t0, ex.site = t0, loc
	ex.ti = -1
	if i, ok := j.anchor.times.index(t0); ok {
		ex.ti = i
	}
	ex.cy, ex.cx = j.sites.centre(loc)
}

// SpaceInfo describes the sample space under rules = "ocf" (nil otherwise): the mode, the
// pairs and the filled periods they come from.
type SpaceInfo struct {
	Rules   string `json:"rules"`
	Mode    string `json:"mode"` // SpaceComplete or SpacePerLocation
	Pairs   uint64 `json:"pairs"`
	Periods int    `json:"periods"`
	// Locations is the number of locations that take part (not ocf's dropped location 0).
	Locations int `json:"locations"`
	// T0s is the number of valid t0s every location shares (complete mode; 0 otherwise).
	T0s uint64 `json:"t0s,omitempty"`
}

// SampleSpace describes the job's (t0, location) pairs under rules = "ocf"; nil under
// gobatch's rules.
func (j *Job) SampleSpace() *SpaceInfo {
	if j.space == nil {
		return nil
	}
	s := &SpaceInfo{Rules: RulesOCF, Mode: j.space.mode, Pairs: j.space.n(), Periods: j.space.periods, Locations: len(j.space.locs)}
	if j.space.mode == SpaceComplete {
		s.T0s = j.space.shared.n()
	}
	return s
}
