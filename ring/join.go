package ring

import "fmt"

// JoinLayout decides whether a producer configured for want may join this ring (shmloader run
// --join), and returns the layout it must produce: the ring's own, whose start and total win
// when the joiner did not fix them.
//
// The tensor table and its offsets must match (Compatible), and so must the slot count and the
// batch size. The counter table need not: a joiner publishes the counters both tables have
// (PROTOCOL.md 2.5a). A ring of another layout version never gets here: Open refuses it,
// naming both versions. The start is compared only when startGiven (an explicit --start); otherwise the
// joiner takes the ring's. streamEnd is the configured stream's end (batch.batches, an absolute
// index; 0 = unbounded): a bounded configuration joins only a bounded ring whose start + total
// ends the stream there, an unbounded one only an unbounded ring. The messages name both sides.
func (r *Ring) JoinLayout(want Layout, startGiven bool, streamEnd uint64) (Layout, error) {
	if err := r.Compatible(want); err != nil {
		return Layout{}, err
	}
	have := r.Layout()
	end := have.StartBatch + have.TotalBatches
	switch {
	case have.Slots != want.Slots:
		return Layout{}, fmt.Errorf("the ring has %d slots, this configuration %d", have.Slots, want.Slots)
	case have.BatchSize != want.BatchSize:
		return Layout{}, fmt.Errorf("the ring has batch size %d, this configuration %d", have.BatchSize, want.BatchSize)
	case startGiven && have.StartBatch != want.StartBatch:
		return Layout{}, fmt.Errorf("the ring starts at batch %d, --start says %d", have.StartBatch, want.StartBatch)
	case streamEnd != 0 && (have.TotalBatches == 0 || end != streamEnd), streamEnd == 0 && have.TotalBatches != 0:
		return Layout{}, fmt.Errorf("the ring's stream ends at batch %d (start %d + total %d), this configuration's at %d (0 = unbounded)",
			end, have.StartBatch, have.TotalBatches, streamEnd)
	}
	return have, nil
}
