package sampler

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// sharedJob makes a job over ds from memConfig with extra in the satellite's table and the
// batch table's size and seed replaced, in sc when it is not nil.
func sharedJob(t *testing.T, ds map[string]*memDataset, extra string, size, seed string, sc *SharedCache) *Job {
	t.Helper()
	text := strings.Replace(memConfigFmt(extra), "size = 4\nseed = 7", "size = "+size+"\nseed = "+seed, 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(ds), Shared: sc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// decodedChunks is the number of chunks j's sources decoded themselves.
func decodedChunks(j *Job) uint64 {
	var n uint64
	for _, s := range j.srcs {
		d, _ := s.data().chunkCounts()
		n += d
	}
	return n
}

// TestSharedCacheDecodesOnce: two jobs of different configurations (batch size, seed, crop,
// normalisation of the satellite) over the same stores in one SharedCache give exactly the
// batches each gives alone, key every source by the same identity (the satellite's entries
// hold its stored values whatever the normalisation), and decode the chunks they both need
// once: the second job decodes fewer chunks than alone, and the two decode no more between
// them than there are distinct chunks in the cache.
func TestSharedCacheDecodesOnce(t *testing.T) {
	ds := newMemNowcast(smallMem)
	const n = 12
	other := "normalise_mean = [0.1, 0.2, 0.3, 0.4]\nnormalise_std = [2, 2, 2, 2]"
	soloA := fillRange(t, sharedJob(t, ds, "", "4", "7", nil), 0, n, 2)
	bAlone := sharedJob(t, ds, other, "3", "11", nil)
	soloB := fillRange(t, bAlone, 0, n, 2)

	sc := NewSharedCache(64 << 20)
	t.Cleanup(sc.Close)
	a := sharedJob(t, ds, "", "4", "7", sc)
	b := sharedJob(t, ds, other, "3", "11", sc)
	gotA := fillRange(t, a, 0, n, 2)
	gotB := fillRange(t, b, 0, n, 2)
	for g := range n {
		if !bytes.Equal(gotA[g], soloA[g]) {
			t.Fatalf("job A batch %d differs from its batch alone", g)
		}
		if !bytes.Equal(gotB[g], soloB[g]) {
			t.Fatalf("job B batch %d differs from its batch alone", g)
		}
	}
	for i := range a.srcs {
		if ia, ib := a.srcs[i].data().id, b.srcs[i].data().id; ia != ib {
			t.Errorf("source %d: job A keys it %d, job B %d; want one identity", i, ia, ib)
		}
	}
	st := sc.Cache().Stats()
	if st.Evictions != 0 {
		t.Fatalf("the shared cache evicted %d entries; the test needs it to hold everything", st.Evictions)
	}
	dA, dB, alone := decodedChunks(a), decodedChunks(b), decodedChunks(bAlone)
	if dB >= alone {
		t.Errorf("job B decoded %d chunks beside job A, %d alone; want fewer", dB, alone)
	}
	if dA+dB != uint64(st.Entries) {
		t.Errorf("the jobs decoded %d + %d chunks for %d distinct ones; want each once", dA, dB, st.Entries)
	}
}

// TestDecodingIdentity: what a chunk decodes to names its entries: a float64 array converted
// at load with another normalisation is another identity; stored values are one whatever the
// normalisation (the gather applies it); another variable or store is another.
func TestDecodingIdentity(t *testing.T) {
	f64 := &memArray{shape: []int{8, 4}, chunks: []int{4, 4}, dims: []string{"time", "system"}, kind: 'f', size: 8,
		scale: 1, fill: math.NaN(), hasFill: true}
	i16 := &memArray{shape: []int{8, 4}, chunks: []int{4, 4}, dims: []string{"time", "system"}, kind: 'i', size: 2, scale: 1}
	ident := func(arr *memArray, from string, mean float64) string {
		c, err := newChunked(0, "t", arr, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.from = from
		c.setNormalisation(-1, []int{0}, []float64{mean}, []float64{1}, nil, nil)
		return c.decodingIdentity()
	}
	if ident(f64, "a", 0.5) == ident(f64, "a", 0.25) {
		t.Error("float64 entries normalised differently share an identity")
	}
	if ident(f64, "a", 0.5) != ident(f64, "a", 0.5) {
		t.Error("the same float64 entries have two identities")
	}
	if ident(i16, "a", 0.5) != ident(i16, "a", 0.25) {
		t.Error("stored entries have an identity per normalisation")
	}
	if ident(i16, "a", 0.5) == ident(i16, "b", 0.5) {
		t.Error("two stores share an identity")
	}
}
