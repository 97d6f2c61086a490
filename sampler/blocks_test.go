package sampler

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// Epochs over data larger than the cache: the block shuffle (epochs.go).

// bigPixels and bigSites are stores about 5x the cache given with them (blockJob).
var (
	bigPixels = memParams{T: 1300, P: 32, S: 23, satChunkT: 6, satChunkP: 16}
	bigSites  = memParams{T: 640, P: 32, S: 23, satChunkT: 6, satChunkP: 16}
)

// blockJob is an epochs job of batch size 8 over the stores of p with a cache of cacheMB.
func blockJob(t *testing.T, p memParams, extra string, cacheMB int64, s Stream) *Job {
	t.Helper()
	cfg, err := parseCfg(t, strings.Replace(epochsConfig(extra), "size = 4", "size = 8", 1))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(p)), CacheMB: cacheMB, Stream: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// siteKey is a sample of a site-anchored job: (t0, location id).
type siteKey struct{ t0, id int64 }

// sitesOf reads (t0, location_id) of every example of the batches.
func sitesOf(j *Job, batches [][]byte) []siteKey {
	keys := examplesOf(j, batches)
	var ts []int64
	lidAt := int64(0)
	for _, tn := range j.Tensors()[:len(j.Tensors())-1] {
		lidAt += tn.NBytes()
	}
	var out []siteKey
	for b, raw := range batches {
		for e, k := range keys[b] {
			ts = append(ts, k.t0)
			id := int64(0)
			for i := 0; i < 8; i++ {
				id |= int64(raw[lidAt+int64(8*e+i)]) << (8 * i)
			}
			out = append(out, siteKey{k.t0, id})
		}
	}
	return out
}

func TestBlockEpochsEverySampleOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		p       memParams
		extra   string
		cacheMB int64
	}{{"pixels", bigPixels, "", 2}, {"sites", bigSites, `locations = "pv"`, 1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // independent jobs, each long under -race
			ref := blockJob(t, c.p, c.extra, c.cacheMB, Stream{})
			if ref.epochs.blocks == nil || ref.DataBytes() < 5*(c.cacheMB<<20) {
				t.Fatalf("%d bytes of data against %d MB of cache, block shuffle %v", ref.DataBytes(), c.cacheMB, ref.epochs.blocks != nil)
			}
			N := ref.epochs.samples
			var orders [2][]siteKey
			for _, world := range []int{1, 2} {
				for epoch := uint64(0); epoch < 2; epoch++ {
					var all []siteKey
					for rank := 0; rank < world; rank++ {
						s, _ := NewStream(rank, world)
						j := blockJob(t, c.p, c.extra, c.cacheMB, s)
						per := j.Stats().EpochBatches
						got := fillInOrder(t, j, s, epoch*per, (epoch+1)*per)
						all = append(all, samplesOf(j, got)...)
					}
					seen := map[siteKey]bool{}
					for _, k := range all {
						if seen[k] {
							t.Fatalf("world %d epoch %d: sample %v twice", world, epoch, k)
						}
						seen[k] = true
					}
					per := ref.epochs.global / uint64(world) * uint64(world)
					if uint64(len(seen)) != per*8 || N-uint64(len(seen)) >= uint64(world*8) {
						t.Fatalf("world %d epoch %d: %d distinct samples of %d (drop-last below one batch per rank)", world, epoch, len(seen), N)
					}
					if world == 1 {
						orders[epoch] = all
					}
				}
			}
			if fmt.Sprint(orders[0]) == fmt.Sprint(orders[1]) {
				t.Fatal("epochs 0 and 1 have the same order")
			}
			// Resumed in the middle of epoch 1 (a fresh job), and filled by 2 readers out of
			// order: the same batches.
			B := ref.epochs.global
			whole := fillInOrder(t, ref, Stream{}, B, 2*B)
			r := blockJob(t, c.p, c.extra, c.cacheMB, Stream{})
			got := fillInOrder(t, r, Stream{}, B+B/2, 2*B)
			r2 := blockJob(t, c.p, c.extra, c.cacheMB, Stream{})
			got2 := fillRange(t, r2, B+B/2, B+B/2+16, 2)
			for k := range got {
				if !bytes.Equal(got[k], whole[B/2+uint64(k)]) || k < len(got2) && !bytes.Equal(got2[k], got[k]) {
					t.Fatalf("resumed at %d: batch %d differs", B+B/2, B+B/2+uint64(k))
				}
			}
		})
	}
}

// samplesOf is (t0, location_id) of every example, or (t0, 0) without sites.
func samplesOf(j *Job, batches [][]byte) []siteKey {
	if j.sites != nil {
		return sitesOf(j, batches)
	}
	var out []siteKey
	for _, b := range examplesOf(j, batches) {
		for _, k := range b {
			out = append(out, siteKey{k.t0, 0})
		}
	}
	return out
}

// spearmanOf is the rank correlation of position and value (ties share their mean rank).
func spearmanOf(vals []int64) float64 {
	n := len(vals)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
	rank := make([]float64, n)
	for i := 0; i < n; {
		k := i
		for k < n && vals[idx[k]] == vals[idx[i]] {
			k++
		}
		for q := i; q < k; q++ {
			rank[idx[q]] = float64(i+k-1) / 2
		}
		i = k
	}
	var mx, my float64
	for i := range rank {
		mx += float64(i)
		my += rank[i]
	}
	mx, my = mx/float64(n), my/float64(n)
	var sxy, sxx, syy float64
	for i, r := range rank {
		dx, dy := float64(i)-mx, r-my
		sxy, sxx, syy = sxy+dx*dy, sxx+dx*dx, syy+dy*dy
	}
	return sxy / math.Sqrt(sxx*syy)
}

func TestBlockEpochsMixAndKeepLocality(t *testing.T) {
	t.Parallel() // a job of its own, long under -race
	j := blockJob(t, bigPixels, "", 2, Stream{})
	B := j.epochs.global
	got := fillInOrder(t, j, Stream{}, 0, B)
	var t0s []int64
	for _, k := range samplesOf(j, got) {
		t0s = append(t0s, k.t0)
	}
	rho := spearmanOf(t0s)
	st := j.Stats()
	var plan Plan
	j.plan(&plan)
	if plan.Mixing == nil || !strings.Contains(plan.Why, "block shuffle of") {
		t.Fatalf("plan: mixing %v, why %q", plan.Mixing, plan.Why)
	}
	p := *plan.Mixing
	t.Logf("%v; Spearman(position, t0) %.3f (plan %.3f), %.2f segments per batch (plan %.2f), %d chunks decoded",
		j.epochs, rho, p.Spearman, st.SegmentsPerBatch, p.SegmentsPerBatch, st.ChunksDecoded[0])
	if math.Abs(rho) >= 0.2 || math.Abs(p.Spearman) >= 0.2 || math.Abs(rho-p.Spearman) > 0.1 {
		t.Errorf("Spearman(position, t0) %.3f, planned %.3f: expected |rho| < 0.2", rho, p.Spearman)
	}
	// The plan leaves out the batches that straddle two groups: a lower estimate.
	if st.SegmentsPerBatch < 2.5 || st.SegmentsPerBatch < p.SegmentsPerBatch-0.3 || st.SegmentsPerBatch > p.SegmentsPerBatch+1 {
		t.Errorf("%.2f segments per batch, planned %.2f; expected several", st.SegmentsPerBatch, p.SegmentsPerBatch)
	}
	// Locality: a whole permutation over the same cache (sampling = "random") decodes far more.
	r := blockJob(t, bigPixels, `sampling = "random"`, 2, Stream{})
	if r.epochs.blocks != nil {
		t.Fatal("sampling = random uses the block shuffle")
	}
	fillInOrder(t, r, Stream{}, 0, B)
	// The plan's traffic model agrees with the misses measured (all sources) within 30%.
	var rplan Plan
	r.plan(&rplan)
	rst := r.Stats()
	for _, c := range []struct {
		name     string
		planned  float64
		measured float64
	}{{"block shuffle", plan.Traffic.MissesPerBatch, float64(st.Cache.Misses) / float64(B)},
		{"whole permutation", rplan.Traffic.MissesPerBatch, float64(rst.Cache.Misses) / float64(B)}} {
		t.Logf("%s: %.1f misses per batch planned, %.1f measured; %s", c.name, c.planned, c.measured, strings.TrimSpace(rplan.SamplingText()))
		if c.planned < c.measured*0.7 || c.planned > c.measured*1.3 {
			t.Errorf("%s: %.1f misses per batch planned, %.1f measured", c.name, c.planned, c.measured)
		}
	}
	blockDec, randDec := st.ChunksDecoded[0], rst.ChunksDecoded[0]
	t.Logf("satellite chunks decoded over an epoch: block shuffle %d, whole permutation %d", blockDec, randDec)
	if blockDec*2 > randDec {
		t.Errorf("block shuffle decoded %d satellite chunks, a whole permutation %d: expected under half", blockDec, randDec)
	}
}

// fillInOrder fills batches from..to-1 of stream s one after the other, as a stream is
// consumed (fillStream scrambles the order, which no cache could follow).
func fillInOrder(t *testing.T, j *Job, s Stream, from, to uint64) [][]byte {
	t.Helper()
	var out [][]byte
	buf := batchBuf(j)
	for k := from; k < to; k++ {
		if err := j.Fill(ctx, s.Global(k), buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Join(buf, nil))
	}
	return out
}

func TestBlocksAreABijection(t *testing.T) {
	l := &locality{lo: []int32{0, 3, 10, 11}, hi: []int32{3, 10, 11, 30}, segs: []int{0, 2, 3, 4}} // 30 candidates
	for _, group := range []int{1, 2, 3, 4, 9} {
		b := newBlocks(l, 3, group, 5)
		for epoch := uint64(0); epoch < 3; epoch++ {
			seen := map[uint64]bool{}
			for p := uint64(0); p < 90; p++ {
				s, seg := b.at(epoch, p)
				if s >= 90 || seen[s] || s < b.lo[seg] || s >= b.lo[seg]+b.n[seg] {
					t.Fatalf("group %d epoch %d: place %d -> sample %d (segment %d), seen %v", group, epoch, p, s, seg, seen[s])
				}
				seen[s] = true
			}
		}
	}
}

// Fetching ahead with the block shuffle: a Fill prefetches up to the end of the next group, so
// the batches up to there find their chunks cached; the batches are the same.
func TestBlockEpochsFetchTheNextGroupAhead(t *testing.T) {
	ref := blockJob(t, bigPixels, "", 2, Stream{})
	j := blockJob(t, bigPixels, "", 2, Stream{})
	j.ahead = newAheadFetcher(1, Stream{})
	limit := j.epochs.nextGroupEnd(0)
	if limit < 2 || limit > j.epochs.global {
		t.Fatalf("the next group ends at batch %d", limit)
	}
	first := fillInOrder(t, j, Stream{}, 0, 1)
	j.waitAhead()
	j.ahead.batches = 0 // no more prefetches: the misses below are the Fills' own
	before := j.Cache().Stats().Misses
	rest := fillInOrder(t, j, Stream{}, 1, limit)
	if m := j.Cache().Stats().Misses - before; m != 0 {
		t.Errorf("batches 1..%d missed %d chunks after the prefetch of the next group", limit-1, m)
	}
	want := fillInOrder(t, ref, Stream{}, 0, limit)
	for k, b := range append(first, rest...) {
		if !bytes.Equal(b, want[k]) {
			t.Fatalf("batch %d differs when fetched ahead", k)
		}
	}
	t.Logf("batches 0..%d (this group and the next) prefetched by the first Fill", limit-1)
}

func TestBlockEpochsFillAllocatesNothingWhenWarm(t *testing.T) {
	j := blockJob(t, bigPixels, "", 64, Stream{}) // the data in the cache: warm after one pass
	j.epochs.blocks = newBlocks(segmentsOf(j, j.anchor.s, 12), 1, 4, j.seed)
	if allocs := warmFillAllocs(t, j); allocs > 0.1 {
		t.Errorf("block shuffle: %.2f allocations per warm Fill", allocs)
	}
}
