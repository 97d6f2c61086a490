package ring

import "testing"

// TestChunkCountersPerSource: each source's decoded and missing chunk counts add up across
// reports (several producer processes add theirs) and stay apart from the other sources'.
func TestChunkCountersPerSource(t *testing.T) {
	r := newHeapRing(t, Layout{Slots: 2, Tensors: []Tensor{{Name: "a", DType: Float32, Shape: []int{4}}}})
	var d JobCounters
	d.ChunksDecoded[0], d.ChunksMissing[0] = 24, 19
	d.ChunksDecoded[MaxTensors-1], d.ChunksMissing[MaxTensors-1] = 5, 0
	r.AddJobCounters(d)
	r.AddJobCounters(d)
	c := r.JobCounters()
	if c.ChunksDecoded[0] != 48 || c.ChunksMissing[0] != 38 {
		t.Fatalf("source 0: decoded %d missing %d, want 48 and 38", c.ChunksDecoded[0], c.ChunksMissing[0])
	}
	if c.ChunksDecoded[MaxTensors-1] != 10 || c.ChunksMissing[MaxTensors-1] != 0 {
		t.Fatalf("source %d: decoded %d missing %d, want 10 and 0", MaxTensors-1, c.ChunksDecoded[MaxTensors-1], c.ChunksMissing[MaxTensors-1])
	}
	for i := 1; i < MaxTensors-1; i++ {
		if c.ChunksDecoded[i] != 0 || c.ChunksMissing[i] != 0 {
			t.Fatalf("source %d: decoded %d missing %d, want 0", i, c.ChunksDecoded[i], c.ChunksMissing[i])
		}
	}
	if f := c.MissingFraction(0); f < 0.79 || f > 0.80 {
		t.Fatalf("missing fraction %v, want 19/24", f)
	}
	if f := c.MissingFraction(3); f != 0 {
		t.Fatalf("missing fraction of a source with no chunk %v, want 0", f)
	}
	if end := offChunksMissing + 8*MaxTensors; end > offRegistry {
		t.Fatalf("chunks_missing ends at %d, past the registry at %d", end, offRegistry)
	}
}
