package sampler

import (
	"fmt"
	"math/bits"
	"sort"
	"sync"

	"github.com/gobatch/gobatch/config"
)

// Epochs ([batch] order = "epochs"). The sample space is the t0 candidates times the locations
// (1 until examples are anchored on sites: then every (t0, site) pair is a sample). Epoch E is
// a seeded permutation P_E of [0, N); global batch g lies in epoch E = g / B at place
// b = g mod B, and its example e is sample P_E(b*size + e). B, the global batches per epoch, is
// floor(N / size) rounded down to a multiple of the world size (Stream.Epoch), so the last
// N - B*size samples of each epoch's order are dropped, and every rank gets B / world_size
// batches per epoch. With [batch] drop_last = false, B is ceil(N / size) rounded up to a
// multiple of the world size (Stream.EpochPadded) and the places from N on wrap to the epoch's
// first samples (P_E((b*size + e) mod N)), as DistributedSampler pads: every sample is in the
// epoch. A sample is the t0 candidate (sample / locations); without sites its
// centre pixel is drawn from a hash of (seed, E, sample), so it differs from epoch to epoch.
//
// The permutation is counter-based: a Feistel network on the next even power of two keyed by
// (seed, E), with cycle walking back into [0, N). It needs O(1) memory for any N (the sample
// space of years of data times thousands of sites exceeds 10^8), and any reader computes any
// place of any epoch on its own.
type epochs struct {
	samples   uint64 // N
	locations uint64 // samples per t0 candidate (1: the centre is drawn)
	global    uint64 // B: global batches per epoch
	perRank   uint64 // B / world_size
	size      uint64
	blocks    *blocks // data larger than the cache: the block shuffle; nil: one permutation of [0, N)
}

// newEpochs lays the epochs out for stream s; a sample space too small for one batch per rank
// is refused.
func newEpochs(cfg *config.Config, candidates, locations uint64, size int, s Stream) (*epochs, error) {
	ep := &epochs{samples: candidates * locations, locations: locations, size: uint64(size)}
	ep.global, ep.perRank = s.Epoch(ep.samples / ep.size)
	if cfg.Batch.KeepLast {
		ep.global, ep.perRank = s.EpochPadded(ep.samples, ep.size)
	}
	if ep.perRank == 0 {
		return nil, cfg.Errorf("batch.size", "%d with order = %q: the sample space has %d samples (%d t0 candidates x %d locations), fewer than one batch for each of %d ranks; expected batch.size * world_size <= %d",
			size, config.OrderEpochs, ep.samples, candidates, locations, max(s.WorldSize, 1), ep.samples)
	}
	return ep, nil
}

// sample returns the epoch of global batch g and the sample its example e is.
func (ep *epochs) sample(seed, g, e uint64) (epoch, sample uint64) {
	epoch, sample, _ = ep.sampleSeg(seed, g, e)
	return epoch, sample
}

// sampleSeg is sample that also returns the time segment of the sample with the block shuffle
// (-1 without it).
func (ep *epochs) sampleSeg(seed, g, e uint64) (epoch, sample uint64, seg int) {
	epoch, place := ep.place(g, e)
	if ep.blocks != nil {
		sample, seg = ep.blocks.at(epoch, place)
		return epoch, sample, seg
	}
	return epoch, newPermutation(ep.samples, seed, epoch).at(place), -1
}

// place is the epoch of global batch g and the epoch place of its example e.
func (ep *epochs) place(g, e uint64) (epoch, place uint64) {
	epoch = g / ep.global
	place = (g%ep.global)*ep.size + e
	if place >= ep.samples { // drop_last = false: the last batch is padded with the first samples
		place %= ep.samples
	}
	return epoch, place
}

// String describes the epochs for logs and errors.
func (ep *epochs) String() string {
	s := fmt.Sprintf("%d samples, %d global batches per epoch (%d per rank)", ep.samples, ep.global, ep.perRank)
	if b := ep.blocks; b != nil {
		s += fmt.Sprintf(", block shuffle: %d time segments in groups of %d", len(b.lo), b.group)
	}
	return s
}

// feistelRounds: 6 rounds of a keyed Feistel network; 4 make a pseudo-random permutation in
// theory (Luby-Rackoff), the extra two help the small half widths of small sample spaces.
const feistelRounds = 6

// permutation is a keyed bijection on [0, n).
type permutation struct {
	n    uint64
	half uint   // bits of each half of the Feistel domain [0, 4^half)
	mask uint64 // (1 << half) - 1
	keys [feistelRounds]uint64
}

// newPermutation returns the permutation of [0, n) of epoch epoch under seed.
func newPermutation(n, seed, epoch uint64) permutation {
	return keyedPermutation(n, func(r uint64) uint64 { return hashKey(seed, drawEpoch, epoch, r) })
}

// keyedPermutation returns the permutation of [0, n) whose round r has key key(r).
func keyedPermutation(n uint64, key func(r uint64) uint64) permutation {
	p := permutation{n: n}
	if n > 1 {
		p.half = uint(bits.Len64(n-1)+1) / 2 // 4^half >= n, and < 4n
		p.mask = 1<<p.half - 1
	}
	for r := range p.keys {
		p.keys[r] = key(uint64(r))
	}
	return p
}

// at is the image of i (< n). Cycle walking: the network permutes [0, 4^half), and applying it
// again to an image outside [0, n) until one falls inside is a bijection on [0, n) (it follows
// i's cycle to the next element of [0, n)); on average fewer than 4 steps.
func (p permutation) at(i uint64) uint64 {
	if p.n <= 1 {
		return 0
	}
	x := i
	for {
		x = p.feistel(x)
		if x < p.n {
			return x
		}
	}
}

func (p permutation) feistel(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for _, k := range p.keys {
		l, r = r, l^(mix64(r^k)&p.mask)
	}
	return l<<p.half | r
}

// The block shuffle (data larger than the cache). A permutation of the whole sample space
// would touch a random time in every example, so each batch would miss the cache. Instead the
// anchor's time axis is cut into segments (as locality sampling cuts it, locality.go), whose
// samples are contiguous ranges of [0, N) (samples are ordered by t0, then location). Epoch E
// permutes the segments (seeded by (seed, E)) and cuts that order into groups of `group`
// consecutive segments; the epoch's order is group 0's samples, then group 1's, and so on, and
// inside group k a keyed permutation (seed, E, k) of the group's samples. A group's chunks are
// what the cache must hold while it drains, and the next group's while it is fetched ahead
// (ahead.go), so the group is sized for two groups to fit. Every sample is still placed once
// per epoch, by a bijection; the memory is O(segments) per epoch (the permuted order and its
// prefix sums), computed once for each epoch in use.
type blocks struct {
	lo, n []uint64 // segment i's samples are [lo[i], lo[i]+n[i]), in time order
	group int      // segments per group
	seed  uint64
	pairs *pairSegments // a rule set's pairs (pairblocks.go): lo is then a rank in time order

	mu      sync.Mutex
	layouts map[uint64]*blockLayout // epoch -> layout (a few recent epochs)
	recent  []uint64
}

// blockLayout is one epoch's order of segments.
type blockLayout struct {
	order []int32  // the segments in the epoch's order
	start []uint64 // start[i]: the epoch place of order[i]'s first sample; start[len] = N
}

// newBlocks makes the block shuffle over the segments of l (candidate ranges lo..hi) with
// locations samples per candidate, group segments per group.
func newBlocks(l *locality, locations uint64, group int, seed uint64) *blocks {
	b := &blocks{group: max(group, 1), seed: seed, layouts: map[uint64]*blockLayout{}}
	for i := range l.segs {
		b.lo = append(b.lo, uint64(l.lo[i])*locations)
		b.n = append(b.n, uint64(l.hi[i]-l.lo[i])*locations)
	}
	return b
}

// layout returns epoch's order of segments (cached for a few recent epochs).
func (b *blocks) layout(epoch uint64) *blockLayout {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.layouts[epoch]; ok {
		return v
	}
	n := len(b.lo)
	v := &blockLayout{order: make([]int32, n), start: make([]uint64, n+1)}
	for i := range v.order {
		v.order[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- { // Fisher-Yates, every swap from its own counter
		k := uniform(hashKey(b.seed, drawEpochSegs, epoch, uint64(i)), i+1)
		v.order[i], v.order[k] = v.order[k], v.order[i]
	}
	for i, s := range v.order {
		v.start[i+1] = v.start[i] + b.n[s]
	}
	b.layouts[epoch] = v
	b.recent = append(b.recent, epoch)
	if len(b.recent) > 4 {
		delete(b.layouts, b.recent[0])
		b.recent = b.recent[1:]
	}
	return v
}

// groupPlaces returns the places [from, to) of group k of a layout (clamped to the last group).
func (b *blocks) groupPlaces(v *blockLayout, k int) (from, to uint64) {
	n := len(v.order)
	first := min(k*b.group, n)
	last := min(first+b.group, n)
	return v.start[first], v.start[last]
}

// groups is the number of groups of an epoch.
func (b *blocks) groups() int { return (len(b.lo) + b.group - 1) / b.group }

// groupAt is the group of place p of a layout.
func (b *blocks) groupAt(v *blockLayout, p uint64) int {
	i := sort.Search(len(v.order), func(i int) bool { return v.start[i+1] > p })
	return i / b.group
}

// at returns the sample at place p (< N) of epoch epoch, and its segment.
func (b *blocks) at(epoch, p uint64) (sample uint64, seg int) {
	seed := b.seed
	v := b.layout(epoch)
	k := b.groupAt(v, p)
	from, to := b.groupPlaces(v, k)
	perm := keyedPermutation(to-from, func(r uint64) uint64 { return hashKey(seed, drawEpochGroup, epoch, uint64(k), r) })
	q := from + perm.at(p-from) // the place, inside the group, whose sample p takes
	first := k * b.group
	last := min(first+b.group, len(v.order))
	i := first + sort.Search(last-first, func(i int) bool { return v.start[first+i+1] > q })
	s := v.order[i]
	if b.pairs != nil {
		return b.pairs.pick(int(s), q-v.start[i]), int(s)
	}
	return b.lo[s] + (q - v.start[i]), int(s)
}

// spearman is the rank correlation of epoch place and t0 over epoch 0 that the block shuffle
// leads to, in expectation over the permutations inside the groups: a sample's place is then
// on average the middle of its group, so the covariance of place and t0 rank is that of the
// group middles and the segments' mean ranks. Samples of one t0 (the locations) share its
// rank; N samples.
func (b *blocks) spearman() float64 {
	v := b.layout(0)
	N := float64(v.start[len(v.order)])
	if N < 2 {
		return 0
	}
	mid := (N - 1) / 2
	var cov float64
	for k := 0; k < b.groups(); k++ {
		from, to := b.groupPlaces(v, k)
		gm := (float64(from)+float64(to)-1)/2 - mid
		for i := k * b.group; i < min((k+1)*b.group, len(v.order)); i++ {
			s := v.order[i]
			// The segment's samples have t0 ranks lo .. lo+n-1 (ties of one t0 average out).
			tm := float64(b.lo[s]) + (float64(b.n[s])-1)/2 - mid
			cov += gm * tm * float64(b.n[s])
		}
	}
	return cov / N / ((N*N - 1) / 12)
}

// nextGroupEnd is the global batch after the last one that holds samples of the group after
// global batch g's (the first group of the next epoch after an epoch's last group).
func (ep *epochs) nextGroupEnd(g uint64) uint64 {
	b := ep.blocks
	epoch := g / ep.global
	v := b.layout(epoch)
	k := b.groupAt(v, (g%ep.global)*ep.size) + 1
	if k >= b.groups() {
		epoch, k, v = epoch+1, 0, b.layout(epoch+1)
	}
	_, to := b.groupPlaces(v, k)
	return epoch*ep.global + min((to+ep.size-1)/ep.size, ep.global)
}
