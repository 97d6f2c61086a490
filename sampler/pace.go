package sampler

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// Pacing: the jobs of a SharedCache whose epochs walk one block-shuffle order (the same time
// segments, grouped alike, in the same seeded order: epochs.go) decode a group's chunks once
// for all of them only while they are in it together. A job may begin group p only once every
// other job of its order has begun group p - lag, where the lag is what the cache holds beyond
// the groups the job keeps resident itself (its group, and the next when it fetches ahead):
// then the slowest job's group and the leaders' all stay resident, and the leaders wait
// instead of decoding what a lagging job would decode again. Where the cache holds two groups
// and the job reads a local disk (no fetch-ahead), a lag of one group lets jobs of unequal
// steps drift within a group without waiting at each boundary (share_bench, 4 jobs with a
// 10 ms step: 0.98x their solo speed at 1.03x one job's decoded bytes, against 0.88x at 0.98x
// with no lag); where it holds less, a lag of one would keep more than the cache holds and
// every job would decode its groups again (two jobs over data 1.8x a cache that holds less
// than two segments: 44 to 47 chunks against one job's 35, python/tests/node/test_share.py).
// A job that fills nothing for paceStall (a trainer that stopped reading, to validate or to
// save) holds no one back. Jobs whose orders differ (another seed, other segments) do not
// pace each other: their chunks are shared when they happen to meet, and the trade is theirs
// to set.

const (
	paceStall = 2 * time.Second // a job that filled nothing for this long holds no one back
	paceTick  = 20 * time.Millisecond
)

// pacer is a SharedCache's record of where its jobs' epochs are.
type pacer struct {
	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when a member moves on
	members map[*paceMember]bool
	stall   time.Duration // paceStall (tests shorten it)
}

// paceMember is one job's place in its order.
type paceMember struct {
	key   string    // the order: jobs of one key pace each other
	lag   uint64    // groups it may run ahead of the slowest of its order (Job.paceLag)
	pos   uint64    // the furthest group it has begun (epoch * groups + group)
	began bool      // pos is set
	last  time.Time // its last fill
}

func newPacer() *pacer {
	return &pacer{changed: make(chan struct{}), members: map[*paceMember]bool{}, stall: paceStall}
}

// join adds a job of order key that may run lag groups ahead of the slowest of its order.
func (p *pacer) join(key string, lag uint64) *paceMember {
	m := &paceMember{key: key, lag: lag}
	p.mu.Lock()
	p.members[m] = true
	p.mu.Unlock()
	return m
}

// leave takes a job out (it closed): it holds no one back any more.
func (p *pacer) leave(m *paceMember) {
	p.mu.Lock()
	delete(p.members, m)
	p.moved()
	p.mu.Unlock()
}

// moved wakes the waiting jobs (p.mu held).
func (p *pacer) moved() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait returns once m may fill a batch of group pos: when no other job of its order that is
// still filling is more than m.lag groups behind.
func (p *pacer) wait(ctx context.Context, m *paceMember, pos uint64) error {
	for {
		p.mu.Lock()
		now := time.Now()
		m.last = now
		if !m.began || pos > m.pos {
			m.pos, m.began = pos, true
			p.moved()
		}
		if p.behind(m, now) <= m.lag {
			p.mu.Unlock()
			return nil
		}
		ch := p.changed
		p.mu.Unlock()
		t := time.NewTimer(paceTick) // a stalled job ages out without moving
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// behind is how many groups m is ahead of the slowest other job of its order that is still
// filling (0 when none is behind it; p.mu held).
func (p *pacer) behind(m *paceMember, now time.Time) uint64 {
	var most uint64
	for o := range p.members {
		if o == m || o.key != m.key || !o.began || now.Sub(o.last) > p.stall || o.pos >= m.pos {
			continue
		}
		most = max(most, m.pos-o.pos)
	}
	return most
}

// paceKey names the job's block-shuffle order: its segments, their grouping and the seed.
func (b *blocks) paceKey() string {
	h := sha256.New()
	var w [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(w[:], v)
		h.Write(w[:])
	}
	put(b.seed)
	put(uint64(b.group))
	put(uint64(len(b.lo)))
	for i := range b.lo {
		put(b.lo[i])
		put(b.n[i])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pace waits, for a job that shares its cache and walks a block shuffle, until it may fill
// global batch g (the group of its first sample: pacer.wait).
func (j *Job) pace(ctx context.Context, g uint64) error {
	if j.paced == nil {
		return nil
	}
	epoch, place := j.epochs.place(g, 0)
	b := j.epochs.blocks
	pos := epoch*uint64(b.groups()) + uint64(b.groupAt(b.layout(epoch), place))
	return j.shared.pace.wait(ctx, j.paced, pos)
}

// paceLag is how many groups a job that walks a block shuffle may run ahead of the slowest
// job of its order: the groups the cache holds beyond those the job keeps resident itself
// (its group, and the next when it fetches ahead: fetchGroupsAhead).
func (j *Job) paceLag() uint64 {
	group := max(int64(j.epochs.blocks.group)*j.blockBytes, 1)
	held := j.cacheRoom() / group // as the group was sized (blockShuffle)
	own := int64(1)
	if j.ahead != nil && j.ahead.batches > 0 {
		own = 2
	}
	return uint64(max(held-own, 0))
}
