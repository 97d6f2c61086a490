package ring

import (
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gobatch/gobatch/shm"
)

func fmtSscan(s string, a ...any) (int, error) { return fmt.Sscan(s, a...) }

// heapMem returns n zero bytes of 8-aligned Go heap memory (the race detector sees
// accesses to it, unlike a mapping).
func heapMem(n int64) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}

// newHeapRing creates a ring over heap memory.
func newHeapRing(t testing.TB, l Layout) *Ring {
	t.Helper()
	r, err := Create(heapMem(l.SegmentBytes()), l, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newMemfdRing creates a ring in a memfd segment, closed at the end of the test.
func newMemfdRing(t testing.TB, l Layout) (*shm.Segment, *Ring) {
	t.Helper()
	seg, err := shm.CreateMemfd(l.SegmentBytes())
	return newRingIn(t, seg, err, l)
}

// newNamedRing creates the named ring name in shm.Dir, closed (not unlinked) at the end of the
// test.
func newNamedRing(t testing.TB, name string, l Layout) (*shm.Segment, *Ring) {
	t.Helper()
	seg, err := shm.Create(name, l.SegmentBytes())
	return newRingIn(t, seg, err, l)
}

// newRingIn creates a ring in a segment just made (or fails the test with its error).
func newRingIn(t testing.TB, seg *shm.Segment, err error, l Layout) (*shm.Segment, *Ring) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	r, err := Create(seg.Bytes(), l, !seg.IsMemfd())
	if err != nil {
		t.Fatal(err)
	}
	return seg, r
}

// pattern is the value of 8-byte word k of batch seq in the test streams.
func pattern(seq uint64, k int) uint64 {
	x := seq*0x9E3779B97F4A7C15 + uint64(k)*0xBF58476D1CE4E5B9
	return x ^ x>>31
}

// fill writes the pattern of seq into p (its length a multiple of 8).
func fill(p []byte, seq uint64) {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(p))), len(p)/8)
	for k := range w {
		w[k] = pattern(seq, k)
	}
}

// check returns the index of the first word of p that does not hold seq's pattern, or -1.
func check(p []byte, seq uint64) int {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(p))), len(p)/8)
	for k := range w {
		if w[k] != pattern(seq, k) {
			return k
		}
	}
	return -1
}

// setPosition moves a fresh ring (nothing claimed) and its consumer to relative batch j,
// as if j batches had passed: next_claim = j, every slot FREE on the lap its next batch
// uses, that batch granted slot i at position i, and its claim word naming the batch before it. Tests use it to run across the 2^30 lap wrap.
func setPosition(r *Ring, c *Consumer, j uint64) {
	*r.u64(offNextClaim) = j
	for i := uint64(0); i < r.slots; i++ {
		first := j + (i+r.slots-j%r.slots)%r.slots
		lap := uint32(first/r.slots) & lapMask
		*r.slotState(i) = slotWord(lap, SlotFree)
		// position i's next batch gets slot i
		*r.grantWord(i) = grantValue(i, r.tagOf(first), lap)
		if first >= r.slots { // its predecessor at the position claimed (by entry 0) and consumed
			*r.slotClaim(i) = batchClaim(first-r.slots, 0, 0)
		}
	}
	c.j = j
}

func storeReady(p *uint32) { atomicStore32(p, stateReady) }

func itoa(n int) string { return fmt.Sprint(n) }

func atomicStore64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// setCreator makes (pid, starttime) the identity of ring r's creator, in the header and in the
// registry entry Create registered (0), as a creator that registered there would leave it: a
// dead creator then leaves no live producer behind (GC keeps a ring a live producer holds).
func setCreator(r *Ring, pid uint32, starttime uint64) {
	*r.u32(offCreatorPID), *r.u64(offCreatorStarttime) = pid, starttime
	*r.u32(entryOff(0) + regPID), *r.u64(entryOff(0) + regStarttime) = pid, starttime
}
