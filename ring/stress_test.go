package ring

import (
	"os"
	"testing"
	"time"

	"github.com/gobatch/gobatch/shm"
)

// TestStress pushes many small batches through a small ring from several producers: writer
// goroutines in this process and, in the full run, producer processes joined to the same
// named segment. Every batch is checked against its pattern, in order, exactly once.
// GOBATCH_STRESS=1 runs 2,000,000 batches (with 2 extra producer processes); the default
// is 200,000 batches in this process so that `go test -race` stays quick.
func TestStress(t *testing.T) {
	total, procs, writers := 200_000, 0, 4
	if os.Getenv("GOBATCH_STRESS") != "" {
		total, procs = 2_000_000, 2
	}
	if testing.Short() {
		total = 5_000
	}
	name := useShmDir(t)
	l := streamLayout(8, uint64(total), 8) // 64-byte batches
	seg, err := shm.Create(name, l.SegmentBytes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	r, err := Create(seg.Bytes(), l, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"RING=" + name, "TOTAL=" + itoa(total), "SLOTS=8", "WORDS=8", "WRITERS=2"}
	var kids []*child
	for k := 0; k < procs; k++ {
		kids = append(kids, startChild(t, "join-produce", env))
	}
	p, _ := r.NewProducer(writers)
	perr := startProducing(t, p, c, writers, 0)
	t0 := time.Now()
	consumeAll(t, c, 0, uint64(total))
	d := time.Since(t0)
	if err := <-perr; err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		k.wait(t)
	}
	st := r.Stats()
	var sum uint64
	for _, e := range st.Producers {
		sum += e.Batches
	}
	if sum != uint64(total) || st.BatchesRead != uint64(total) {
		t.Errorf("entries published %d, consumer read %d, want %d", sum, st.BatchesRead, total)
	}
	t.Logf("%d batches, %d producer processes: %v (%.0f batches/s)", total, 1+procs, d, float64(total)/d.Seconds())
}
