package ring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The grant rule (PROTOCOL.md 3.1): a batch goes to whichever slot the consumer released, so
// batches the consumer keeps lower the read-ahead and never stop the stream while a slot is free.

// readKeeping reads batches from c until it has read n more, checking each one's index and
// pattern, releasing it unless keep(seq) holds; it returns the batches kept.
func readKeeping(t *testing.T, ctx context.Context, c *Consumer, first, n uint64, keep func(uint64) bool) []*ReadSlot {
	t.Helper()
	var kept []*ReadSlot
	for k := first; k < first+n; k++ {
		s, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", k, err)
		}
		if s.Seq() != k {
			t.Fatalf("batch %d delivered as batch %d", s.Seq(), k)
		}
		if w := check(s.Tensor(0), s.Seq()); w >= 0 {
			t.Fatalf("batch %d: word %d is not its own", k, w)
		}
		if keep(k) {
			kept = append(kept, s)
		} else {
			c.Release(s)
		}
	}
	return kept
}

// checkKept holds every kept batch to its own pattern: its slot was never written again.
func checkKept(t *testing.T, kept []*ReadSlot) {
	t.Helper()
	for _, s := range kept {
		if w := check(s.Tensor(0), s.Seq()); w >= 0 {
			t.Fatalf("kept batch %d (slot %d) was overwritten (word %d)", s.Seq(), s.Slot(), w)
		}
	}
}

// Keeping slot_count - 1 batches (stale references) leaves one slot: 300 more batches stream
// through it, in order and whole, and the kept ones never change.
func TestStaleSlotsDoNotStopTheStream(t *testing.T) {
	for _, slots := range []int{2, 4, 8} {
		t.Run(fmt.Sprint("slots", slots), func(t *testing.T) {
			r := newHeapRing(t, streamLayout(slots, 0, 16))
			p, _ := r.NewProducer(3)
			c, _ := r.NewConsumer()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			go produce(ctx, p, 3, 20*time.Microsecond)
			// Keep every other batch until slot_count - 1 are kept: stale slots spread over the ring.
			n := uint64(2 * (slots - 1))
			kept := readKeeping(t, ctx, c, 0, n, func(k uint64) bool { return k%2 == 1 })
			if len(kept) != slots-1 {
				t.Fatalf("kept %d batches, want %d", len(kept), slots-1)
			}
			readKeeping(t, ctx, c, n, 300, func(uint64) bool { return false })
			checkKept(t, kept)
			c.Close()
		})
	}
}

// The warm-up pattern of issue 20: batch 19 stays referenced while the loop goes on; with two
// batches held per step (the current one and the one being fetched), a 4-slot ring keeps going.
func TestWarmupLeftoverDoesNotStopTheStream(t *testing.T) {
	r := newHeapRing(t, streamLayout(4, 0, 16))
	p, _ := r.NewProducer(2)
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go produce(ctx, p, 2, 0)
	kept := readKeeping(t, ctx, c, 0, 20, func(k uint64) bool { return k == 19 })
	var prev *ReadSlot
	for k := uint64(20); k < 220; k++ {
		s, err := c.Next(ctx) // prev is still held while the next one is fetched
		if err != nil {
			t.Fatalf("batch %d: %v", k, err)
		}
		if s.Seq() != k || check(s.Tensor(0), k) >= 0 {
			t.Fatalf("batch %d: got batch %d or a torn one", k, s.Seq())
		}
		c.Release(prev)
		prev = s
	}
	checkKept(t, kept)
	c.Close()
}

// With every slot held, Next fails at once (no wait) naming the held batches, consumes nothing,
// and goes on with the same batch once one is released, whichever it is; that slot is then the
// one the next batch gets.
func TestAllSlotsHeldThenGoesOn(t *testing.T) {
	r := newHeapRing(t, streamLayout(3, 0, 16))
	p, _ := r.NewProducer(2)
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go produce(ctx, p, 2, 0)
	held := readKeeping(t, ctx, c, 0, 3, func(uint64) bool { return true })
	_, err := c.Next(ctx) // a Next that waited would end in ctx's error, not ErrSlotsHeld
	if !errors.Is(err, ErrSlotsHeld) || !strings.Contains(err.Error(), "batches 0 in slot 0, 1 in slot 1, 2 in slot 2") {
		t.Fatalf("Next with every slot held = %v, want ErrSlotsHeld naming batches 0, 1 and 2", err)
	}
	c.Release(held[1]) // the middle one: batch 3 gets slot 1
	s, err := c.Next(ctx)
	if err != nil || s.Seq() != 3 || s.Slot() != 1 || check(s.Tensor(0), 3) >= 0 {
		t.Fatalf("after releasing slot 1: %v, batch %v", err, s)
	}
	checkKept(t, []*ReadSlot{held[0], held[2]})
	c.Close()
}

// Slots are granted in the order of their releases: releasing in any order, each later batch
// lands in the slot released for it (PROTOCOL.md 3.1: release r grants batch slot_count + r).
func TestGrantsFollowReleaseOrder(t *testing.T) {
	const slots = 4
	r := newHeapRing(t, streamLayout(slots, 0, 16))
	p, _ := r.NewProducer(2)
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go produce(ctx, p, 2, 0)
	rng := rand.New(rand.NewPCG(3, 9))
	held := readKeeping(t, ctx, c, 0, slots, func(uint64) bool { return true })
	var order []int // slots in the order they were released, not yet granted to a read batch
	next := uint64(slots)
	for round := 0; round < 200; round++ {
		// release a random held batch, then read one: it must be in the first slot released
		k := rng.IntN(len(held))
		order = append(order, held[k].Slot())
		c.Release(held[k])
		held = append(held[:k], held[k+1:]...)
		s, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", next, err)
		}
		if s.Seq() != next || s.Slot() != order[0] || check(s.Tensor(0), next) >= 0 {
			t.Fatalf("batch %d in slot %d (seq %d), want slot %d", next, s.Slot(), s.Seq(), order[0])
		}
		order = order[1:]
		held = append(held, s)
		next++
	}
	checkKept(t, held)
	c.Close()
}

// Several producers (registry entries) with several writers each fill different batches at once
// while the consumer keeps a changing set of stale batches: every batch is delivered once, in
// order and whole, and no kept batch changes (run under -race).
func TestConcurrentProducersWithStaleSlots(t *testing.T) {
	const slots, total = 6, 1500
	r := newHeapRing(t, streamLayout(slots, total, 32))
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	for k := 0; k < 3; k++ {
		p, err := r.NewProducer(2)
		if err != nil {
			t.Fatal(err)
		}
		go func() { errs <- produce(ctx, p, 2, 30*time.Microsecond) }()
	}
	rng := rand.New(rand.NewPCG(5, 11))
	var kept []*ReadSlot
	for k := uint64(0); k < total; k++ {
		s, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", k, err)
		}
		if s.Seq() != k || check(s.Tensor(0), k) >= 0 {
			t.Fatalf("batch %d delivered as %d or torn", k, s.Seq())
		}
		// keep up to slot_count - 2 batches for a random while (the one read leaves one free)
		if len(kept) < slots-2 && rng.IntN(8) == 0 {
			kept = append(kept, s)
		} else {
			c.Release(s)
		}
		if len(kept) > 0 && rng.IntN(16) == 0 {
			i := rng.IntN(len(kept))
			checkKept(t, kept[i:i+1])
			c.Release(kept[i])
			kept = append(kept[:i], kept[i+1:]...)
		}
	}
	checkKept(t, kept)
	if _, err := c.Next(ctx); err == nil {
		t.Fatal("Next after the last batch succeeded")
	}
	for k := 0; k < 3; k++ {
		if err := <-errs; err != nil {
			t.Fatalf("producer: %v", err)
		}
	}
	c.Close()
}
