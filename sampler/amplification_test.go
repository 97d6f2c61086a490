package sampler

import (
	"strings"
	"testing"
)

// Decode amplification, planned and measured, source by source: the plan's per-source figures
// add up to its job figure (each weighted by its tensor's bytes), the measured one is the
// chunks decoded times their bytes over the tensor's bytes delivered, and a cache that holds
// everything brings the measured one down as batches go on (each chunk decoded once).
func TestDecodeAmplification(t *testing.T) {
	j, _ := newMemJob(t, smallMem, `sampling = "random"`, Options{})
	var p Plan
	j.plan(&p)
	tr := p.Traffic
	if len(tr.DecodeAmplification) != len(j.srcs) {
		t.Fatalf("%d per-source figures for %d sources", len(tr.DecodeAmplification), len(j.srcs))
	}
	var sum, batch float64
	for i, a := range tr.DecodeAmplification {
		sum += a * float64(j.tensors[i].NBytes())
	}
	for _, ten := range j.tensors {
		batch += float64(ten.NBytes())
	}
	if got, want := sum/batch, tr.DecodedPerDelivered; got < want*0.999 || got > want*1.001 {
		t.Errorf("per-source amplifications add up to %v, the job's is %v", got, want)
	}
	if !strings.Contains(p.SamplingText(), "decode amplification (decoded bytes per byte delivered, by source): satellite ") {
		t.Errorf("plan text: %s", p.SamplingText())
	}
	amp := func() []float64 {
		st := j.Stats()
		out := make([]float64, len(j.srcs))
		for i, s := range j.srcs {
			c := s.data()
			if st.DecodedBytes[i] != st.ChunksDecoded[i]*uint64(c.chunkBytes()) || st.DeliveredBytes[i] != st.Batches*uint64(j.tensors[i].NBytes()) {
				t.Fatalf("source %d: decoded %d bytes for %d chunks of %d, delivered %d for %d batches", i,
					st.DecodedBytes[i], st.ChunksDecoded[i], c.chunkBytes(), st.DeliveredBytes[i], st.Batches)
			}
			out[i] = float64(st.DecodedBytes[i]) / float64(st.DeliveredBytes[i])
		}
		return out
	}
	fillRange(t, j, 0, 4, 1)
	early := amp()
	fillRange(t, j, 4, 40, 1)
	late := amp()
	if late[0] >= early[0] || late[0] <= 0 {
		t.Errorf("satellite amplification %v after 4 batches, %v after 40: want it falling as the cache fills", early[0], late[0])
	}
}
