package sampler

import (
	"fmt"
	"math"
)

// Stream is one data-parallel rank's share of the global batch stream. It holds the only copy
// of the rank rule: batch k of the rank's stream is global batch k*WorldSize + Rank. Sources
// fill global batches (a batch is a pure function of its global index), so the share a rank
// sees does not depend on how many ranks there are per node or which process fills it.
type Stream struct {
	Rank, WorldSize uint64
}

// NewStream validates a rank and world size: world size >= 1 and 0 <= rank < world size.
func NewStream(rank, worldSize int) (Stream, error) {
	if worldSize < 1 || rank < 0 || rank >= worldSize {
		return Stream{}, fmt.Errorf("rank %d of world size %d: expected world size >= 1 and 0 <= rank < world size", rank, worldSize)
	}
	return Stream{Rank: uint64(rank), WorldSize: uint64(worldSize)}, nil
}

// Global maps batch k of this rank's stream to its global batch index.
func (s Stream) Global(k uint64) uint64 {
	if s.WorldSize <= 1 {
		return k
	}
	return k*s.WorldSize + s.Rank
}

// Epoch splits an epoch of n full global batches among the ranks as DistributedSampler does
// with drop_last: every rank gets the same number of batches, perRank = n / WorldSize, and the
// epoch keeps the first global = perRank * WorldSize of them (the rest are dropped). Since
// global is a multiple of WorldSize, batch k of a rank's stream (global batch k*WorldSize +
// Rank) lies in epoch k / perRank, at the same place on every rank.
func (s Stream) Epoch(n uint64) (global, perRank uint64) {
	w := max(s.WorldSize, 1)
	perRank = n / w
	return perRank * w, perRank
}

// EpochPadded splits an epoch of n samples into batches of size among the ranks without
// dropping any, as DistributedSampler does without drop_last: ceil(n / size) global batches
// rounded up to a multiple of WorldSize (the places past n are padding, the epoch's first
// samples again), perRank = global / WorldSize; 0, 0 for an empty epoch.
func (s Stream) EpochPadded(n, size uint64) (global, perRank uint64) {
	w := max(s.WorldSize, 1)
	if n == 0 || size == 0 {
		return 0, 0
	}
	batches := (n-1)/size + 1
	perRank = (batches-1)/w + 1
	return perRank * w, perRank
}

// EpochSpan is the part of a rank's stream that epoch e covers when every epoch has n of the
// rank's batches (Epoch's perRank): stream batches first .. end-1, first = e*n and end =
// (e+1)*n. ok is false when end would pass the largest stream index (or n is 0).
func EpochSpan(e, n uint64) (first, end uint64, ok bool) {
	if n == 0 || e >= math.MaxUint64/n {
		return 0, 0, false
	}
	return e * n, (e + 1) * n, true
}

// NodeStreams are the streams of the ranks one node serves, in local-rank order: with
// localWorld ranks on every node (torchrun's homogeneous --nproc_per_node), local rank l of
// node nodeRank is global rank nodeRank*localWorld + l, as torchrun assigns RANK from
// GROUP_RANK and LOCAL_RANK. This is the only copy of that rule; each stream is then exactly
// NewStream's stream for its global rank, so a batch does not depend on which node fills it.
//
// NodeOf is the same rule read backwards: the node rank that serves global rank rank.
func NodeStreams(nodeRank, localWorld, worldSize int) ([]Stream, error) {
	if localWorld < 1 || nodeRank < 0 || worldSize < 1 || worldSize%localWorld != 0 || nodeRank >= worldSize/localWorld {
		return nil, fmt.Errorf("node rank %d with %d local ranks in world size %d: expected local ranks >= 1 dividing the world size and 0 <= node rank < world size / local ranks",
			nodeRank, localWorld, worldSize)
	}
	out := make([]Stream, localWorld)
	for l := range out {
		s, err := NewStream(nodeRank*localWorld+l, worldSize)
		if err != nil {
			return nil, err
		}
		out[l] = s
	}
	return out, nil
}

// NodeOf is the node rank whose NodeStreams include global rank rank (localWorld >= 1).
func NodeOf(rank, localWorld int) int { return rank / max(localWorld, 1) }

// Ahead is the global index of the batch a steps after global batch g in this rank's stream.
func (s Stream) Ahead(g, a uint64) uint64 { return g + a*max(s.WorldSize, 1) }
