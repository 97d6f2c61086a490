package sampler

import (
	"fmt"
	"math"
)

// Index arithmetic: pure functions of coordinates, tested on their own (index_test.go).

// floorDiv is a / b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

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

// timeWindow is a source's window relative to t0: n steps of res seconds starting at
// t0 + first*res.
type timeWindow struct {
	first int64 // interval_start / resolution (a whole number of steps, may be negative)
	n     int   // (interval_end - interval_start) / resolution + 1
	res   int64 // seconds
}

// seriesIndices places a time window on a regular time axis: the index of its first step and
// the index stride between steps. ok is false when a step falls outside the axis.
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
func latestAtOrBefore(sorted []int64, t int64) int {
	lo, hi := 0, len(sorted) // invariant: sorted[:lo] <= t < sorted[hi:]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if sorted[m] <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// nwpRule selects an NWP run and its lead steps for a t0 (all times in seconds).
type nwpRule struct {
	minStale int64 // the run's init time is <= t0 - minStale
	maxStale int64 // and t0 - init <= maxStale; 0 = no limit
	window   timeWindow
}

// nwpChoice is the selected run and the step indices of the window.
type nwpChoice struct {
	run        int // index into init times
	step0      int // step index of the first window step
	stepStride int
}

// choose applies the rule: the latest run with init <= t0 - minStale; the first lead
// floor((t0 + first*res - init) / res) in whole resolutions; n consecutive leads, each of which
// must be on the step axis.
func (r nwpRule) choose(inits []int64, steps axis, t0 int64) (nwpChoice, bool) {
	run := latestAtOrBefore(inits, t0-r.minStale)
	if run < 0 {
		return nwpChoice{}, false
	}
	init := inits[run]
	if r.maxStale > 0 && t0-init > r.maxStale {
		return nwpChoice{}, false
	}
	res := r.window.res
	lead := floorDiv(t0+r.window.first*res-init, res) * res
	if res%steps.step != 0 {
		return nwpChoice{}, false
	}
	s0, ok := steps.index(lead)
	if !ok {
		return nwpChoice{}, false
	}
	stride := int(res / steps.step)
	if s0+(r.window.n-1)*stride >= steps.n {
		return nwpChoice{}, false
	}
	return nwpChoice{run: run, step0: s0, stepStride: stride}, true
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

// nearestK writes into out (len k) the indices of the k points nearest (x, y) by euclidean
// distance, in ascending index order. Equal distances prefer the lower index. Points with a NaN
// coordinate are skipped. dist is scratch of len k. It returns false when fewer than k points
// qualify.
func nearestK(xs, ys []float64, x, y float64, out []int32, dist []float64) bool {
	k := len(out)
	found := 0
	for i := range xs {
		dx, dy := xs[i]-x, ys[i]-y
		d := dx*dx + dy*dy
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
