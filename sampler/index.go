package sampler

import (
	"fmt"
	"math"

	"github.com/gobatch/gobatch/sampler/rules"
)

// Index arithmetic: pure functions of coordinates, tested on their own (index_test.go).

// floorDiv is a / b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 { return rules.FloorDiv(a, b) }

// axis is a regular coordinate axis: value(i) = start + i*step for i in [0, n).
type axis struct {
	start, step int64
	n           int
}

// regularAxis checks that vals is strictly increasing with a constant step.
func regularAxis(vals []int64) (axis, error) {
	switch len(vals) {
	case 0:
		return axis{}, fmt.Errorf("empty coordinate")
	case 1:
		return axis{start: vals[0], step: 1, n: 1}, nil
	}
	step := vals[1] - vals[0]
	if step <= 0 {
		return axis{}, fmt.Errorf("not increasing at index 1 (%d then %d)", vals[0], vals[1])
	}
	for i := 2; i < len(vals); i++ {
		if vals[i]-vals[i-1] != step {
			return axis{}, fmt.Errorf("not regular at index %d: step %d, expected %d", i, vals[i]-vals[i-1], step)
		}
	}
	return axis{start: vals[0], step: step, n: len(vals)}, nil
}

// index returns i with value(i) == v, or false when v is not on the axis.
func (a axis) index(v int64) (int, bool) {
	d := v - a.start
	if d < 0 || d%a.step != 0 {
		return 0, false
	}
	i := d / a.step
	if i >= int64(a.n) {
		return 0, false
	}
	return int(i), true
}

func (a axis) value(i int) int64 { return a.start + int64(i)*a.step }

// timeAxis is a strictly ascending time coordinate: unix seconds (satellite and PV times, NWP
// init times) or seconds of lead (NWP steps). Real archives have gaps (a missing image, a
// missing run) and may change step; a regular axis (the usual case) answers by arithmetic,
// any other by binary search.
type timeAxis struct {
	vals    []int64
	regular bool
	reg     axis  // the arithmetic form when regular
	minStep int64 // the smallest step (1 for a single value): bounds the searches
}

// newTimeAxis checks that vals is strictly ascending. An error names the first index at fault
// and its values (fmtv formats one).
func newTimeAxis(vals []int64, fmtv func(int64) string) (timeAxis, error) {
	if len(vals) == 0 {
		return timeAxis{}, fmt.Errorf("empty coordinate")
	}
	t := timeAxis{vals: vals, minStep: math.MaxInt64}
	for i := 1; i < len(vals); i++ {
		d := vals[i] - vals[i-1]
		if d <= 0 {
			return timeAxis{}, fmt.Errorf("not strictly ascending at index %d (%s, then %s at index %d)",
				i, fmtv(vals[i-1]), fmtv(vals[i]), i)
		}
		t.minStep = min(t.minStep, d)
	}
	if len(vals) == 1 {
		t.minStep = 1
	}
	if reg, err := regularAxis(vals); err == nil {
		t.regular, t.reg = true, reg
	}
	return t, nil
}

func (t *timeAxis) len() int          { return len(t.vals) }
func (t *timeAxis) value(i int) int64 { return t.vals[i] }
func (t *timeAxis) last() int64       { return t.vals[len(t.vals)-1] }

// index returns i with value(i) == v, or false when v is not on the axis.
func (t *timeAxis) index(v int64) (int, bool) {
	if t.regular {
		return t.reg.index(v)
	}
	return t.search(0, len(t.vals), v)
}

// search looks for v in vals[lo:hi].
func (t *timeAxis) search(lo, hi int, v int64) (int, bool) {
	end := hi
	for lo < hi { // invariant: vals[:lo] < v <= vals[hi:end]
		m := int(uint(lo+hi) >> 1)
		if t.vals[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < end && t.vals[lo] == v
}

// span is where the steps of a window are on a time axis: step k is at index
// first + k*stride, or at[k] when at is not nil (a window across a change of the axis's step,
// whose indices are not evenly spaced). Indices always ascend.
type span struct {
	first, stride int
	at            []int
}

func (s span) index(k int) int {
	if s.at != nil {
		return s.at[k]
	}
	return s.first + k*s.stride
}

// steps places the n times start, start + res, ... on the axis. missing is -1 when every one
// is on the axis, else the first k whose time is not (and the span is unusable). When the
// indices are not evenly spaced they are written to at (len >= n) and the span refers to it;
// with at nil such a window is only checked (for callers that ask whether it fits).
func (t *timeAxis) steps(start, res int64, n int, at []int) (sp span, missing int) {
	if t.regular {
		// The fast path: arithmetic only. When it fails, the search finds the missing step.
		if first, stride, ok := seriesIndices(t.reg, timeWindow{n: n, res: res}, start); ok {
			return span{first: first, stride: stride}, -1
		}
	}
	return t.searchSteps(start, res, n, at)
}

// searchSteps is steps by search (any ascending axis).
func (t *timeAxis) searchSteps(start, res int64, n int, at []int) (sp span, missing int) {
	i, ok := t.index(start)
	if !ok {
		return span{}, 0
	}
	sp = span{first: i}
	even := true
	prev := i
	for k := 1; k < n; k++ {
		v := start + int64(k)*res
		// Values ascend by at least minStep, so v is at most (v - vals[prev]) / minStep
		// indices after prev: a short search, not one over the whole axis.
		ahead := (v - t.vals[prev]) / t.minStep
		hi := len(t.vals)
		if ahead >= 0 && ahead < int64(hi-prev) {
			hi = prev + 1 + int(ahead)
		}
		j, ok := t.search(prev+1, hi, v)
		if !ok {
			return span{}, k
		}
		if k == 1 {
			sp.stride = j - i
		} else if j-prev != sp.stride {
			even = false
		}
		if at != nil {
			at[k] = j
		}
		prev = j
	}
	if !even {
		if at == nil {
			return span{}, -1
		}
		at[0] = i
		sp.at = at[:n]
	}
	return sp, -1
}

// place finds window w around t0 on the axis (see steps).
func (t *timeAxis) place(w timeWindow, t0 int64, at []int) (span, int) {
	return t.steps(w.from(t0)+w.first*w.res, w.res, w.n, at)
}

// timeWindow is a source's window relative to t0: n steps of res seconds starting at
// from(t0) + first*res.
type timeWindow struct {
	first int64 // interval_start / resolution (a whole number of steps, may be negative)
	n     int   // (interval_end - interval_start) / resolution + 1
	res   int64 // seconds
	// align lays the window for a t0 (rules.Rules.WindowT0): t0 itself, or t0 rounded onto
	// the source's time grid; nil: t0 itself.
	align rules.Rules
}

// from is the time the window is laid from for t0 (rules.Rules.WindowT0).
func (w timeWindow) from(t0 int64) int64 {
	if w.align == nil {
		return t0
	}
	return w.align.WindowT0(t0, w.res)
}

// cutFrom is a dropout cut-off (seconds after t0, or rules.NoDropout) relative to the time
// the window is laid from, which DropoutFills counts from.
func (w timeWindow) cutFrom(t0, cut int64) int64 {
	if cut == rules.NoDropout {
		return cut
	}
	return cut - (w.from(t0) - t0)
}

// seriesIndices places a time window on a regular time axis (timeAxis's fast path): the
// index of its first step and the index stride between steps. ok is false when a step falls outside the axis.
func seriesIndices(a axis, w timeWindow, t0 int64) (first, stride int, ok bool) {
	if w.res%a.step != 0 {
		return 0, 0, false
	}
	i, ok := a.index(t0 + w.first*w.res)
	if !ok {
		return 0, 0, false
	}
	stride = int(w.res / a.step)
	if i+(w.n-1)*stride >= a.n {
		return 0, 0, false
	}
	return i, stride, true
}

// latestAtOrBefore returns the largest i with sorted[i] <= t, or -1. sorted is ascending.
func latestAtOrBefore(sorted []int64, t int64) int { return rules.LatestAtOrBefore(sorted, t) }

// nwpRule selects an NWP run and its lead steps for a t0 (all times in seconds).
type nwpRule struct {
	minStale int64 // the run's init time is <= t0 - minStale
	maxStale int64 // and t0 - init <= maxStale; 0 = no limit
	window   timeWindow
}

// nwpChoice is the selected run and where the window's lead steps are on the step axis.
type nwpChoice struct {
	run   int // index into init times
	steps span
}

// lead is the window's first lead for a run initialised at init: t0 + first*res - init rounded
// down to a whole resolution.
func (r nwpRule) lead(init, t0 int64) int64 {
	res := r.window.res
	return floorDiv(t0+r.window.first*res-init, res) * res
}

// choose applies the rule: the latest run with init <= t0 - minStale (and t0 - init <=
// maxStale) whose n leads lead(init, t0), + res, ... are all on the step axis. When the latest
// run lacks one (a truncated run) an older run is tried, and so on within maxStale: older runs
// need longer leads, so the walk ends once the first lead passes the last step. A missing run
// (a gap in the init times) is simply not among the runs. at is scratch for a span whose
// indices are not evenly spaced (see timeAxis.steps).
func (r nwpRule) choose(inits []int64, steps *timeAxis, t0 int64, at []int) (nwpChoice, bool) {
	for run := latestAtOrBefore(inits, t0-r.minStale); run >= 0; run-- {
		init := inits[run]
		if r.maxStale > 0 && t0-init > r.maxStale {
			break
		}
		lead := r.lead(init, t0)
		if lead > steps.last() {
			break
		}
		if sp, missing := steps.steps(lead, r.window.res, r.window.n, at); missing < 0 {
			return nwpChoice{run: run, steps: sp}, true
		}
	}
	return nwpChoice{}, false
}

// nearestIndex is the index of the coordinate nearest v; on a tie, the lower index. NaN
// coordinates are never chosen. It returns -1 for an empty or all-NaN coordinate.
func nearestIndex(coord []float64, v float64) int {
	best, bestD := -1, math.Inf(1)
	for i, c := range coord {
		d := math.Abs(c - v)
		if d < bestD { // strict: a later equal distance keeps the lower index
			best, bestD = i, d
		}
	}
	return best
}

// cropStart is the first index of a crop of size n centred (by the nearest index near) in an
// axis of length length: near - n/2, clamped into [0, length-n].
func cropStart(near, n, length int) int {
	s := near - n/2
	if s > length-n {
		s = length - n
	}
	if s < 0 {
		s = 0
	}
	return s
}

// nearestK writes into out (len k) the indices of the k points nearest (x, y, z) by euclidean
// distance, in ascending index order; zs nil: in the plane (x, y) (z is ignored). Equal
// distances prefer the lower index. Points with a NaN coordinate are skipped. dist is scratch of
// len k. It returns false when fewer than k points qualify.
func nearestK(xs, ys, zs []float64, x, y, z float64, out []int32, dist []float64) bool {
	k := len(out)
	found := 0
	for i := range xs {
		dx, dy := xs[i]-x, ys[i]-y
		d := dx*dx + dy*dy
		if zs != nil {
			dz := zs[i] - z
			d += dz * dz
		}
		if d != d { // NaN
			continue
		}
		if found == k && d >= dist[k-1] {
			continue
		}
		// Insert, keeping (dist, index) ascending; an equal distance goes after the existing
		// (lower) indices because i only grows.
		j := found
		if found < k {
			found++
		} else {
			j = k - 1
		}
		for j > 0 && dist[j-1] > d {
			dist[j], out[j] = dist[j-1], out[j-1]
			j--
		}
		dist[j], out[j] = d, int32(i)
	}
	if found < k {
		return false
	}
	// Ascending index order (insertion sort: k is small).
	for i := 1; i < k; i++ {
		v := out[i]
		j := i
		for j > 0 && out[j-1] > v {
			out[j] = out[j-1]
			j--
		}
		out[j] = v
	}
	return true
}
