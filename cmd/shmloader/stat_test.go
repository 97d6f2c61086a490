package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gobatch/gobatch/ring"
)

func TestMakeStatView(t *testing.T) {
	prev := ring.Stats{BatchesWritten: 10, BytesWritten: 10e6, BatchesRead: 8, BytesRead: 8e6,
		ProducerWaitNs: 1e9, ProducerBusyNs: 1e9, ConsumerWaitNs: 5e8}
	cur := ring.Stats{Slots: 4, Full: 3, SlotBytes: 1e6, BatchesWritten: 30, BytesWritten: 30e6, BatchesRead: 28, BytesRead: 28e6,
		ProducerWaitNs: 1e9 + 3e8, ProducerBusyNs: 1e9 + 9e8, ConsumerWaitNs: 5e8 + 5e8,
		ConsumerState: ring.ConsumerAttached, ConsumerPID: 42, ConsumerAlive: true, CreatorPID: 7, CreatorAlive: true,
		Producers: []ring.ProducerInfo{
			{Entry: 0, State: ring.EntryActive, PID: 7, Alive: true, Writers: 2, Batches: 20},
			{Entry: 1, State: ring.EntryActive, PID: 8, Alive: false},
			{Entry: 2, State: ring.EntryDone, PID: 9, Alive: true},
		},
		Error: &ring.ProducerError{Producer: 2, Text: "zarr chunk x/0.0 is corrupt"},
	}
	v := makeStatView("r", prev, cur, 2*time.Second, time.Unix(0, 0))
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if v.SlotsFull != 3 || v.SlotsTotal != 4 || !near(v.WrittenPerS, 10) || !near(v.ReadPerS, 10) ||
		!near(v.WrittenMBPerS, 10) || !near(v.ReadMBPerS, 10) || !near(v.ProducerWait, 0.25) || !near(v.ConsumerWait, 0.25) ||
		v.ProducersAlive != 1 || v.ConsumerPID != 42 || v.Error != "zarr chunk x/0.0 is corrupt" {
		t.Fatalf("%+v", v)
	}
	txt := v.text()
	for _, want := range []string{"slots 3/4 full", "write 10.0 batches/s 10.0 MB/s", "wait: producers 25% consumer 25%",
		"producers alive 1 [0:ACTIVE pid 7, 1:ACTIVE pid 8 (dead), 2:DONE pid 9]", "consumer ATTACHED pid 42",
		"error: zarr chunk x/0.0 is corrupt"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	// Nothing moved and no consumer: fractions are undefined, not 0.
	idle := makeStatView("r", cur, ring.Stats{ProducerWaitNs: cur.ProducerWaitNs, ProducerBusyNs: cur.ProducerBusyNs}, time.Second, time.Unix(0, 0))
	if idle.ProducerWait != -1 || idle.ConsumerWait != -1 || !strings.Contains(idle.text(), "producers - consumer -") {
		t.Fatalf("idle: %+v", idle)
	}
}
