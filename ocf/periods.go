package ocf

import "sort"

// Contiguous t0 periods: the arithmetic ocf-data-sampler 1.0.24 finds its valid t0s with
// (docs/OCF.md, "Sample space"). Pure functions of unix seconds, tested on their own
// (periods_test.go); the sample space is built from them (space.go).

// period is the closed range of t0s [start, end], unix seconds; empty when start > end.
type period struct{ start, end int64 }

// contiguousT0Periods is ocf's find_contiguous_t0_periods: times (strictly ascending) are cut
// wherever two consecutive times are more than res apart; a run is kept only when it has more
// timestamps than the window has steps ((end-start)/res + 1, strictly more: a run exactly one
// window long is dropped), and run [a, b] becomes the t0 period [a - start, b - end] (start,
// end: the window's offsets from t0), dropped when empty.
func contiguousT0Periods(times []int64, res, start, end int64) []period {
	r := newRunFinder(res, start, end)
	for _, t := range times {
		r.add(t)
	}
	return r.periods()
}

// runFinder is contiguousT0Periods fed one time at a time (ascending), so that a series read
// chunk by chunk needs no copy of its times.
type runFinder struct {
	res, start, end int64
	minLen          int
	first, last     int64 // the current run
	n               int   // its length; 0: none yet
	out             []period
}

func newRunFinder(res, start, end int64) *runFinder {
	return &runFinder{res: res, start: start, end: end, minLen: int((end-start)/res) + 1}
}

// add appends time t, later than every time before.
func (r *runFinder) add(t int64) {
	if r.n > 0 && t-r.last <= r.res {
		r.last, r.n = t, r.n+1
		return
	}
	r.flush()
	r.first, r.last, r.n = t, t, 1
}

// flush ends the current run, keeping its period when the run is long enough.
func (r *runFinder) flush() {
	if r.n > r.minLen {
		if p := (period{r.first - r.start, r.last - r.end}); p.start <= p.end {
			r.out = append(r.out, p)
		}
	}
	r.n = 0
}

// periods ends the last run and returns the periods.
func (r *runFinder) periods() []period {
	r.flush()
	return r.out
}

// nwpT0Periods is ocf's find_contiguous_t0_periods_nwp over a forecast's init times
// (ascending): a run may serve t0s from init + buffer to init + maxStale, where buffer =
// max(firstStep - start, maxDropout); the period goes on while each next run takes over in
// time (the previous run's last t0 is at least the next init + max(maxDropout, firstStep)),
// else it ends at the previous run's last t0 and a new one starts. Periods may be empty, as
// ocf's are (they then hold no t0). maxStale is the source's staleness (maxStaleness).
func nwpT0Periods(inits []int64, start, maxStale, maxDropout, firstStep int64) []period {
	if len(inits) == 0 {
		return nil
	}
	buffer := max(firstStep-start, maxDropout)
	cur := period{inits[0] + buffer, inits[0] + maxStale}
	var out []period
	for _, init := range inits[1:] {
		if cur.end < init+max(maxDropout, firstStep) {
			out = append(out, cur)
			cur.start = init + buffer
		}
		cur.end = init + maxStale
	}
	return append(out, cur)
}

// intersectPeriods is the intersection of two lists of periods (each sorted and disjoint),
// sorted by start; empty periods are left out (they hold no t0).
func intersectPeriods(a, b []period) []period {
	var out []period
	for i, k := 0, 0; i < len(a) && k < len(b); {
		p := period{max(a[i].start, b[k].start), min(a[i].end, b[k].end)}
		if p.start <= p.end {
			out = append(out, p)
		}
		if a[i].end < b[k].end {
			i++
		} else {
			k++
		}
	}
	return out
}

// nonEmpty keeps the periods with start <= end, in order.
func nonEmpty(ps []period) []period {
	out := ps[:0:0]
	for _, p := range ps {
		if p.start <= p.end {
			out = append(out, p)
		}
	}
	return out
}

// t0Grid is a list of periods filled on a time grid, as ocf's fill_time_periods: period i
// holds the t0s first[i], first[i] + res, ... up to its end, and the t0s are numbered in
// period order. It stores O(periods), not O(t0s).
type t0Grid struct {
	res   int64
	first []int64  // each non-empty period's first t0 (its start rounded up to the grid)
	cum   []uint64 // cum[i]: t0s before period i; cum[len(first)] is the total
}

// fillPeriods fills ps (sorted, disjoint) on the grid of res.
func fillPeriods(ps []period, res int64) t0Grid {
	g := t0Grid{res: res, cum: []uint64{0}}
	for _, p := range ps {
		f := CeilTo(p.start, res)
		if f > p.end {
			continue
		}
		g.first = append(g.first, f)
		g.cum = append(g.cum, g.cum[len(g.cum)-1]+uint64((p.end-f)/res)+1)
	}
	return g
}

// n is the number of t0s.
func (g t0Grid) n() uint64 { return g.cum[len(g.cum)-1] }

// periods is the number of non-empty periods.
func (g t0Grid) periods() int { return len(g.first) }

// before is the number of t0s before t.
func (g t0Grid) before(t int64) uint64 {
	k := sort.Search(len(g.first), func(k int) bool { return g.first[k] >= t }) - 1 // the last period starting before t
	if k < 0 {
		return 0
	}
	in := uint64((t - g.first[k] + g.res - 1) / g.res) // its t0s before t, were it endless
	return g.cum[k] + min(in, g.cum[k+1]-g.cum[k])
}

// at is t0 number i (< n).
func (g t0Grid) at(i uint64) int64 {
	k := sort.Search(len(g.first), func(k int) bool { return g.cum[k+1] > i })
	return g.first[k] + int64(i-g.cum[k])*g.res
}
