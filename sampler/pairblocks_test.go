package sampler

import (
	"math"
	"math/rand"
	"sort"
	"testing"
)

// runSpace is a rules.TimeOrdered pair space of runs of ascending t0s, listed.
type runSpace struct {
	t0s   [][]int64 // run k's t0s, ascending
	first []uint64  // the pair number of run k's first pair
}

func newRunSpace(rng *rand.Rand, runs, span int) *runSpace {
	s := &runSpace{}
	next := uint64(0)
	for k := 0; k < runs; k++ {
		var ts []int64
		for t := 0; t < span; t++ {
			if k == 2 || rng.Intn(4) == 0 { // run 2 empty; the others with gaps
				continue
			}
			ts = append(ts, int64(t*300))
		}
		s.t0s, s.first = append(s.t0s, ts), append(s.first, next)
		next += uint64(len(ts))
	}
	return s
}

func (s *runSpace) Runs() int { return len(s.t0s) }
func (s *runSpace) Before(k int, t int64) uint64 {
	return s.first[k] + uint64(sort.Search(len(s.t0s[k]), func(i int) bool { return s.t0s[k][i] >= t }))
}
func (s *runSpace) n() uint64 { return s.first[len(s.first)-1] + uint64(len(s.t0s[len(s.t0s)-1])) }

// pair is pair i's t0 and run.
func (s *runSpace) pair(i uint64) (int64, int) {
	k := sort.Search(len(s.first), func(k int) bool { return s.first[k] > i }) - 1
	return s.t0s[k][i-s.first[k]], k
}

// TestPairBlocksVisitEachPairOnceInTimeGroups: over a space of runs with their own t0s
// (gaps, an empty run) the block shuffle of time segments places every pair exactly once per
// epoch, each group's pairs inside the group's segments' time span, and two epochs differ.
func TestPairBlocksVisitEachPairOnceInTimeGroups(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	sp := newRunSpace(rng, 7, 400)
	starts := []int64{math.MinInt64}
	for t := int64(17 * 300); t < 400*300; t += 23 * 300 { // segments of 23 steps
		starts = append(starts, t)
	}
	starts = append(starts, math.MaxInt64)
	b := pairBlocks(sp, starts, 3, 11)
	N := sp.n()
	if got := b.lo[len(b.lo)-1] + b.n[len(b.n)-1]; got != N {
		t.Fatalf("the segments hold %d pairs, the space %d", got, N)
	}
	orders := make([][]uint64, 2)
	for epoch := range uint64(2) {
		seen := make([]bool, N)
		v := b.layout(epoch)
		for p := range N {
			i, seg := b.at(epoch, p)
			if i >= N || seen[i] {
				t.Fatalf("epoch %d place %d: pair %d out of range or seen before", epoch, p, i)
			}
			seen[i] = true
			orders[epoch] = append(orders[epoch], i)
			t0, _ := sp.pair(i)
			if t0 < b.pairs.from[seg] || t0 >= b.pairs.to[seg] {
				t.Fatalf("pair %d at t0 %d placed in segment %d [%d, %d)", i, t0, seg, b.pairs.from[seg], b.pairs.to[seg])
			}
			k := b.groupAt(v, p)
			inGroup := false
			for j := k * b.group; j < min((k+1)*b.group, len(v.order)); j++ {
				inGroup = inGroup || int(v.order[j]) == seg
			}
			if !inGroup {
				t.Fatalf("place %d of group %d took a pair of segment %d, not of the group", p, k, seg)
			}
		}
	}
	same := 0
	for p := range orders[0] {
		if orders[0][p] == orders[1][p] {
			same++
		}
	}
	if same > len(orders[0])/10 {
		t.Fatalf("epochs 0 and 1 agree at %d of %d places", same, len(orders[0]))
	}
}

// TestPairBlocksPickAllocatesOnlyOncePerSegment: a segment's prefix is computed once while it
// is in use; picks after that allocate nothing.
func TestPairBlocksPickAllocatesOnlyOncePerSegment(t *testing.T) {
	sp := newRunSpace(rand.New(rand.NewSource(5)), 50, 200)
	b := pairBlocks(sp, []int64{math.MinInt64, 100 * 300, math.MaxInt64}, 1, 3)
	b.at(0, 0)
	if a := testing.AllocsPerRun(100, func() { b.pairs.pick(0, 7) }); a != 0 {
		t.Fatalf("%v allocations per pick of a segment in use", a)
	}
}

// ocfPerLocationJob is the site-anchored memory job under rules = "ocf", whose PV gaps put it
// in ocf's per-location mode (each location its own t0s), over a cache of cacheMB.
func ocfPerLocationJob(t *testing.T, extra string, cacheMB int64) *Job {
	t.Helper()
	cfg, err := parseCfg(t, memConfigFmt("locations = \"pv\"\nrules = \"ocf\""+extra))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(bigSites)), CacheMB: cacheMB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	if sp := j.SampleSpace(); sp == nil || sp.Mode != "per-location" || !j.drawsPairs() {
		t.Fatalf("fixture: sample space %+v; want ocf's per-location pairs", sp)
	}
	return j
}

// TestPerLocationPairsInSegments: ocf's per-location pairs over a cache smaller than the data
// are drawn in the stream from the resident time segments (locality sampling), as the epochs'
// block shuffle walks them (TestPairBlocks*): every example one of the rule set's pairs
// (their values against ocf-data-sampler's: python/tests/ocf/test_ocf_space.py), a batch from
// the resident segments, and far fewer chunks decoded than drawing the pairs at random
// (sampling = "random") over the same cache.
func TestPerLocationPairsInSegments(t *testing.T) {
	t.Parallel() // several jobs, long under -race
	j := ocfPerLocationJob(t, "", 2)
	if j.Mode() != SampleLocality || j.loc == nil || j.loc.pairs == nil {
		t.Fatalf("mode %s: %s", j.Mode(), j.Why())
	}
	pairs := map[[2]int64]bool{}
	for i := range j.space.N() {
		t0, loc := j.space.Pair(i)
		pairs[[2]int64{t0, int64(loc)}] = true
	}
	buf := batchBuf(j)
	const batches = 120
	for b := uint64(0); b < batches; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		for e := range 4 {
			t0, _, cy, cx := j.Draw(b, e)
			site := -1
			for k := range j.sites.n() {
				if y, x := j.sites.centre(k); y == cy && x == cx {
					site = k
				}
			}
			if !pairs[[2]int64{t0, int64(site)}] {
				t.Fatalf("batch %d example %d: (t0 %d, location %d) is not one of the rule set's pairs", b, e, t0, site)
			}
		}
	}
	st := j.Stats()
	if st.SegmentsPerBatch > float64(j.loc.resident) {
		t.Errorf("%.2f segments per batch, more than the %d resident", st.SegmentsPerBatch, j.loc.resident)
	}
	r := ocfPerLocationJob(t, "\nsampling = \"random\"", 2)
	if r.loc != nil {
		t.Fatal("sampling = random: locality")
	}
	rbuf := batchBuf(r)
	for b := uint64(0); b < batches; b++ {
		if err := r.Fill(ctx, b, rbuf); err != nil {
			t.Fatal(err)
		}
	}
	loc, rnd := st.ChunksDecoded[0], r.Stats().ChunksDecoded[0]
	t.Logf("satellite chunks decoded in %d batches: %d in the resident segments, %d at random; %s", batches, loc, rnd, j.Why())
	if loc*3 > rnd {
		t.Errorf("locality decoded %d satellite chunks, random draws %d: want a third or less", loc, rnd)
	}
}
