package ocf

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gobatch/gobatch/sampler/rules"
)

// The sample space under ocf's rules (docs/OCF.md, "Sample space"): ocf-data-sampler 1.0.24's
// valid (t0, location) pairs. Each source gives contiguous t0 periods (periods.go): the anchor
// (the satellite) and the generation (the locations source) from their time coordinates, every
// NWP from its init times and staleness; the periods are intersected and filled on the
// generation's resolution grid. When the generation holds no NaN (complete mode) every location
// pairs with every t0; otherwise (per-location mode) each location's own NaN-free generation
// times give its periods. t0_start .. t0_end restrict the t0s as ocf's time_periods do.

// Sample space modes (rules.SpaceInfo.Mode).
const (
	SpaceComplete    = "complete"     // no NaN in the generation: every location x every valid t0
	SpacePerLocation = "per-location" // NaN in the generation: each location's own t0s
)

// pairSpace is the set of (t0, location) pairs, numbered: in complete mode pair i is location
// locs[i / n(t0s)] at t0 i mod n(t0s) (ocf's order); in per-location mode the pairs are ordered
// by location, then t0. locs are the location indices ocf keeps (not location 0,
// keptLocations). It holds periods, never a table of pairs.
type pairSpace struct {
	mode    string
	locs    []int    // the location indices that have pairs, ascending
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

func (s *pairSpace) N() uint64                         { return s.n() }
func (s *pairSpace) Pair(i uint64) (t0 int64, loc int) { return s.pair(i) }

// Runs implements rules.TimeOrdered: a run is a location's pairs.
func (s *pairSpace) Runs() int { return len(s.locs) }

// Before implements rules.TimeOrdered.
func (s *pairSpace) Before(k int, t int64) uint64 {
	if s.mode == SpaceComplete {
		return uint64(k)*s.shared.n() + s.shared.before(t)
	}
	return s.cum[k] + s.perLoc[k].before(t)
}

func (s *pairSpace) Grid() ([]int64, []int) {
	if s.mode != SpaceComplete {
		return nil, nil
	}
	out := make([]int64, 0, s.shared.n())
	for i := range s.shared.n() {
		out = append(out, s.shared.at(i))
	}
	return out, slices.Clone(s.locs)
}

func (s *pairSpace) Info() rules.SpaceInfo {
	info := rules.SpaceInfo{Rules: RulesName, Mode: s.mode, Pairs: s.n(), Periods: s.periods, Locations: len(s.locs)}
	if s.mode == SpaceComplete {
		info.T0s = s.shared.n()
	}
	return info
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

// Pairs builds ocf's pairs: the periods of the anchor and of every NWP, t0_start .. t0_end, and
// the generation's, as ocf finds them.
func (ocfRules) Pairs(in *rules.SpaceInput) (rules.PairSpace, error) {
	common := []period{{math.MinInt64, math.MaxInt64}} // every t0 until a source restricts it
	var counts []string                                // periods per source, for the error
	if a := in.Anchor; a != nil {                      // the satellite; none without one
		aw := a.Window
		common = contiguousT0Periods(a.Times, aw.Res, aw.First*aw.Res, (aw.First+int64(aw.N)-1)*aw.Res)
		counts = append(counts, fmt.Sprintf("%s (%s) %d", a.Field, a.Name, len(common)))
	}
	for _, n := range in.NWP {
		ps, err := nwpPeriods(n)
		if err != nil {
			return nil, err
		}
		counts = append(counts, fmt.Sprintf("%s (%s) %d", n.Field, n.Name, len(ps)))
		common = intersectPeriods(common, ps)
	}
	if in.T0Periods != nil {
		ps := make([]period, len(in.T0Periods))
		for i, r := range in.T0Periods {
			ps[i] = period{r[0], r[1]}
		}
		common = intersectPeriods(common, ps)
	}
	gen := in.Locations
	gw := gen.Window
	res, start, end := gw.Res, gw.First*gw.Res, (gw.First+int64(gw.N)-1)*gw.Res
	if n := len(gen.Times); n > 0 && in.Valid != nil { // within the generation's times: finite
		common = keepValid(intersectPeriods(common, []period{{gen.Times[0] - start, gen.Times[n-1] - end}}), res, in.Valid)
	}
	per, anyNaN, err := generationPeriods(gen, res, start, end)
	if err != nil {
		return nil, err
	}
	kept := keptLocations(gen.IDs)
	var locs []int
	var locPeriods [][]period
	for i, sys := range gen.Sites {
		if kept[sys] {
			locs = append(locs, i)
			locPeriods = append(locPeriods, per[sys])
		}
	}
	if len(locs) == 0 {
		return nil, &rules.KeyError{Field: gen.Field, Msg: fmt.Sprintf("rules = %q: no location but location_id 0, which ocf-data-sampler drops when there are others", RulesName)}
	}
	var s *pairSpace
	if anyNaN {
		s = newPairSpace(common, res, locs, nil, locPeriods)
	} else {
		s = newPairSpace(common, res, locs, contiguousT0Periods(gen.Times, res, start, end), nil)
	}
	if s.n() == 0 {
		genCount := 0
		for _, lp := range locPeriods {
			genCount += len(lp)
		}
		counts = append(counts, fmt.Sprintf("%s (%s) %d over its locations", gen.Field, gen.Name, genCount))
		return nil, &rules.KeyError{Field: "source", Msg: fmt.Sprintf("no valid (t0, location) pair under rules = %q (%s mode, %d locations): the contiguous t0 periods (%s; a period needs a run of times longer than the window, without a gap) do not overlap%s on the generation's %d-minute grid",
			RulesName, s.mode, len(locs), strings.Join(counts, ", "), in.T0PeriodsNote, gen.ResMin)}
	}
	return s, nil
}

// keepValid splits periods at the t0s of the grid of res that valid refuses: ocf's periods
// accept t0s whose ceil'd NWP targets reach past every run's last step (ocf-data-sampler's
// label slice then cuts the window short), which no batch of one shape can hold.
func keepValid(ps []period, res int64, valid func(int64) bool) []period {
	var out []period
	for _, p := range ps {
		open := false
		for t := CeilTo(p.start, res); t <= p.end; t += res {
			switch ok := valid(t); {
			case ok && open:
				out[len(out)-1].end = t
			case ok:
				out, open = append(out, period{t, t}), true
			default:
				open = false
			}
		}
	}
	return out
}

// nwpPeriods are an NWP source's t0 periods: its init times, the staleness of its window rule,
// its largest dropout and its first step.
func nwpPeriods(n rules.NWPSeries) ([]period, error) {
	stale := n.MaxStaleness
	var maxDropout int64
	for _, d := range n.DropoutTimedelta {
		maxDropout = max(maxDropout, -d*60)
	}
	if maxDropout > stale || stale < 0 {
		return nil, &rules.KeyError{Field: n.Field + ".dropout_timedeltas_minutes", Msg: fmt.Sprintf(
			"the largest dropout (%d min) must be between 0 and the staleness (%d min), as ocf-data-sampler requires", maxDropout/60, stale/60)}
	}
	return nonEmpty(nwpT0Periods(n.Inits, n.IntervalStart, stale, maxDropout, n.FirstStep)), nil
}

// generationPeriods returns every system's t0 periods from its NaN-free times, and whether any
// system that ocf keeps (all but location 0, keptLocations) has a NaN. ocf reads the whole
// array into memory; here the job scans it chunk by chunk and only the periods are held.
func generationPeriods(gen rules.LocationSeries, res, start, end int64) (per [][]period, anyNaN bool, err error) {
	kept := keptLocations(gen.IDs)
	runs := make([]*runFinder, len(gen.IDs))
	for k := range runs {
		runs[k] = newRunFinder(res, start, end)
	}
	err = gen.Scan(func(sys int, t int64) { runs[sys].add(t) }, func(sys int) { anyNaN = anyNaN || kept[sys] })
	if err != nil {
		return nil, false, err
	}
	per = make([][]period, len(runs))
	for k, r := range runs {
		per[k] = r.periods()
	}
	return per, anyNaN, nil
}

// keptLocations says which systems ocf keeps as locations: all, except that with more than one
// system and an id 0 among them (a national total, "for summation models") the ids below 1 go,
// as ocf's label slice location_id >= 1 on its sorted ids does. Such a location stays among
// the job's sites but has no pair, so no example is drawn there.
func keptLocations(ids []int64) []bool {
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
