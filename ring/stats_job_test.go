package ring

import "testing"

// Job counters add up across reports (several producer processes each add their deltas);
// gauges hold the last value.
func TestJobCounters(t *testing.T) {
	l := Layout{Slots: 2, Tensors: []Tensor{{Name: "x", DType: Uint8, Shape: []int{1, 8}}}}
	mem := make([]byte, l.SegmentBytes())
	r, err := Create(mem, l, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.JobCounters(); got != (JobCounters{}) {
		t.Fatalf("fresh ring: %+v", got)
	}
	r.AddJobCounters(JobCounters{CacheHits: 5, CacheMisses: 2, CacheEvictions: 1, CacheBytes: 100, CacheBudget: 1000, SegmentsSum: 6, SegmentsBatches: 2})
	r.AddJobCounters(JobCounters{CacheHits: 3, CacheMisses: 1, CacheBytes: 80, CacheBudget: 1000, SegmentsSum: 3, SegmentsBatches: 1})
	want := JobCounters{CacheHits: 8, CacheMisses: 3, CacheEvictions: 1, CacheBytes: 80, CacheBudget: 1000, SegmentsSum: 9, SegmentsBatches: 3}
	if got := r.Stats().Job; got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if v := le64(mem[1408:]); v != 8 {
		t.Fatalf("cache_hits at offset 1408 = %d, want 8", v)
	}
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
