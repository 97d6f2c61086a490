package sampler

import (
	"os"
	"testing"
	"time"
)

// TestFirstBatchTime reports start-up (metadata and coordinates) and the first batch with a
// cold cache, on $GOBATCH_NOWCAST_DIR (skipped without it): the brief's "first batch <= 1 s".
func TestFirstBatchTime(t *testing.T) {
	dir := os.Getenv("GOBATCH_NOWCAST_DIR")
	if dir == "" {
		t.Skip("GOBATCH_NOWCAST_DIR not set")
	}
	t0 := time.Now()
	j, err := NewJob(loadPreset(t, nil), Options{DataRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	open := time.Since(t0)
	buf := batchBuf(j)
	t1 := time.Now()
	if err := j.Fill(0, buf); err != nil {
		t.Fatal(err)
	}
	first := time.Since(t1)
	st := j.Cache().Stats()
	t.Logf("mode %s: open %v, first batch %v (%d chunks decoded, %.0f MB), cpu %v", j.Mode(), open, first,
		st.Misses, float64(st.ResidentBytes)/1e6, cpuTime())
}
