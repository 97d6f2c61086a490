package ring

import (
	"sync/atomic"
	"time"
)

// Grants (PROTOCOL.md 3.1). Batch j's position p = j mod slot_count holds its claim (takeover.go)
// and its grant: the slot the consumer gave it. The first slot_count batches have the slots of
// their positions; after that the consumer's r-th release gives the released slot to batch
// slot_count + r, whichever slot it is. So a batch the trainer keeps takes its slot out of use
// and nothing else: the stream goes on in the other slots, and only a consumer that holds every
// slot has no slot for its next batch.

func (r *Ring) grantWord(p uint64) *uint64    { return r.u64(r.slotHeader(p) + shGrant) }
func (r *Ring) grantLow(p uint64) *uint32     { return r.u32(r.slotHeader(p) + shGrant) }
func (r *Ring) grantWaiters(p uint64) *uint32 { return r.u32(r.slotHeader(p) + shGrantWait) }

// tagOf is batch j's tag in its position's grant.
func (r *Ring) tagOf(j uint64) uint32 { return uint32(j/r.slots) & grantTagMask }

// grantValue is a grant word: slot s on slot lap lap, for a batch of tag tag.
func grantValue(s uint64, tag, lap uint32) uint64 {
	return uint64(lap&lapMask)<<32 | uint64(tag&grantTagMask)<<grantSlotBits | s
}

func grantTag(low uint32) uint32 { return low >> grantSlotBits }

// grantParts decodes a grant word: slot, lap and tag.
func grantParts(g uint64) (slot uint64, lap, tag uint32) {
	return uint64(uint32(g) & grantSlotMask), uint32(g>>32) & lapMask, grantTag(uint32(g))
}

// grantOf returns the slot and lap of batch j, and whether it has been granted one yet.
func (r *Ring) grantOf(j uint64) (slot uint64, lap uint32, ok bool) {
	s, lap, tag := grantParts(atomic.LoadUint64(r.grantWord(j % r.slots)))
	if tag != r.tagOf(j) {
		return 0, 0, false
	}
	return s, lap, true
}

// initGrants gives every position its own slot on lap 0 (the creator, before READY).
func (r *Ring) initGrants() {
	for p := range r.slots {
		atomic.StoreUint64(r.grantWord(p), grantValue(p, 0, 0))
	}
}

// grantSlot gives slot s, just released to FREE(lap), to batch k and wakes the producers that
// wait for k's grant (PROTOCOL.md 3.3 step 4).
func (r *Ring) grantSlot(k, s uint64, lap uint32) {
	p := k % r.slots
	atomic.StoreUint64(r.grantWord(p), grantValue(s, r.tagOf(k), lap))
	wake(r.grantLow(p), r.grantWaiters(p))
}

// published reports whether batch j, claimed at its position, is published (PROTOCOL.md 3.1):
// its position's grant names a later batch (j was acquired), or names j and j's slot is past
// FREE and WRITING on j's lap. Without a grant yet, j is not published.
func (r *Ring) published(j uint64) bool {
	s, lap, tag := grantParts(atomic.LoadUint64(r.grantWord(j % r.slots)))
	switch tag {
	case r.tagOf(j):
		v := atomic.LoadUint32(r.slotState(s))
		return v != slotWord(lap, SlotFree) && v != slotWord(lap, SlotWriting)
	case r.tagOf(j + r.slots):
		return true
	}
	return false
}

// waitWhile sleeps at most d while *w == v, with the waiters protocol of PROTOCOL.md 3.4.
func waitWhile(w, waiters *uint32, v uint32, d time.Duration) {
	atomic.AddUint32(waiters, 1)
	if atomic.LoadUint32(w) == v {
		futexWait(w, v, d)
	}
	atomic.AddUint32(waiters, ^uint32(0))
}
