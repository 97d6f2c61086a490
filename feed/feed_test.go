package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobatch/gobatch/internal/synthcheck"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

// failAt fails global batch bad, naming it as a source would; every other batch is the
// source's.
type failAt struct {
	sampler.Source
	bad uint64
}

func (f failAt) Fill(ctx context.Context, g uint64, dst [][]byte) error {
	if g == f.bad {
		return fmt.Errorf("source %q, batch %d: disk on fire", f.Tensors()[0].Name, g)
	}
	return f.Source.Fill(ctx, g, dst)
}

// consume reads ring r's stream (the batches before an error may not all come: readers fill
// out of order), checking each batch against the synthetic contract as global
// batch seq*world + rank, until it ends; it returns the stream batches read and the error.
func consume(r *ring.Ring, s sampler.Stream) ([]uint64, error) {
	c, err := r.NewConsumer()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tn := r.Layout().Tensors[0]
	var got []uint64
	for {
		slot, err := c.Next(ctx)
		if err != nil {
			return got, err
		}
		if err := synthcheck.Check(slot.Tensor(0), tn.DType, tn.Shape[0], tn.Shape[1], s.Global(slot.Seq())); err != nil {
			return got, err
		}
		got = append(got, slot.Seq())
		c.Release(slot)
	}
}

// startRanks feeds a new memfd ring for each of n ranks (world size n) from pool; the rings
// are unmapped when the test ends.
func startRanks(t *testing.T, pool *Pool, l ring.Layout, n int) []*Feed {
	t.Helper()
	var feeds []*Feed
	for rank := range n {
		r, err := CreateMemfd(fmt.Sprintf("feed-test-%d", rank), l, pool.readers)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		feeds = append(feeds, pool.Start(r, sampler.Stream{Rank: uint64(rank), WorldSize: uint64(n)}, ring.WatchOptions{}))
	}
	return feeds
}

// One pool feeds two ranks' rings from one source; a fill that fails ends its own ring (the
// consumer gets the source's text, the feed keeps the source's error, not the
// *ring.ProducerError the claimer then meets), and the other ring is whole.
func TestPoolFeedsRings(t *testing.T) {
	cfg, set := openOneSource(t, 6)
	src := failAt{set, 4} // global batch 4: rank 0's stream batch 2
	pool := NewPool(src, 3)
	l, err := (Window{}).Layout(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	feeds := startRanks(t, pool, l, 2)
	var wg sync.WaitGroup
	got := make([][]uint64, 2)
	errs := make([]error, 2)
	for rank, f := range feeds {
		wg.Go(func() { got[rank], errs[rank] = consume(f.Ring().R, sampler.Stream{Rank: uint64(rank), WorldSize: 2}) })
	}
	wg.Wait()
	var pe *ring.ProducerError
	if !errors.As(errs[0], &pe) || !strings.Contains(pe.Text, `batch 2: source "x", batch 4: disk on fire`) || len(got[0]) > 2 {
		t.Errorf("rank 0: %v after %v", errs[0], got[0])
	}
	if errs[1] != io.EOF || fmt.Sprint(got[1]) != "[0 1 2 3 4 5]" {
		t.Errorf("rank 1: %v after %v", errs[1], got[1])
	}
	<-feeds[0].Done()
	if err := feeds[0].Err(); err == nil || errors.As(err, &pe) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("rank 0's feed: %v, want the source's error", err)
	}
	<-feeds[1].Done()
	// A loop that claims after the last batch may meet the consumer's close (it had it all).
	if err := feeds[1].Err(); err != nil && !errors.Is(err, ring.ErrConsumerClosed) {
		t.Errorf("rank 1's feed: %v", err)
	}
	for _, f := range feeds {
		if !f.Stop(time.Second) {
			t.Error("readers still busy after Stop")
		}
	}
}

// A ring whose consumer stops reading holds up no other ring of the pool, even with one
// reader: its claim loop waits for a slot without a fill permit (a rank in a collective that
// waits for another rank's batch must not starve it).
func TestPoolStalledRingHoldsNoReader(t *testing.T) {
	cfg, set := openOneSource(t, 8)
	pool := NewPool(set, 1)
	l, err := (Window{}).Layout(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	feeds := startRanks(t, pool, l, 2)
	// Rank 0 never reads (its ring fills up: 2 slots of 8 batches); rank 1 reads its stream.
	got, err := consume(feeds[1].Ring().R, sampler.Stream{Rank: 1, WorldSize: 2})
	if err != io.EOF || fmt.Sprint(got) != "[0 1 2 3 4 5 6 7]" {
		t.Fatalf("rank 1: %v after %v", err, got)
	}
	// Rank 0's fills may come after rank 1's whole stream (one reader): wait for its slots.
	written := func() uint64 { return feeds[0].Ring().R.Stats().BatchesWritten }
	for deadline := time.Now().Add(5 * time.Second); written() < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := written(); n != 2 {
		t.Errorf("rank 0's ring: %d batches written, want its 2 slots", n)
	}
	for _, f := range feeds {
		if !f.Stop(time.Second) {
			t.Error("loops still busy after Stop")
		}
	}
}
