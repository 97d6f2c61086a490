package sampler

import "math/bits"

// The stream's randomness is a hash of counters, never shared mutable state: every draw is
// mix(seed, purpose, batch, example, ...), so any reader can compute any example on its own.

// Purposes of the draws (the first counter after the seed), so that draws never collide.
const (
	drawT0         = 1
	drawY          = 2
	drawX          = 3
	drawDropout    = 4    // + 2*source: whether; + 2*source + 1: which timedelta
	drawSegment    = 1001 // locality: the permutation of segments of a pass
	drawEpoch      = 2001 // epochs: the round keys of an epoch's permutation (epoch, round)
	drawEpochY     = 2002 // epochs: the centre of a sample without sites (epoch, sample)
	drawEpochX     = 2003
	drawEpochSegs  = 2004 // epochs larger than the cache: the order of the time segments (epoch, place)
	drawEpochGroup = 2005 // ... and the keys of the permutation inside a group (epoch, group, round)
)

// mix64 is a strong 64-bit finaliser (the SplitMix64 / "mix13" constants).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hashKey hashes the seed and a tuple of counters. Each counter is folded in with a full mix, so
// (a, b) and (b, a) and tuples of different lengths give unrelated values.
func hashKey(seed uint64, counters ...uint64) uint64 {
	h := mix64(seed + 0x9e3779b97f4a7c15)
	for _, c := range counters {
		h = mix64(h ^ (c + 0x9e3779b97f4a7c15) + (h << 6) + (h >> 2))
	}
	return h
}

// uniform maps a 64-bit hash to [0, n) by the multiply-high method. Its bias is below n / 2^64,
// far below anything a training run can observe.
func uniform(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// uniform64 is uniform for a count held in a uint64 (a sample space of pairs).
func uniform64(h, n uint64) uint64 {
	hi, _ := bits.Mul64(h, n)
	return hi
}

// unitFloat maps a hash to [0, 1) with 53 random bits.
func unitFloat(h uint64) float64 {
	return float64(h>>11) / (1 << 53)
}
