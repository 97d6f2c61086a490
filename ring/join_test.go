package ring

import (
	"strings"
	"testing"
)

// TestJoinLayout covers every rule of --join compatibility (PROTOCOL.md 3.6, joining producer).
func TestJoinLayout(t *testing.T) {
	r := newHeapRing(t, testLayout()) // 4 slots, batch size 2, start 100, total 50: ends at 150
	unbounded := testLayout()
	unbounded.StartBatch, unbounded.TotalBatches = 7, 0
	ru := newHeapRing(t, unbounded)

	// A joiner without --start builds its layout from batch 0; the ring's start and total win.
	fromZero := testLayout()
	fromZero.StartBatch, fromZero.TotalBatches = 0, 150
	got, err := r.JoinLayout(fromZero, false, 150)
	if err != nil {
		t.Fatalf("JoinLayout(no --start) = %v", err)
	}
	if got.StartBatch != 100 || got.TotalBatches != 50 || got.Slots != 4 || got.BatchSize != 2 || len(got.Tensors) != 2 {
		t.Errorf("JoinLayout returned %+v, want the ring's layout", got)
	}
	if got, err := r.JoinLayout(testLayout(), true, 150); err != nil || got.StartBatch != 100 {
		t.Errorf("JoinLayout(same start given) = %+v, %v", got, err)
	}
	if got, err := ru.JoinLayout(testLayout(), false, 0); err != nil || got.StartBatch != 7 || got.TotalBatches != 0 {
		t.Errorf("JoinLayout(unbounded ring, unbounded config) = %+v, %v", got, err)
	}

	edit := func(f func(*Layout)) Layout { l := testLayout(); f(&l); return l }
	cases := []struct {
		name      string
		ring      *Ring
		want      Layout
		start     bool
		streamEnd uint64
		msg       string
	}{
		{"tensor dtype", r, edit(func(l *Layout) { l.Tensors[1].DType = Int32 }), true, 150, "tensor 1 is label int64[2] at offset 128"},
		{"tensor count", r, edit(func(l *Layout) { l.Tensors = l.Tensors[:1] }), true, 150, "tensor_count 2, this configuration has 1 tensors"},
		{"invalid layout", r, edit(func(l *Layout) { l.Slots = 0 }), true, 150, "slots 0"},
		{"slots", r, edit(func(l *Layout) { l.Slots = 5 }), true, 150, "the ring has 4 slots, this configuration 5"},
		{"batch size", r, edit(func(l *Layout) { l.BatchSize = 3 }), true, 150, "the ring has batch size 2, this configuration 3"},
		{"start given", r, edit(func(l *Layout) { l.StartBatch = 7 }), true, 150, "the ring starts at batch 100, --start says 7"},
		{"other end", r, testLayout(), false, 200, "the ring's stream ends at batch 150 (start 100 + total 50), this configuration's at 200 (0 = unbounded)"},
		{"unbounded config, bounded ring", r, testLayout(), false, 0, "stream ends at batch 150 (start 100 + total 50), this configuration's at 0"},
		{"bounded config, unbounded ring", ru, testLayout(), false, 50, "stream ends at batch 7 (start 7 + total 0), this configuration's at 50"},
		// An unbounded ring whose start equals the configured end is still unbounded.
		{"end at an unbounded ring's start", ru, testLayout(), false, 7, "stream ends at batch 7 (start 7 + total 0), this configuration's at 7"},
	}
	for _, c := range cases {
		got, err := c.ring.JoinLayout(c.want, c.start, c.streamEnd)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: JoinLayout = %v, want an error containing %q", c.name, err, c.msg)
		}
		if got.Tensors != nil || got.Slots != 0 {
			t.Errorf("%s: a refused join returned layout %+v", c.name, got)
		}
	}
}
