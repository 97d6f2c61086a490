package ring

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gobatch/gobatch/shm"
)

// TestCutUnderProducer: a named ring's file cut short (to nothing, or below its header) under a
// producer. The methods a producer runs outside its reader goroutines recover the fault
// instead of dying of SIGBUS (which would end this test binary): Watch returns a *LostError,
// after which Claim fails with it, and Stats, the job counters and Fail read and write
// zero-filled memory in place of the lost pages.
func TestCutUnderProducer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cut   int64
		first string // the method that meets the cut first
	}{{"to nothing, Watch first", 0, "watch"}, {"below the header, Stats first", 4096, "stats"}, {"to nothing, counters first", 0, "counters"}} {
		t.Run(tc.name, func(t *testing.T) {
			old := shm.Dir
			shm.Dir = t.TempDir()
			t.Cleanup(func() { shm.Dir = old })
			l := streamLayout(2, 0, 1)
			l.Counters = testCounters
			_, r := newNamedRing(t, "cut", l)
			p, err := r.NewProducer(1)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(shm.Path("cut"), tc.cut); err != nil {
				t.Fatal(err)
			}
			switch tc.first {
			case "stats":
				if st := r.Stats(); st.BatchesWritten != 0 || st.Slots != 2 {
					t.Fatalf("stats of a lost ring: %+v", st)
				}
			case "counters":
				r.UpdateCounter(0, []uint64{3})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = p.Watch(ctx, WatchOptions{})
			var lost *LostError
			if !errors.As(err, &lost) || !errors.Is(err, ErrSegmentLost) || lost.SegmentBytes != r.SegmentBytes() {
				t.Fatalf("Watch on a cut ring: %v; want a *LostError", err)
			}
			if !strings.Contains(err.Error(), "cut short") || r.Lost() == nil {
				t.Fatalf("error %q, Lost %v", err, r.Lost())
			}
			if _, err := p.Claim(ctx); !errors.Is(err, ErrSegmentLost) {
				t.Fatalf("Claim after the loss: %v", err)
			}
			r.UpdateCounter(0, []uint64{5})
			if c := r.Counter("hits"); len(c) != 1 || c[0] != 5 {
				t.Fatalf("job counters after the loss: hits %v; want the 5 added to zero-filled memory", c)
			}
			p.Fail(errors.New("stopping"))
			_ = r.Stats()
		})
	}
}
