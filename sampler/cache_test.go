package sampler

import (
	"testing"
)

// A job whose cache holds a fraction of the data still produces the same stream.
func TestSmallCacheSameStream(t *testing.T) {
	big, _ := newMemJob(t, smallMem, "", Options{})
	want := fillRange(t, big, 0, 12, 2)
	small, _ := newMemJob(t, smallMem, "sampling = \"random\"", Options{CacheMB: 1})
	// 1 MiB holds ~5 satellite chunks of 147 KiB... force it smaller still:
	small.cache.SetBudget(300 << 10)
	got := fillRange(t, small, 0, 12, 2)
	for b := range want {
		if string(want[b]) != string(got[b]) {
			t.Fatalf("batch %d differs with a small cache", b)
		}
	}
	st := small.cache.Stats()
	// Two readers each pin at most one time-chunk row of 2 x 2 spatial chunks.
	if st.Evictions == 0 || st.PeakBytes > small.cache.Budget()+2*4*small.anchor.c.chunkBytes() {
		t.Fatalf("small cache stats %+v", st)
	}
}
