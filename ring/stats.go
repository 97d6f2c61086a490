package ring

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
)

// ProducerInfo is one registry entry.
type ProducerInfo struct {
	Entry      int
	State      uint32 // EntryFree .. EntryReclaimed
	Generation uint32 // times the entry has been reused (PROTOCOL.md 2.6)
	PID        uint32
	Alive      bool
	Heartbeat  uint64
	Batches    uint64
	Writers    uint32
	Stopped    bool // alive but stopped (SIGSTOP, a debugger: /proc state T or t)
}

// SlotInfo is one slot's state word, decoded.
type SlotInfo struct {
	Lap   uint32
	State uint32 // SlotFree .. SlotReading
}

// Stats is a snapshot of a ring's counters and states (each field read atomically; the
// snapshot as a whole is not).
type Stats struct {
	Slots          int
	SlotBytes      int64
	SegmentBytes   int64
	StartBatch     uint64
	TotalBatches   uint64
	NextClaim      uint64
	BatchesWritten uint64
	BytesWritten   uint64
	ProducerWaitNs uint64
	ProducerBusyNs uint64

	ConsumerState     uint32
	ConsumerPID       uint32
	ConsumerAlive     bool
	ConsumerStopped   bool // alive but stopped (/proc state T or t)
	BatchesRead       uint64
	BytesRead         uint64
	ConsumerWaitNs    uint64
	ConsumerHeartbeat uint64

	CreatorPID   uint32
	CreatorAlive bool
	Named        bool

	Counters []CounterValues // the job's named counters (PROTOCOL.md 2.5a)

	Error     *ProducerError // nil if none is recorded
	SlotState []SlotInfo
	Full      int            // slots READY or READING
	Producers []ProducerInfo // entries that are not FREE
}

// Rates are what changed between two snapshots of a ring taken an interval apart: batches and
// 10^6 bytes per second written and read, the share of the producers' writer time spent
// waiting for a free slot (wait / (wait + busy), summed over writers) and the share of the
// interval the attached consumer spent waiting for a batch (both -1 when undefined), and the
// producers alive and still producing.
type Rates struct {
	WrittenPerS, ReadPerS, WrittenMBPerS, ReadMBPerS float64
	ProducerWait, ConsumerWait                       float64
	ProducersAlive                                   int
}

// RatesBetween compares snapshots prev and cur taken dt apart.
func RatesBetween(prev, cur Stats, dt time.Duration) Rates {
	r := Rates{ProducerWait: -1, ConsumerWait: -1}
	if s := dt.Seconds(); s > 0 {
		r.WrittenPerS = float64(cur.BatchesWritten-prev.BatchesWritten) / s
		r.ReadPerS = float64(cur.BatchesRead-prev.BatchesRead) / s
		r.WrittenMBPerS = float64(cur.BytesWritten-prev.BytesWritten) / s / 1e6
		r.ReadMBPerS = float64(cur.BytesRead-prev.BytesRead) / s / 1e6
		if cur.ConsumerState == ConsumerAttached {
			r.ConsumerWait = min(float64(cur.ConsumerWaitNs-prev.ConsumerWaitNs)/float64(dt.Nanoseconds()), 1)
		}
	}
	if wait, busy := cur.ProducerWaitNs-prev.ProducerWaitNs, cur.ProducerBusyNs-prev.ProducerBusyNs; wait+busy > 0 {
		r.ProducerWait = float64(wait) / float64(wait+busy)
	}
	for _, p := range cur.Producers {
		if p.Alive && (p.State == EntryActive || p.State == EntryClaiming) {
			r.ProducersAlive++
		}
	}
	return r
}

// Stats reads the ring's counters, slot states and producer registry.
func (r *Ring) Stats() (s Stats) {
	defer r.recoverFault(debug.SetPanicOnFault(true), nil)
	ld64 := func(off uint64) uint64 { return atomic.LoadUint64(r.u64(off)) }
	ld32 := func(off uint64) uint32 { return atomic.LoadUint32(r.u32(off)) }
	s = Stats{
		Slots: int(r.slots), SlotBytes: int64(r.g.slotBytes), SegmentBytes: int64(r.g.segmentBytes),
		StartBatch: r.layout.StartBatch, TotalBatches: r.layout.TotalBatches,
		NextClaim:      ld64(offNextClaim),
		BatchesWritten: ld64(offBatchesWritten), BytesWritten: ld64(offBytesWritten),
		ProducerWaitNs: ld64(offProducerWaitNs), ProducerBusyNs: ld64(offProducerBusyNs),
		BatchesRead: ld64(offBatchesRead), BytesRead: ld64(offBytesRead),
		ConsumerWaitNs: ld64(offConsumerWaitNs), ConsumerHeartbeat: ld64(offConsumerHeartbeat),
		Named: r.named, Error: r.errorRecord(), Counters: r.Counters(),
	}
	s.ConsumerState, s.ConsumerPID = r.consumerClaim()
	if s.ConsumerState == ConsumerAttached || s.ConsumerState == ConsumerClaiming {
		s.ConsumerAlive = !r.claimDead(s.ConsumerState, s.ConsumerPID)
		s.ConsumerStopped = s.ConsumerAlive && Stopped(s.ConsumerPID)
	}
	s.CreatorPID, s.CreatorAlive = r.Creator()
	s.SlotState = make([]SlotInfo, r.slots)
	for i := range s.SlotState {
		v := atomic.LoadUint32(r.slotState(uint64(i)))
		s.SlotState[i] = SlotInfo{Lap: v >> slotStateBits, State: v & slotStateMask}
		if st := v & slotStateMask; st == SlotReady || st == SlotReading {
			s.Full++
		}
	}
	for j := 0; j < MaxProducers; j++ {
		e := entryOff(j)
		st, gen := ld32(e+regState)&entryStateMask, ld32(e+regState)>>entryStateBits
		if st == EntryFree {
			continue
		}
		pi := ProducerInfo{Entry: j, State: st, Generation: gen, PID: ld32(e + regPID), Heartbeat: ld64(e + regHeartbeat),
			Batches: ld64(e + regBatches), Writers: ld32(e + regWriters)}
		pi.Alive = Alive(pi.PID, ld64(e+regStarttime))
		if st == EntryClaiming { // its starttime may not be written yet (PROTOCOL.md 2.6)
			pi.Alive = pi.PID != 0 && !pidGone(pi.PID) || pi.PID == 0
		}
		pi.Stopped = pi.Alive && Stopped(pi.PID)
		s.Producers = append(s.Producers, pi)
	}
	return s
}

var entryNames = [...]string{"FREE", "CLAIMING", "ACTIVE", "DONE", "FAILED", "RECLAIMED"}
var slotNames = [...]string{"FREE", "WRITING", "READY", "READING"}
var consumerNames = [...]string{"NONE", "CLAIMING", "ATTACHED", "CLOSED"}

func name(names []string, v uint32) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("?%d", v)
}

// EntryStateName returns the protocol name of a registry entry state.
func EntryStateName(v uint32) string { return name(entryNames[:], v) }

// SlotStateName returns the protocol name of a slot state.
func SlotStateName(v uint32) string { return name(slotNames[:], v) }

// ConsumerStateName returns the protocol name of a consumer state.
func ConsumerStateName(v uint32) string { return name(consumerNames[:], v) }

// String renders the snapshot for humans (`shmloader stat`).
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "slots %d x %d bytes, segment %d bytes, %d full\n", s.Slots, s.SlotBytes, s.SegmentBytes, s.Full)
	total := "unbounded"
	if s.TotalBatches != 0 {
		total = fmt.Sprint(s.TotalBatches)
	}
	fmt.Fprintf(&b, "stream: start %d, total %s, claimed %d, written %d (%d bytes), read %d (%d bytes)\n",
		s.StartBatch, total, s.NextClaim, s.BatchesWritten, s.BytesWritten, s.BatchesRead, s.BytesRead)
	fmt.Fprintf(&b, "producers: wait %.3f s, busy %.3f s; consumer: wait %.3f s\n",
		float64(s.ProducerWaitNs)/1e9, float64(s.ProducerBusyNs)/1e9, float64(s.ConsumerWaitNs)/1e9)
	fmt.Fprintf(&b, "creator pid %d alive=%v named=%v; consumer %s pid %d alive=%v heartbeat %d\n",
		s.CreatorPID, s.CreatorAlive, s.Named, ConsumerStateName(s.ConsumerState), s.ConsumerPID, s.ConsumerAlive, s.ConsumerHeartbeat)
	for _, p := range s.Producers {
		fmt.Fprintf(&b, "producer %d: %s pid %d alive=%v writers %d batches %d heartbeat %d\n",
			p.Entry, EntryStateName(p.State), p.PID, p.Alive, p.Writers, p.Batches, p.Heartbeat)
	}
	b.WriteString("slot states:")
	for i, sl := range s.SlotState {
		fmt.Fprintf(&b, " %d:%s/%d", i, SlotStateName(sl.State), sl.Lap)
	}
	b.WriteString("\n")
	for _, c := range s.Counters {
		if c.Scope == ScopeSource {
			fmt.Fprintf(&b, "counter %s: %v\n", c.Name, trimZeros(c.Values))
		} else {
			fmt.Fprintf(&b, "counter %s: %d\n", c.Name, c.Values[0])
		}
	}
	if s.Error != nil {
		fmt.Fprintf(&b, "error (producer %d): %s\n", s.Error.Producer, s.Error.Text)
	}
	return b.String()
}

// trimZeros drops the trailing zeros of a per-source counter (sources that counted nothing).
func trimZeros(v []uint64) []uint64 {
	n := len(v)
	for n > 0 && v[n-1] == 0 {
		n--
	}
	return v[:n]
}

// ConsumedAll reports whether the consumer has released every batch of a bounded stream.
func (r *Ring) ConsumedAll() bool {
	st := r.Stats()
	return st.TotalBatches != 0 && st.BatchesRead >= st.TotalBatches
}

// ReceivedAll reports whether the consumer has taken every batch of a bounded stream:
// released them all, or all but those it still holds (a consumer may exit holding the last
// one). A consumer that exits after that has not died mid-stream.
func (r *Ring) ReceivedAll() bool {
	st := r.Stats()
	held := uint64(0)
	for _, sl := range st.SlotState {
		if sl.State == SlotReading {
			held++
		}
	}
	return st.TotalBatches != 0 && st.BatchesRead+held >= st.TotalBatches
}
