package sampler

import (
	"fmt"
	"math/bits"

	"github.com/gobatch/gobatch/config"
)

// Epochs ([batch] order = "epochs"). The sample space is the t0 candidates times the locations
// (1 until examples are anchored on sites: then every (t0, site) pair is a sample). Epoch E is
// a seeded permutation P_E of [0, N); global batch g lies in epoch E = g / B at place
// b = g mod B, and its example e is sample P_E(b*size + e). B, the global batches per epoch, is
// floor(N / size) rounded down to a multiple of the world size (Stream.Epoch), so the last
// N - B*size samples of each epoch's order are dropped, and every rank gets B / world_size
// batches per epoch. A sample is the t0 candidate (sample / locations); without sites its
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
}

// newEpochs lays the epochs out for stream s; a sample space too small for one batch per rank
// is refused.
func newEpochs(cfg *config.Config, candidates, locations uint64, size int, s Stream) (*epochs, error) {
	ep := &epochs{samples: candidates * locations, locations: locations, size: uint64(size)}
	ep.global, ep.perRank = s.Epoch(ep.samples / ep.size)
	if ep.perRank == 0 {
		return nil, cfg.Errorf("batch.size", "%d with order = %q: the sample space has %d samples (%d t0 candidates x %d locations), fewer than one batch for each of %d ranks; expected batch.size * world_size <= %d",
			size, config.OrderEpochs, ep.samples, candidates, locations, max(s.WorldSize, 1), ep.samples)
	}
	return ep, nil
}

// sample returns the epoch of global batch g and the sample its example e is.
func (ep *epochs) sample(seed, g, e uint64) (epoch, sample uint64) {
	epoch = g / ep.global
	place := (g%ep.global)*ep.size + e
	return epoch, newPermutation(ep.samples, seed, epoch).at(place)
}

// String describes the epochs for logs and errors.
func (ep *epochs) String() string {
	return fmt.Sprintf("%d samples, %d global batches per epoch (%d per rank)", ep.samples, ep.global, ep.perRank)
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
	p := permutation{n: n}
	if n > 1 {
		p.half = uint(bits.Len64(n-1)+1) / 2 // 4^half >= n, and < 4n
		p.mask = 1<<p.half - 1
	}
	for r := range p.keys {
		p.keys[r] = hashKey(seed, drawEpoch, epoch, uint64(r))
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
