package ring

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"
)

// Batch claims and their takeover (PROTOCOL.md 3.2 steps 1-2, 3.7). A producer holds batch j
// once its holder number is in the claim word of position j mod slot_count together with j; the
// record stays until j + slot_count is claimed, which needs j published (grant.go). So an unpublished
// batch always names its holder, and when the holder dies a live producer takes the claim
// over and produces the batch again (every batch is a pure function of its index).

// batchClaim is the value of a position's claim word for batch j held by registry entry e of
// generation gen (PROTOCOL.md 3.2: the generation's low byte is part of the holder).
func batchClaim(j uint64, e int, gen uint32) uint64 {
	return (j+1)<<claimHolderBits | claimHolderOf(e, gen)
}

// claimHolderOf is the holder part of a claim word: entry e + 1 and gen's low byte.
func claimHolderOf(e int, gen uint32) uint64 {
	return uint64(gen&(1<<claimEntryBits-1))<<claimEntryBits | uint64(e+1)
}

// claimedBatch and claimHolder decode a non-zero claim word: the batch and the registry entry.
func claimedBatch(c uint64) uint64 { return c>>claimHolderBits - 1 }
func claimHolder(c uint64) int     { return int(c&(1<<claimEntryBits-1)) - 1 }

// claimHeldBy reports whether claim word c names entry e of generation gen as its holder.
func claimHeldBy(c uint64, e int, gen uint32) bool {
	return c&(1<<claimHolderBits-1) == claimHolderOf(e, gen)
}

func (r *Ring) slotClaim(i uint64) *uint64 { return r.u64(r.slotHeader(i) + shClaim) }

// allPublished reports whether every batch of a bounded stream is claimed and every claim is
// published (PROTOCOL.md 3.7.3).
func (r *Ring) allPublished() bool {
	if r.layout.TotalBatches == 0 || atomic.LoadUint64(r.u64(offNextClaim)) < r.layout.TotalBatches {
		return false
	}
	for i := uint64(0); i < r.slots; i++ {
		if c := atomic.LoadUint64(r.slotClaim(i)); c != 0 && !r.published(claimedBatch(c)) {
			return false
		}
	}
	return true
}

// deadEntry is a registry entry in ACTIVE or CLAIMING whose process is not alive.
type deadEntry struct {
	entry int
	word  uint64 // the entry word (state, generation, pid) as seen dead
}

func (d deadEntry) pid() uint32 { return uint32(d.word >> 32) }
func (d deadEntry) gen() uint32 { _, g, _ := entryParts(d.word); return g }

// entryDead reports whether registry entry e is a dead producer (PROTOCOL.md 3.5 step 2), and
// whether it is a live one; an entry that is neither is FREE, DONE, FAILED or RECLAIMED.
func (r *Ring) entryDead(e int) (d deadEntry, dead, live bool) {
	p := r.entryWordOf(e)
	w := atomic.LoadUint64(p)
	st, _, pid := entryParts(w)
	if st != EntryActive && st != EntryClaiming {
		return deadEntry{}, false, false
	}
	if pid == 0 {
		return deadEntry{}, false, st == EntryClaiming // a pre-version writer between its CAS and its pid store
	}
	// A CLAIMING entry's starttime may not be written yet: judge it by its pid.
	gone := st == EntryClaiming && pidGone(pid) || st == EntryActive && !Alive(pid, atomic.LoadUint64(r.u64(entryOff(e)+regStarttime)))
	if !gone {
		return deadEntry{}, false, true
	}
	// Finished, or taken over, in between? Only an unchanged entry is a death.
	if atomic.LoadUint64(p) != w {
		return deadEntry{}, false, false
	}
	return deadEntry{entry: e, word: w}, true, false
}

// producersStatus scans the registry (PROTOCOL.md 3.5, consumer steps 2 and 3): the number
// of live producers and the dead ones.
func (r *Ring) producersStatus() (live int, dead []deadEntry) {
	for e := 0; e < MaxProducers; e++ {
		d, isDead, isLive := r.entryDead(e)
		switch {
		case isDead:
			dead = append(dead, d)
		case isLive:
			live++
		}
	}
	return live, dead
}

// takeoverScan takes over every unpublished claim of every dead producer and marks each such
// entry RECLAIMED (PROTOCOL.md 3.7). The batches taken go to p.taken, which Claim hands out
// before new claims. One scan runs at a time in a process.
func (p *Producer) takeoverScan() {
	if !p.scanning.CompareAndSwap(false, true) {
		return
	}
	defer p.scanning.Store(false)
	r := p.r
	for e := 0; e < MaxProducers; e++ {
		if e == p.entry {
			continue
		}
		d, dead, _ := r.entryDead(e)
		if !dead {
			continue
		}
		for i := uint64(0); i < r.slots; i++ {
			c := atomic.LoadUint64(r.slotClaim(i))
			// Only the dead holder's generation: if the entry has been marked RECLAIMED by
			// another scan and reused meanwhile, its new holder's claims are not ours to take.
			if c == 0 || !claimHeldBy(c, e, d.gen()) || r.published(claimedBatch(c)) {
				continue
			}
			j := claimedBatch(c)
			if atomic.CompareAndSwapUint64(r.slotClaim(i), c, batchClaim(j, p.entry, p.gen)) {
				failpointBatch(FPSlotReclaimed, r.layout.StartBatch+j)
				p.pushTaken(j)
			}
		}
		if atomic.CompareAndSwapUint64(r.entryWordOf(e), d.word, entryWord(EntryReclaimed, d.gen(), d.pid())) {
			failpoint(FPProducerReclaimed)
			p.tookOver.Add(1)
		}
	}
}

// scanClock is the clock of the claim path's scan schedule: the runtime's monotonic clock
// (vDSO), not monoNs, whose clock_gettime is a system call on every Claim.
var scanClock = time.Now()

// maybeScan runs the takeover scan when the last one in the claim path is a wait slice old,
// so that a producer without a watchdog takes part too (PROTOCOL.md 3.7).
func (p *Producer) maybeScan() {
	now := uint64(time.Since(scanClock))
	next := p.nextScan.Load()
	if now >= next && p.nextScan.CompareAndSwap(next, now+uint64(waitSlice)) {
		p.takeoverScan()
	}
}

func (p *Producer) pushTaken(j uint64) {
	p.mu.Lock()
	p.taken = append(p.taken, j)
	slices.Sort(p.taken)
	p.mu.Unlock()
}

// popTaken returns the smallest batch taken over and not yet handed to a writer.
func (p *Producer) popTaken() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.taken) == 0 {
		return 0, false
	}
	j := p.taken[0]
	p.taken = p.taken[1:]
	return j, true
}

// swapTaken trades this writer's claim j, not yet begun, for a smaller batch taken over, if
// there is one (PROTOCOL.md 3.7: taken-over batches come first).
func (p *Producer) swapTaken(j uint64) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.taken) == 0 || p.taken[0] >= j {
		return 0, false
	}
	k := p.taken[0]
	p.taken[0] = j
	slices.Sort(p.taken)
	return k, true
}

// TookOver returns the number of dead producers whose claims this producer took over.
func (p *Producer) TookOver() int { return int(p.tookOver.Load()) }

// claimBatch returns the batch this writer is to produce next (PROTOCOL.md 3.2 steps 1-2): one
// taken over from a dead producer (taken = true), or a new claim recorded in its slot's claim
// word. At the end of a bounded stream it waits, taking over what dead producers leave, until
// every batch is published (3.7.3), and then returns io.EOF.
func (p *Producer) claimBatch(ctx context.Context) (j uint64, taken bool, err error) {
	r := p.r
	for {
		if j, ok := p.popTaken(); ok {
			return j, true, nil
		}
		p.maybeScan()
		if p.quit.Load() {
			return 0, false, io.EOF
		}
		j = atomic.LoadUint64(r.u64(offNextClaim))
		if r.layout.TotalBatches != 0 && j >= r.layout.TotalBatches {
			if err := p.endWait(ctx); err != nil {
				return 0, false, err
			}
			continue
		}
		i := j % r.slots // j's position
		cw := r.slotClaim(i)
		c := atomic.LoadUint64(cw)
		switch {
		case c != 0 && claimedBatch(c) >= j: // claimed already; its claimer may not have advanced next_claim
			atomic.CompareAndSwapUint64(r.u64(offNextClaim), j, j+1)
		case c == 0 && j < r.slots, c != 0 && claimedBatch(c)+r.slots == j && r.published(claimedBatch(c)):
			if atomic.CompareAndSwapUint64(cw, c, batchClaim(j, p.entry, p.gen)) {
				failpointBatch(FPSlotClaimed, r.layout.StartBatch+j)
				atomic.CompareAndSwapUint64(r.u64(offNextClaim), j, j+1)
				return j, false, nil
			}
		case c != 0 && claimedBatch(c)+r.slots == j: // its predecessor at the position is being written
			if err := p.waitPublished(ctx, claimedBatch(c), func() bool { return atomic.LoadUint64(cw) != c }); err != nil {
				return 0, false, err
			}
		default:
			err := &ProtocolError{Slot: int(i), Detail: fmt.Sprintf("claim word %#x names a batch before %d while next_claim is %d", c, r.layout.StartBatch+j-r.slots, r.layout.StartBatch+j)}
			p.Fail(err)
			return 0, false, err
		}
	}
}

// endWait is one round of waiting at the end of a bounded stream (PROTOCOL.md 3.7.3): once
// every batch is published the entry becomes DONE and io.EOF is returned; otherwise it waits a
// slice for the first unpublished batch, runs the checks and returns nil (look for taken-over
// batches again).
func (p *Producer) endWait(ctx context.Context) error {
	r := p.r
	if r.allPublished() {
		p.setState(EntryActive, EntryDone)
		return io.EOF
	}
	for i := uint64(0); i < r.slots; i++ {
		if c := atomic.LoadUint64(r.slotClaim(i)); c != 0 && !r.published(claimedBatch(c)) {
			return p.waitPublished(ctx, claimedBatch(c), func() bool { return false })
		}
	}
	return nil
}

// waitPublished waits at most one wait slice for batch j to be published, or for done, then
// runs the producer's checks (PROTOCOL.md 3.4, 3.5): on the state word of j's slot when it has
// one, else on its position's grant word. The caller holds no claim.
func (p *Producer) waitPublished(ctx context.Context, j uint64, done func() bool) error {
	r := p.r
	w, waiters := r.grantLow(j%r.slots), r.grantWaiters(j%r.slots)
	if s, _, ok := r.grantOf(j); ok {
		w, waiters = r.slotState(s), r.slotWaiters(s)
	}
	v := atomic.LoadUint32(w)
	if r.published(j) || done() {
		return nil
	}
	waitWhile(w, waiters, v, sliceFor(ctx))
	if atomic.LoadUint32(w) != v || r.published(j) || done() {
		return nil
	}
	return p.waitCheck(ctx)
}
