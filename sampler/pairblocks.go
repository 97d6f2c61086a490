package sampler

import (
	"math"
	"sort"
	"sync"

	"github.com/gobatch/gobatch/sampler/rules"
)

// Time segments of a rule set's own pairs (ocf's per-location mode: each location its own
// t0s), for the epochs' block shuffle and for locality sampling (drawPair). Such pairs are
// numbered in runs (a location's pairs, in ascending t0: rules.TimeOrdered), not by time, so a
// time segment is no range of pair numbers but one range of each run. The anchor's time axis
// is cut into segments as for t0 candidates (locality.go, over the anchor times at which every
// window fits), and segment i holds the pairs whose t0 lies in [from[i], to[i]): the segments
// tile the whole time line, so every pair is in exactly one. The block shuffle itself
// (epochs.go) is unchanged: it places samples by their rank in time order (blocks.lo, the
// pairs of earlier segments), and pairSegments.pick turns a segment and a rank inside it into
// a pair number: run k's share of the segment is found from the runs' counts in it (a prefix
// sum per segment, computed when a segment is first drawn from and kept while a few are in
// use), never from a table of the pairs (years of t0s times thousands of locations).

// pairSegments are the time segments of a TimeOrdered pair space.
type pairSegments struct {
	space    rules.TimeOrdered
	n        []uint64 // pairs of segment i
	from, to []int64  // segment i holds the pairs with t0 in [from[i], to[i])
	keep     int      // prefix sums kept (segments of a few groups)

	mu     sync.Mutex
	prefix map[int][]uint64 // segment -> pairs of runs before run k in it, k = 0 .. Runs()
}

// segmentTimes are the anchor time indices the time segments are cut from: the t0
// candidates, or for a rule set's pairs (which need not be anchor times) the anchor times at
// which every source's window fits, found once.
func (j *Job) segmentTimes() []int32 {
	if j.cands != nil {
		return j.cands
	}
	if j.pairTimes == nil {
		j.pairTimes = []int32{}
		for i := range j.times.len() {
			if j.fitsAll(j.times.value(i)) {
				j.pairTimes = append(j.pairTimes, int32(i))
			}
		}
	}
	return j.pairTimes
}

// fitsAll says whether every source's window can be laid at t0.
func (j *Job) fitsAll(t0 int64) bool {
	for _, s := range j.srcs {
		if !s.fits(t0) {
			return false
		}
	}
	return true
}

// pairsInSegments returns the rule set's pairs when they can be drawn in time segments (the
// epochs' block shuffle, locality sampling): a space numbered in time-ordered runs; nil
// otherwise.
func (j *Job) pairsInSegments() rules.TimeOrdered {
	ts, ok := j.space.(rules.TimeOrdered)
	if !ok || !j.drawsPairs() || len(j.segmentTimes()) == 0 {
		return nil
	}
	return ts
}

// segmentStarts are the bounds of l's segments for a rule set's pairs: segment i begins at its
// first anchor time (the first at the start of time) and ends where the next begins (the last
// at the end of time), so that every pair lies in one.
func segmentStarts(l *locality) []int64 {
	starts := make([]int64, len(l.segs)+1)
	starts[0], starts[len(l.segs)] = math.MinInt64, math.MaxInt64
	for i := 1; i < len(l.segs); i++ {
		starts[i] = l.j.times.value(l.segs[i] * l.steps)
	}
	return starts
}

// newPairSegments counts the pairs of ts in the segments [starts[i], starts[i+1]) and keeps
// those that have any; kept reports which.
func newPairSegments(ts rules.TimeOrdered, starts []int64, keep int) (p *pairSegments, kept []bool) {
	n := make([]uint64, len(starts)-1)
	for k := range ts.Runs() { // each run's pairs in each segment
		prev := ts.Before(k, starts[0])
		for i := range n {
			next := ts.Before(k, starts[i+1])
			n[i] += next - prev
			prev = next
		}
	}
	p = &pairSegments{space: ts, keep: max(64, keep), prefix: map[int][]uint64{}}
	kept = make([]bool, len(n))
	for i, c := range n {
		if kept[i] = c > 0; kept[i] {
			p.n = append(p.n, c)
			p.from, p.to = append(p.from, starts[i]), append(p.to, starts[i+1])
		}
	}
	return p, kept
}

// pairBlocks makes the block shuffle over the pairs of ts in the segments [starts[i],
// starts[i+1]), group segments per group; segments without a pair are left out.
func pairBlocks(ts rules.TimeOrdered, starts []int64, group int, seed uint64) *blocks {
	b := &blocks{group: max(group, 1), seed: seed, layouts: map[uint64]*blockLayout{}}
	b.pairs, _ = newPairSegments(ts, starts, 4*b.group)
	b.n = b.pairs.n
	rank := uint64(0)
	for _, c := range b.n { // lo: the rank in time order of each segment's first pair
		b.lo = append(b.lo, rank)
		rank += c
	}
	return b
}

// walkPairs makes locality sampling draw the pairs of ts (drawPair) in l's segments, leaving
// out the segments without a pair.
func (l *locality) walkPairs(ts rules.TimeOrdered) {
	p, kept := newPairSegments(ts, segmentStarts(l), 0) // keep: the resident set's (newLocality)
	w := 0
	for i := range l.segs {
		if kept[i] {
			l.segs[w], l.lo[w], l.hi[w] = l.segs[i], l.lo[i], l.hi[i]
			w++
		}
	}
	l.segs, l.lo, l.hi, l.pairs = l.segs[:w], l.lo[:w], l.hi[:w], p
}

// pick is the pair number of the r-th pair (in run order) of segment s.
func (p *pairSegments) pick(s int, r uint64) uint64 {
	pre := p.prefixOf(s)
	k := sort.Search(len(pre)-1, func(k int) bool { return pre[k+1] > r })
	return p.space.Before(k, p.from[s]) + (r - pre[k])
}

// prefixOf returns segment s's pairs before each run (computed once while s is in use).
func (p *pairSegments) prefixOf(s int) []uint64 {
	p.mu.Lock()
	pre, ok := p.prefix[s]
	p.mu.Unlock()
	if ok {
		return pre
	}
	runs := p.space.Runs()
	pre = make([]uint64, runs+1)
	for k := range runs {
		pre[k+1] = pre[k] + p.space.Before(k, p.to[s]) - p.space.Before(k, p.from[s])
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.prefix) >= p.keep {
		clear(p.prefix) // the groups in use are computed again on their next pick
	}
	p.prefix[s] = pre
	return pre
}
