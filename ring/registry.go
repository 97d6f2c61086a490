package ring

import (
	"fmt"
	"sync/atomic"
)

// The producer registry (PROTOCOL.md 2.6). An entry's first u64 is its entry word, state |
// generation<<16 | pid<<32, written only by 64-bit atomics (or a 32-bit store of its low half
// when only the state changes), so an entry is never seen CLAIMING without its pid, and a
// reused entry (a RECLAIMED one taken by a later producer, with the next generation) never
// looks like its previous holder to a takeover scan that is still running.

// entryWord is the entry word of (state, generation, pid).
func entryWord(state, gen, pid uint32) uint64 {
	return uint64(entryLow(state, gen)) | uint64(pid)<<32
}

// entryLow is the low half of the entry word: state and generation.
func entryLow(state, gen uint32) uint32 { return state | (gen&entryStateMask)<<entryStateBits }

// entryParts splits an entry word.
func entryParts(w uint64) (state, gen, pid uint32) {
	return uint32(w) & entryStateMask, uint32(w) >> entryStateBits, uint32(w >> 32)
}

func (r *Ring) entryWordOf(e int) *uint64 { return r.u64(entryOff(e) + regState) }

// EntryState returns registry entry e's state (EntryFree .. EntryReclaimed).
func (r *Ring) EntryState(e int) uint32 {
	return atomic.LoadUint32(r.u32(entryOff(e)+regState)) & entryStateMask
}

// register claims a producer registry entry for this process (PROTOCOL.md 2.6): the first
// FREE one, else the first RECLAIMED one, reused with the next generation. It returns the
// entry's index and generation.
func (r *Ring) register(writers int) (int, uint32, error) {
	pid, starttime, err := selfIdentity()
	if err != nil {
		return -1, 0, fmt.Errorf("gobatch ring: register producer: own process identity: %w", err)
	}
	own := uint32(pid)
	for j := 0; j < MaxProducers; j++ {
		if atomic.CompareAndSwapUint64(r.entryWordOf(j), entryWord(EntryFree, 0, 0), entryWord(EntryClaiming, 0, own)) {
			r.activate(j, 0, starttime, writers)
			return j, 0, nil
		}
	}
	// No FREE entry: reuse a RECLAIMED one. It owes nothing (every batch recorded under it is
	// published); the next generation keeps a takeover scan of its previous holder that is
	// still running from touching this process's claims or entry word (PROTOCOL.md 2.6, 3.7).
	for j := 0; j < MaxProducers; j++ {
		w := atomic.LoadUint64(r.entryWordOf(j))
		st, gen, _ := entryParts(w)
		if st != EntryReclaimed {
			continue
		}
		next := (gen + 1) & entryStateMask
		if atomic.CompareAndSwapUint64(r.entryWordOf(j), w, entryWord(EntryClaiming, next, own)) {
			r.activate(j, next, starttime, writers)
			return j, next, nil
		}
	}
	return -1, 0, fmt.Errorf("gobatch ring: all %d producer registry entries are in use (none FREE or RECLAIMED: that many producer processes are running, finished or failed in this ring)", MaxProducers)
}

// activate completes the registration of entry e, which this process holds CLAIMING with
// generation gen: its identity, fresh counters, then ACTIVE.
func (r *Ring) activate(e int, gen uint32, starttime uint64, writers int) {
	failpoint(FPProducerRegistering)
	off := entryOff(e)
	atomic.StoreUint64(r.u64(off+regStarttime), starttime)
	atomic.StoreUint64(r.u64(off+regHeartbeat), 0)
	atomic.StoreUint64(r.u64(off+regBatches), 0)
	atomic.StoreUint32(r.u32(off+regWriters), uint32(writers))
	atomic.StoreUint32(r.u32(off+regState), entryLow(EntryActive, gen))
	failpoint(FPProducerActive)
}
