package sampler

import (
	"slices"
	"sort"
	"sync"

	"github.com/gobatch/gobatch/config"
)

// Locality mode, for data larger than the cache. The anchor's time axis is cut into segments
// of SegmentSteps time indices (tiles [m*L, (m+1)*L)); a segment's candidates are the t0
// candidates inside it. The stream visits segments in an endless sequence S_0, S_1, ... made of
// seeded random permutations of all non-empty segments (one permutation per pass). Batch g draws
// its examples uniformly from the candidates of the resident set S_q .. S_{q+R-1}, where
// q = g / RotateEveryBatches: every RotateEveryBatches batches one segment leaves and one enters,
// and each segment stays resident for R*RotateEveryBatches batches, so a decoded chunk is used
// by many batches before it is evicted. Over a pass every candidate is drawn equally often
// (up to the unequal candidate counts of edge segments); the cost is that a batch mixes only
// about R segments (Stats.SegmentsPerBatch).
type locality struct {
	j        *Job
	steps    int           // L
	segs     []int         // non-empty segment numbers
	times    []int32       // the anchor time indices segments are cut from (Job.segmentTimes)
	lo, hi   []int32       // candidates of segs[i] are times[lo[i]:hi[i]]
	resident int           // R
	every    uint64        // P
	segBytes int64         // cache bytes one segment needs (the largest)
	pairs    *pairSegments // a rule set's own pairs drawn in the segments (walkPairs); nil: candidates

	mu    sync.Mutex
	perms map[uint64][]int32 // pass -> permutation of 0..len(segs)-1 (a few recent passes)
	order []uint64
}

func newLocality(j *Job, a *Spec) (*locality, error) {
	budget := j.cache.Budget()
	fit := func(segBytes int64) int { // resident segments the budget holds, one spare for rotation
		return int(j.cacheRoom()/max(segBytes, 1)) - 1
	}
	l := pickSegments(j, a, fit, 0)
	if ts := j.pairsInSegments(); ts != nil {
		l.walkPairs(ts)
	}
	r := a.ResidentSegments
	if r == 0 {
		r = fit(l.segBytes)
	}
	if r < 1 {
		return nil, j.cfg.Errorf(a.Field+".cache_mb",
			"%d MB is too small for locality sampling: one segment of %d time steps needs %.0f MB of decoded chunks, and two must fit with 10%% headroom; expected %s >= %.0f or a smaller %s",
			budget>>20, l.steps, float64(l.segBytes)/(1<<20), config.Spell("cache_mb"), float64(2*l.segBytes)/(1<<20)/0.9+1,
			config.Spell("segment_steps"))
	}
	l.resident = min(r, len(l.segs))
	if l.pairs != nil {
		l.pairs.keep = max(l.pairs.keep, 2*l.resident) // the resident set's prefixes, and the next
	}
	return l, nil
}

// pickSegments cuts the anchor's time axis into segments of segment_steps, or when it is not
// set, of the length (1 to 8 anchor time chunks) that keeps the most t0 candidates resident
// (fit(bytes of a segment) segments, at most resident_segments, of that many steps); on a tie
// the shorter, which mixes more segments. A length that keeps at least mix segments resident
// is preferred to any that keeps fewer (0: no preference).
func pickSegments(j *Job, a *Spec, fit func(segBytes int64) int, mix int) *locality {
	if a.SegmentSteps > 0 {
		return segmentsOf(j, a, a.SegmentSteps)
	}
	tc := j.timeChunk
	var l *locality
	best := -1
	for m := 1; m <= 8; m++ {
		c := segmentsOf(j, a, m*tc)
		r := fit(c.segBytes)
		if a.ResidentSegments > 0 {
			r = min(r, a.ResidentSegments)
		}
		score := max(r, 0) * c.steps
		if mix > 0 && r >= mix {
			score += 1 << 40
		}
		if score > best {
			l, best = c, score
		}
	}
	return l
}

// segmentsOf cuts the anchor's time axis into segments of steps time indices.
func segmentsOf(j *Job, a *Spec, steps int) *locality {
	l := &locality{j: j, steps: steps, every: uint64(a.RotateEveryBatches), perms: map[uint64][]int32{}, times: j.segmentTimes()}
	T := j.times.len()
	nseg := (T + l.steps - 1) / l.steps
	for m := 0; m < nseg; m++ {
		lo := sort.Search(len(l.times), func(i int) bool { return int(l.times[i]) >= m*l.steps })
		hi := sort.Search(len(l.times), func(i int) bool { return int(l.times[i]) >= (m+1)*l.steps })
		if hi > lo {
			l.segs = append(l.segs, m)
			l.lo = append(l.lo, int32(lo))
			l.hi = append(l.hi, int32(hi))
		}
	}
	for i := range l.segs {
		l.segBytes = max(l.segBytes, l.bytesOf(i))
	}
	return l
}

// bytesOf is the decoded size of every chunk the windows of segment i's candidates touch
// (all locations).
func (l *locality) bytesOf(i int) int64 {
	type rowKey struct{ src, row int }
	rows := map[rowKey]bool{}
	total := int64(0)
	var at []int // scratch for unevenly spaced windows
	for _, s := range l.j.srcs {
		at = make([]int, max(len(at), windowSteps(s)))
	}
	for _, ci := range l.times[l.lo[i]:l.hi[i]] {
		t0 := l.j.times.value(int(ci))
		for si, s := range l.j.srcs {
			c := s.data()
			perRow := c.chunkBytes()
			for d := 1; d < len(c.grid); d++ {
				perRow *= int64(c.grid[d])
			}
			var first, last int
			switch v := s.(type) {
			case *gridSource:
				sp, _ := v.times.place(v.win, t0, at)
				first, last = sp.index(0)/c.chunks[0], sp.index(v.win.n-1)/c.chunks[0]
			case *pointSource:
				sp, _ := v.times.place(v.win, t0, at)
				first, last = sp.index(0)/c.chunks[0], sp.index(v.win.n-1)/c.chunks[0]
			case *nwpSource:
				ch, _ := v.rule.choose(v.inits.vals, &v.steps, t0, at)
				first, last = ch.run/c.chunks[0], ch.run/c.chunks[0]
			}
			for row := first; row <= last; row++ {
				if k := (rowKey{si, row}); !rows[k] {
					rows[k] = true
					total += perRow
				}
			}
		}
	}
	return total
}

// perm returns the permutation of pass p (cached for a few recent passes).
func (l *locality) perm(p uint64) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.perms[p]; ok {
		return v
	}
	n := len(l.segs)
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- { // Fisher-Yates, every swap from its own counter
		k := uniform(hashKey(l.j.seed, drawSegment, p, uint64(i)), i+1)
		v[i], v[k] = v[k], v[i]
	}
	l.perms[p] = v
	l.order = append(l.order, p)
	if len(l.order) > 8 {
		delete(l.perms, l.order[0])
		l.order = l.order[1:]
	}
	return v
}

// seq is S_n: the index (into l.segs) of the n-th segment of the sequence.
func (l *locality) seq(n uint64) int {
	m := uint64(len(l.segs))
	return int(l.perm(n / m)[n%m])
}

// draw returns the anchor time index of example e of global batch g.
func (l *locality) draw(g, e uint64, rs *readerState) int {
	q := g / l.every
	total := 0
	for r := 0; r < l.resident; r++ {
		s := l.seq(q + uint64(r))
		total += int(l.hi[s] - l.lo[s])
	}
	u := uniform(hashKey(l.j.seed, drawT0, g, e), total)
	for r := 0; r < l.resident; r++ {
		s := l.seq(q + uint64(r))
		n := int(l.hi[s] - l.lo[s])
		if u < n {
			rs.sawSegment(s)
			return int(l.times[int(l.lo[s])+u])
		}
		u -= n
	}
	// Unreachable: u < total. Keep the last candidate rather than fail.
	return int(l.times[len(l.times)-1])
}

// size is the samples of segment s: its candidates, or its pairs.
func (l *locality) size(s int) uint64 {
	if l.pairs != nil {
		return l.pairs.n[s]
	}
	return uint64(l.hi[s] - l.lo[s])
}

// drawPair returns the pair of a rule set's own (walkPairs) that example e of global batch g
// is: uniform over the pairs of the resident set, as draw is over its candidates.
func (l *locality) drawPair(g, e uint64, rs *readerState) uint64 {
	q := g / l.every
	var total uint64
	for r := 0; r < l.resident; r++ {
		total += l.pairs.n[l.seq(q+uint64(r))]
	}
	u := uniform64(hashKey(l.j.seed, drawT0, g, e), total)
	for r := 0; r < l.resident; r++ {
		s := l.seq(q + uint64(r))
		if n := l.pairs.n[s]; u >= n {
			u -= n
			continue
		}
		rs.sawSegment(s)
		return l.pairs.pick(s, u)
	}
	return l.pairs.pick(l.seq(q), 0) // unreachable: u < total
}

// sawSegment counts segment s among the batch's segments (Stats.SegmentsPerBatch); rs may be
// nil (a draw outside a fill).
func (rs *readerState) sawSegment(s int) {
	if rs != nil && !slices.Contains(rs.segs, s) {
		rs.segs = append(rs.segs, s)
	}
}
