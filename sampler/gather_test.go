package sampler

import (
	"testing"

	"github.com/gobatch/gobatch/sampler/chunks"
)

// TestGatherPiecesOutliveNoPin: the gather converts each piece one behind (pieces, which
// prefetches the next piece's rows meanwhile); a reader whose pin set releases everything at
// every new chunk, over a cache that holds one chunk at most (so a released block is taken
// by the next load at once), fills the same batches as a reader with the usual pin limit.
// Without the flush before a release, the queued piece would read another chunk's block.
func TestGatherPiecesOutliveNoPin(t *testing.T) {
	t.Parallel() // jobs of its own, long under -race
	sc := storedCases["int16"]
	want := fillRange(t, storedJob(t, sc, false, false, false), 0, 6, 1)
	j := storedJob(t, sc, false, false, false)
	j.cache.SetBudget(j.srcs[0].data().chunkBytes())
	rs := j.state()
	rs.pins = chunks.NewPins(j.cache, 1)
	j.putState(rs)
	got := fillRange(t, j, 0, 6, 1)
	for b := range want {
		if string(got[b]) != string(want[b]) {
			t.Fatalf("batch %d differs from the one gathered with the usual pin limit", b)
		}
	}
	if st := j.cache.Stats(); st.Evictions == 0 {
		t.Fatalf("the cache evicted nothing (%+v): the test did not exercise reuse", st)
	}
}
