package sampler

import (
	"os"
	"sync"
	"testing"
	"time"
)

// TestFirstBatchTime reports start-up (metadata and coordinates) and the first batch with a
// cold cache, on $GOBATCH_NOWCAST_DIR (skipped without it): the brief's "first batch <= 1 s".
// With readers = 1 and 2 as shmloader runs them: reader r fills batches r, r+readers, ...
func TestFirstBatchTime(t *testing.T) {
	dir := os.Getenv("GOBATCH_NOWCAST_DIR")
	if dir == "" {
		t.Skip("GOBATCH_NOWCAST_DIR not set")
	}
	for _, readers := range []int{1, 2} {
		t0 := time.Now()
		j, err := NewJob(loadPreset(t, nil), Options{DataRoot: dir})
		if err != nil {
			t.Fatal(err)
		}
		open := time.Since(t0)
		t1 := time.Now()
		done := make([]time.Duration, readers)
		var wg sync.WaitGroup
		for r := 0; r < readers; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := j.Fill(ctx, uint64(r), batchBuf(j)); err != nil {
					t.Error(err)
				}
				done[r] = time.Since(t1)
			}()
		}
		wg.Wait()
		st := j.Cache().Stats()
		t.Logf("readers %d, mode %s: open %v, batches 0..%d done at %v (%d chunks decoded, %.0f MB)",
			readers, j.Mode(), open, readers-1, done, st.Misses, float64(st.ResidentBytes)/1e6)
		j.Close()
	}
}
