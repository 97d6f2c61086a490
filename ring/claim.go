package ring

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The consumer's claim (PROTOCOL.md 2.4, 3.5, 3.6 step 5): consumer_state and consumer_pid
// are the low and high halves of the 8-byte-aligned u64 at offset 256, so a claim and its
// pid are published by one CAS and no reader ever sees a claim without its owner.

func claimWord(state, pid uint32) uint64 { return uint64(state) | uint64(pid)<<32 }

// consumerClaim loads consumer_state and consumer_pid in one atomic load.
func (r *Ring) consumerClaim() (state, pid uint32) {
	w := atomic.LoadUint64(r.u64(offConsumerState))
	return uint32(w), uint32(w >> 32)
}

// claimDead reports whether the claim (state, pid) belongs to a process that is gone
// (PROTOCOL.md 3.5). A CLAIMING claim is judged by its pid alone (gone, a zombie or dead):
// its consumer_starttime may still be the previous, dead claimer's. An ATTACHED claim is
// judged by pid and consumer_starttime, which its owner wrote before ATTACHED.
func (r *Ring) claimDead(state, pid uint32) bool {
	switch state {
	case ConsumerClaiming:
		if pid == 0 {
			return true // a claim always carries its pid; 0 is a pre-version writer's dead claim
		}
		return pidGone(pid)
	case ConsumerAttached:
		return !Alive(pid, atomic.LoadUint64(r.u64(offConsumerStarttime)))
	}
	return false
}

// pidGone reports whether process pid is gone or a zombie, by its pid alone (PROTOCOL.md 3.5:
// a claim in CLAIMING whose starttime may not be written yet).
func pidGone(pid uint32) bool {
	st, _, err := procStat(strconv.FormatUint(uint64(pid), 10))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	return st == 'Z' || st == 'X'
}

// claimConsumer takes the consumer claim for pid: from NONE, or from a CLAIMING claim
// whose process is dead (reclaim). It returns a refusal naming the holder otherwise.
func (r *Ring) claimConsumer(pid uint32) error {
	w := r.u64(offConsumerState)
	for {
		if atomic.CompareAndSwapUint64(w, claimWord(ConsumerNone, 0), claimWord(ConsumerClaiming, pid)) {
			return nil
		}
		st, holder := r.consumerClaim()
		switch st {
		case ConsumerNone:
			// NONE with a stale pid half (a writer that reset the state word alone) is unclaimed.
			if atomic.CompareAndSwapUint64(w, claimWord(st, holder), claimWord(ConsumerClaiming, pid)) {
				return nil
			}
			continue
		case ConsumerClosed:
			return fmt.Errorf("gobatch ring: the ring's consumer (pid %d) already closed it; a ring has one consumer in its life", holder)
		case ConsumerClaiming:
			if r.claimDead(st, holder) {
				if atomic.CompareAndSwapUint64(w, claimWord(st, holder), claimWord(ConsumerClaiming, pid)) {
					return nil
				}
				continue
			}
		case ConsumerAttached:
			if r.claimDead(st, holder) {
				return fmt.Errorf("gobatch ring: the ring's consumer pid %d died after attaching; its producers stop and the ring ends with it (a ring has one consumer in its life)", holder)
			}
		}
		return fmt.Errorf("gobatch ring: ring already has a consumer, pid %d (consumer_state %s)", holder, ConsumerStateName(st))
	}
}

// ReclaimDeadClaim resets a CLAIMING consumer claim whose process is dead to NONE, so that
// the next consumer can attach (`shmloader gc`). It returns the dead pid, or 0 when the
// claim is not such a claim.
func (r *Ring) ReclaimDeadClaim() uint32 {
	st, pid := r.consumerClaim()
	if st != ConsumerClaiming || !r.claimDead(st, pid) {
		return 0
	}
	if !atomic.CompareAndSwapUint64(r.u64(offConsumerState), claimWord(st, pid), claimWord(ConsumerNone, 0)) {
		return 0
	}
	if pid == 0 {
		pid = ^uint32(0)
	}
	return pid
}
