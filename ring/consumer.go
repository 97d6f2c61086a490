package ring

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Consumer is the ring's single consumer (PROTOCOL.md 3.3). It is not safe for concurrent
// use: one goroutine calls Next, Release and Close.
type Consumer struct {
	r      *Ring
	j      uint64 // next relative sequence number
	held   []*ReadSlot
	closed bool
	broken error
	// nextScan is when Next next scans the registry although its batch is ready
	// (monoNs; PROTOCOL.md 3.5: a producer death is seen while the survivors keep ahead).
	nextScan uint64
	// deadSince is when this consumer first saw each registry entry dead while live
	// producers were left to take it over (monoNs; 0 = not seen dead; PROTOCOL.md 3.5 step 2).
	deadSince [MaxProducers]uint64
}

// NewConsumer attaches this process as the ring's consumer (PROTOCOL.md 3.6 step 5).
func (r *Ring) NewConsumer() (*Consumer, error) {
	pid, starttime, err := selfIdentity()
	if err != nil {
		return nil, fmt.Errorf("gobatch ring: attach consumer: own process identity: %w", err)
	}
	if err := r.claimConsumer(uint32(pid)); err != nil {
		return nil, err
	}
	failpoint(FPConsumerClaiming)
	atomic.StoreUint64(r.u64(offConsumerStarttime), starttime)
	atomic.StoreUint64(r.u64(offConsumerState), claimWord(ConsumerAttached, uint32(pid)))
	failpoint(FPConsumerAttached)
	return &Consumer{r: r}, nil
}

// ReadSlot is a batch handed to the consumer; valid until Release.
type ReadSlot struct {
	c         *Consumer
	j         uint64
	slot      uint64
	lap       uint32
	seq       uint64
	publishNs uint64
	released  bool
}

// Seq returns the batch's absolute stream index.
func (s *ReadSlot) Seq() uint64 { return s.seq }

// Slot returns the slot number.
func (s *ReadSlot) Slot() int { return int(s.slot) }

// PublishNs returns the producer's CLOCK_MONOTONIC at publish (compare only with MonotonicNs
// on the same machine).
func (s *ReadSlot) PublishNs() uint64 { return s.publishNs }

// Owner returns the registry index of the producer that filled the slot.
func (s *ReadSlot) Owner() int { return int(*s.c.r.u32(s.c.r.slotHeader(s.slot) + shOwner)) - 1 }

// Tensor returns tensor i's bytes in this slot. They must not be written.
func (s *ReadSlot) Tensor(i int) []byte { return s.c.r.tensorIn(s.slot, i) }

// Payload returns the slot's payload (all tensors). It must not be written.
func (s *ReadSlot) Payload() []byte { return s.c.r.slotPayload(s.slot) }

// Next returns the next batch in stream order, waiting for it. It returns io.EOF after the
// last batch of a bounded stream; a *ProducerError when a producer recorded an error; a
// *ProducerDiedError when a registered producer died and no live producer is left to take its
// batches over, or none did within takeoverGrace (PROTOCOL.md 3.5, 3.7); a *TruncatedError when every producer
// finished before this batch; ctx's error when ctx ends (checked at least every 100 ms).
// A ready batch is delivered before any of these errors.
func (c *Consumer) Next(ctx context.Context) (*ReadSlot, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.broken != nil {
		return nil, c.broken
	}
	r := c.r
	if r.layout.TotalBatches != 0 && c.j >= r.layout.TotalBatches {
		return nil, io.EOF
	}
	if len(c.held) >= int(r.slots) {
		return nil, fmt.Errorf("%w: all %d slots are held by the consumer (batches %s); Release one before Next", ErrSlotsHeld, r.slots, c.heldBatches())
	}
	// With a slot free, batch j has been granted one (PROTOCOL.md 3.1, 3.3 step 1).
	i, lap, ok := r.grantOf(c.j)
	if !ok {
		c.broken = &ProtocolError{Slot: int(c.j % r.slots), Detail: fmt.Sprintf("position %d has no grant for batch %d while the consumer holds %d of %d slots", c.j%r.slots, r.layout.StartBatch+c.j, len(c.held), r.slots)}
		return nil, c.broken
	}
	w, waiters := r.slotState(i), r.slotWaiters(i)
	want := slotWord(lap, SlotReady)
	if atomic.LoadUint32(w) != want {
		t0 := time.Now()
		for !waitRound(w, waiters, want, sliceFor(ctx), r.Spin) {
			if err := c.waitCheck(ctx, w, want); err != nil {
				atomic.AddUint64(r.u64(offConsumerWaitNs), uint64(time.Since(t0)))
				return nil, err
			}
		}
		atomic.AddUint64(r.u64(offConsumerWaitNs), uint64(time.Since(t0)))
	} else if now := monoNs(); now >= c.nextScan {
		c.nextScan = now + uint64(waitSlice)
		if _, dead := c.deathCheck(); dead != nil {
			dead.Batch = r.layout.StartBatch + c.j
			c.broken = dead
			return nil, dead
		}
	}
	atomic.StoreUint32(w, slotWord(lap, SlotReading))
	failpoint(FPConsumerReading)
	h := r.slotHeader(i)
	s := &ReadSlot{c: c, j: c.j, slot: i, lap: lap, seq: *r.u64(h + shSeq), publishNs: *r.u64(h + shPublishNs)}
	if wantSeq := r.layout.StartBatch + c.j; s.seq != wantSeq {
		c.broken = &ProtocolError{Slot: int(i), Detail: fmt.Sprintf("seq %d in a slot READY for batch %d", s.seq, wantSeq)}
		return nil, c.broken
	}
	c.j++
	c.held = append(c.held, s)
	return s, nil
}

func sliceFor(ctx context.Context) time.Duration {
	d := waitSlice
	if dl, ok := ctx.Deadline(); ok {
		d = max(min(d, time.Until(dl)), time.Millisecond)
	}
	return d
}

// waitCheck runs the consumer's checks of PROTOCOL.md 3.5 after a wait round that did not
// see the awaited READY state. A nil result means: keep waiting (or the slot just became READY).
func (c *Consumer) waitCheck(ctx context.Context, w *uint32, want uint32) error {
	r := c.r
	batch := r.layout.StartBatch + c.j
	if e := r.errorRecord(); e != nil {
		if atomic.LoadUint32(w) == want {
			return nil
		}
		return e
	}
	live, dead := c.deathCheck()
	if dead != nil {
		if atomic.LoadUint32(w) == want {
			return nil
		}
		dead.Batch = batch
		return dead
	}
	if live == 0 {
		// Producers publish before they store DONE and record an error before FAILED, so
		// re-read both after the scan.
		if atomic.LoadUint32(w) == want {
			return nil
		}
		if e := r.errorRecord(); e != nil {
			return e
		}
		return &TruncatedError{Batch: batch}
	}
	atomic.AddUint64(r.u64(offConsumerHeartbeat), 1)
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// deathCheck is step 2 of the consumer's checks (PROTOCOL.md 3.5): a dead producer is an error
// at once when no live producer is left, and when live ones are left but have not taken it over
// (RECLAIMED) within takeoverGrace of this consumer first seeing it dead. It returns the number
// of live producers too.
func (c *Consumer) deathCheck() (live int, died *ProducerDiedError) {
	live, dead := c.r.producersStatus()
	now := monoNs()
	var seen [MaxProducers]bool
	for _, d := range dead {
		seen[d.entry] = true
		if live == 0 {
			return live, &ProducerDiedError{PID: d.pid(), Entry: d.entry}
		}
		if c.deadSince[d.entry] == 0 {
			c.deadSince[d.entry] = now
		} else if now-c.deadSince[d.entry] >= uint64(takeoverGrace) {
			return live, &ProducerDiedError{PID: d.pid(), Entry: d.entry, NotTakenOver: true}
		}
	}
	for e := range c.deadSince {
		if !seen[e] {
			c.deadSince[e] = 0
		}
	}
	return live, nil
}

// Release returns the slot to the producers (PROTOCOL.md 3.3 step 4). Releasing a slot
// twice is a no-op.
func (c *Consumer) Release(s *ReadSlot) {
	if s == nil || s.released || s.c != c {
		return
	}
	s.released = true
	for k, h := range c.held {
		if h == s {
			c.held = append(c.held[:k], c.held[k+1:]...)
			break
		}
	}
	r := c.r
	atomic.AddUint64(r.u64(offBatchesRead), 1)
	atomic.AddUint64(r.u64(offBytesRead), r.g.slotBytes)
	atomic.StoreUint32(r.slotState(s.slot), slotWord(s.lap+1, SlotFree))
	// This is release number c.j - (held before it): the grant of batch slot_count + that (3.1).
	r.grantSlot(c.j+r.slots-uint64(len(c.held)+1), s.slot, s.lap+1)
	failpoint(FPConsumerReleased)
}

// heldBatches lists the absolute indices of the batches the consumer holds.
func (c *Consumer) heldBatches() string {
	var b []byte
	for k, h := range c.held {
		if k > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%d in slot %d", h.seq, h.slot)
	}
	return string(b)
}

// Position returns the relative sequence number of the next batch Next will return.
func (c *Consumer) Position() uint64 { return c.j }

// Close releases held slots, stores consumer_state = CLOSED and wakes every slot word, so
// producers see the close and stop. It does not unmap or unlink anything: the owner of a
// named segment whose creator is dead (Ring.Creator) unlinks it (PROTOCOL.md 3.6).
func (c *Consumer) Close() {
	if c.closed {
		return
	}
	for len(c.held) > 0 {
		c.Release(c.held[0])
	}
	c.closed = true
	_, pid := c.r.consumerClaim()
	atomic.StoreUint64(c.r.u64(offConsumerState), claimWord(ConsumerClosed, pid))
	c.r.WakeAll()
}
