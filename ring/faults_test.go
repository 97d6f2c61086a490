package ring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gobatch/gobatch/shm"
)

// Fault trials: a child process (this test binary in a role of childMain) stops itself at an
// exact protocol state through GOBATCH_FAILPOINT, and the survivor must see it within 1 s with
// a clear error, no hang, and nothing left in the private shm dir. GOBATCH_FAULT_REPS repeats
// each trial (`make faults`); the default is one.

const detectWithin = time.Second

func faultReps() int { return max(envInt("GOBATCH_FAULT_REPS", 1), 1) }

// faultChild is a child that may die before it prints anything.
type faultChild struct {
	cmd  *exec.Cmd
	died chan time.Time // when Wait returned
}

func startFaultChild(t *testing.T, role, failpoint string, env ...string) *faultChild {
	t.Helper()
	return startFaultChildIn(t, false, role, failpoint, env...)
}

// startStoppedChild starts a child whose failpoint stops it (action stop) in a process group
// of its own: in this process's group, which is orphaned under a harness that makes it a
// session leader (tools/faultns.py), the kernel would continue it (SIGHUP, SIGCONT) as soon as
// another member of the group exits.
func startStoppedChild(t *testing.T, role, failpoint string, env ...string) *faultChild {
	t.Helper()
	return startFaultChildIn(t, true, role, failpoint, env...)
}

func startFaultChildIn(t *testing.T, ownGroup bool, role, failpoint string, env ...string) *faultChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "GOBATCH_RING_ROLE="+role, "GOBATCH_SHM_DIR="+shm.Dir, FailpointEnv+"="+failpoint)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &faultChild{cmd: cmd, died: make(chan time.Time, 1)}
	go func() { cmd.Wait(); c.died <- time.Now() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-c.died })
	return c
}

// killedBy waits (bounded) for the child's death and checks it stopped itself with SIGKILL.
func (c *faultChild) killedBy(t *testing.T, fp string) time.Time {
	t.Helper()
	select {
	case at := <-c.died:
		c.died <- at
		if ws := c.cmd.ProcessState.String(); !strings.Contains(ws, "killed") {
			t.Fatalf("child with failpoint %s: %s, want killed by its failpoint", fp, ws)
		}
		return at
	case <-time.After(10 * time.Second):
		t.Fatalf("child with failpoint %s did not reach it within 10 s", fp)
	}
	return time.Time{}
}

type faultTally struct {
	name  string
	n     int
	worst time.Duration
}

func (f *faultTally) add(d time.Duration) {
	f.n++
	f.worst = max(f.worst, d)
}

func (f *faultTally) report(t *testing.T) {
	fmt.Printf("FAULT %-44s %3d/%d detected, worst %v\n", f.name, f.n, faultReps(), f.worst.Round(time.Millisecond))
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d files left in %s (first %s)", len(ents), dir, ents[0].Name())
	}
}

// TestFaultProducerDies: a joining producer process dies at each producer-side state while
// the ring's creator (this process) keeps producing. The survivor takes the dead producer's
// claims over (PROTOCOL.md 3.7), so the consumer (this process) reads every batch of the
// bounded stream exactly once, in order, each holding its own pattern, and the death is
// taken over within 1 s whether or not the survivor keeps ahead of the consumer, and whether
// or not it runs a watchdog (the claim path scans too).
func TestFaultProducerDies(t *testing.T) {
	for _, fp := range []string{FPProducerRegistering, FPProducerActive, FPSlotClaimed + ":3", FPSlotGranted + ":3", FPSlotWriting + ":3", FPSlotFilled + ":3", FPSlotReady + ":3"} {
		t.Run(strings.ReplaceAll(fp, ":", "@"), func(t *testing.T) {
			tally := &faultTally{name: "producer dies at " + fp + ", taken over"}
			for k := 0; k < faultReps(); k++ {
				tally.add(producerDiesOnce(t, fp, k%2 == 1, k%4 < 2, nil))
			}
			tally.report(t)
		})
	}
}

// TestFaultProducerDiesWithStaleSlots: as TestFaultProducerDies at the slot states, while the
// consumer keeps batches 1, 4 and 6 for the whole stream (stale references): their slots are
// never granted again, the rest of the stream goes through the other slots (PROTOCOL.md 3.1), the
// dead producer's batches are taken over there, and the kept batches never change.
func TestFaultProducerDiesWithStaleSlots(t *testing.T) {
	keep := func(k uint64) bool { return k == 1 || k == 4 || k == 6 }
	for _, fp := range []string{FPSlotClaimed + ":9", FPSlotGranted + ":9", FPSlotWriting + ":9", FPSlotFilled + ":9", FPSlotReady + ":9"} {
		t.Run(strings.ReplaceAll(fp, ":", "@"), func(t *testing.T) {
			tally := &faultTally{name: "producer dies at " + fp + ", 3 stale slots, taken over"}
			for k := 0; k < faultReps(); k++ {
				tally.add(producerDiesOnce(t, fp, k%2 == 1, k%4 < 2, keep))
			}
			tally.report(t)
		})
	}
}

// faultRing is a named ring in a private shm dir that this process created and consumes.
type faultRing struct {
	name string
	seg  *shm.Segment
	r    *Ring
	c    *Consumer
}

func newFaultRing(t *testing.T, l Layout) *faultRing {
	t.Helper()
	dir := t.TempDir()
	old := shm.Dir
	shm.Dir = dir
	f := &faultRing{name: fmt.Sprintf("f%d", time.Now().UnixNano()%1e9)}
	seg, err := shm.Create(f.name, l.SegmentBytes())
	if err != nil {
		t.Fatal(err)
	}
	f.seg = seg
	t.Cleanup(func() { f.seg.Close(); shm.Unlink(f.name); shm.Dir = old; emptyDir(t, dir) })
	if f.r, err = Create(seg.Bytes(), l, true); err != nil {
		t.Fatal(err)
	}
	if f.c, err = f.r.NewConsumer(); err != nil {
		t.Fatal(err)
	}
	return f
}

// readAll reads the whole bounded stream, holding each batch to its index and its pattern
// (exactly once, in order, unchanged), sleeping pause after each; it returns the first error.
func (f *faultRing) readAll(ctx context.Context, pause time.Duration) error {
	return f.readAllKeeping(ctx, pause, nil)
}

// readAllKeeping is readAll that keeps the batches keep names (never released) and checks at
// the end that they are unchanged.
func (f *faultRing) readAllKeeping(ctx context.Context, pause time.Duration, keep func(uint64) bool) error {
	var kept []*ReadSlot
	for k := uint64(0); ; k++ {
		s, err := f.c.Next(ctx)
		if err == io.EOF {
			if k != f.r.layout.TotalBatches {
				return fmt.Errorf("end of stream after %d batches, want %d", k, f.r.layout.TotalBatches)
			}
			for _, s := range kept {
				if w := check(s.Tensor(0), s.Seq()); w >= 0 {
					return fmt.Errorf("kept batch %d was overwritten (word %d)", s.Seq(), w)
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch %d: %w", k, err)
		}
		if s.Seq() != k {
			return fmt.Errorf("batch %d delivered as batch %d", s.Seq(), k)
		}
		if w := check(s.Tensor(0), s.Seq()); w >= 0 {
			return fmt.Errorf("batch %d: word %d is not its own", k, w)
		}
		if keep != nil && keep(k) {
			kept = append(kept, s)
		} else {
			f.c.Release(s)
		}
		time.Sleep(pause)
	}
}

// reclaimedAt polls registry entry e until it is RECLAIMED and reports when (zero if ctx ends).
func (f *faultRing) reclaimedAt(ctx context.Context, e int) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			if f.r.EntryState(e) == EntryReclaimed {
				out <- time.Now()
				return
			}
			time.Sleep(time.Millisecond)
		}
		out <- time.Time{}
	}()
	return out
}

// waitEntry waits (bounded) until registry entry e is no longer FREE.
func (f *faultRing) waitEntry(t *testing.T, e int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); f.r.EntryState(e) == EntryFree; {
		if time.Now().After(end) {
			t.Fatalf("registry entry %d not taken within 10 s", e)
		}
		time.Sleep(time.Millisecond)
	}
}

func producerDiesOnce(t *testing.T, fp string, ahead, watch bool, keep func(uint64) bool) time.Duration {
	const total = 400
	f := newFaultRing(t, streamLayout(8, total, 16))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := startFaultChild(t, "join-produce", fp, "RING="+f.name, "SLOTS=8", "WORDS=16", fmt.Sprint("TOTAL=", total))
	f.waitEntry(t, 1)
	reclaimed := f.reclaimedAt(ctx, 1)
	p, err := f.r.NewProducer(2)
	if err != nil {
		t.Fatal(err)
	}
	// ahead: the survivor is fast and the consumer slow, so the consumer never waits and only
	// the survivor can see the death; otherwise the consumer waits on the survivor.
	delay, pause := 2*time.Millisecond, time.Duration(0)
	if ahead {
		delay, pause = 0, time.Millisecond
	}
	if watch {
		go p.Watch(ctx, WatchOptions{})
	}
	prodDone := make(chan error, 1)
	go func() { prodDone <- produce(ctx, p, 2, delay) }()
	if err := f.readAllKeeping(ctx, pause, keep); err != nil {
		t.Fatalf("failpoint %s (ahead %v, watchdog %v): %v", fp, ahead, watch, err)
	}
	died := ch.killedBy(t, fp)
	at := <-reclaimed
	if at.IsZero() {
		t.Fatalf("failpoint %s: the dead producer's entry never became RECLAIMED", fp)
	}
	lat := max(at.Sub(died), 0)
	if lat > detectWithin {
		t.Fatalf("failpoint %s (ahead %v, watchdog %v): taken over after %v, want within %v", fp, ahead, watch, lat, detectWithin)
	}
	if err := <-prodDone; err != nil {
		t.Fatalf("survivor: %v", err)
	}
	if p.TookOver() != 1 {
		t.Fatalf("survivor took over %d dead producers, want 1", p.TookOver())
	}
	f.c.Close()
	return lat
}

// TestFaultTakeoverDies: a producer that has taken a dead producer's claim over dies itself,
// right after the takeover CAS (slot-reclaimed) or after marking the first one RECLAIMED
// (producer-reclaimed); the next live producer takes both over and the stream is read whole,
// once, in order.
func TestFaultTakeoverDies(t *testing.T) {
	for _, fp := range []string{FPSlotReclaimed, FPProducerReclaimed} {
		t.Run(fp, func(t *testing.T) {
			tally := &faultTally{name: "taker dies at " + fp + ", taken over"}
			for k := 0; k < faultReps(); k++ {
				tally.add(takeoverDiesOnce(t, fp))
			}
			tally.report(t)
		})
	}
}

func takeoverDiesOnce(t *testing.T, fp string) time.Duration {
	const total = 64
	f := newFaultRing(t, streamLayout(8, total, 16))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env := []string{"RING=" + f.name, "SLOTS=8", "WORDS=16", fmt.Sprint("TOTAL=", total)}
	read := make(chan error, 1)
	go func() { read <- f.readAll(ctx, 0) }()
	// The first dies holding batch 2 half written; the second takes it over and dies too. This
	// process's producer (the creator's entry, alive but not scanning until it starts) is the
	// last one left.
	first := startFaultChild(t, "join-produce", FPSlotFilled+":3", env...)
	first.killedBy(t, FPSlotFilled)
	second := startFaultChild(t, "join-produce", fp, env...)
	died := second.killedBy(t, fp)
	if c := atomic.LoadUint64(f.r.slotClaim(2)); claimedBatch(c) != 2 || claimHolder(c) != 2 {
		t.Fatalf("slot 2's claim word %#x after the second death, want batch 2 held by entry 2", c)
	}
	reclaimed := f.reclaimedAt(ctx, 2)
	p, err := f.r.NewProducer(1)
	if err != nil {
		t.Fatal(err)
	}
	prodDone := make(chan error, 1)
	go func() { prodDone <- produce(ctx, p, 1, 0) }()
	if err := <-read; err != nil {
		t.Fatalf("failpoint %s: %v", fp, err)
	}
	at := <-reclaimed
	if err := <-prodDone; err != nil {
		t.Fatalf("producer: %v", err)
	}
	for e := 1; e <= 2; e++ {
		if st := atomic.LoadUint32(f.r.u32(entryOff(e) + regState)); st != EntryReclaimed {
			t.Fatalf("entry %d is %s after the takeover, want RECLAIMED", e, EntryStateName(st))
		}
	}
	f.c.Close()
	return max(at.Sub(died), 0)
}

// TestFaultReuseRacesTakeover: a RECLAIMED registry entry is reused (PROTOCOL.md 2.6) while
// a takeover scan of its previous, dead holder is still running. Exactly: producer A (entry 1)
// dies holding batch 2; producer S takes batch 2 over and stops itself right after the takeover
// CAS (slot-reclaimed:stop), in the middle of its scan of entry 1; this process's producer
// scans, finds nothing of A's left and marks entry 1 RECLAIMED; the registry being full
// otherwise, joiner N reuses entry 1 (generation 1) and holds batch 3 unpublished. Then S goes
// on with its stale view of entry 1: it must neither take N's claim (a live producer's: both
// would then write and publish batch 3) nor mark N's entry RECLAIMED. Once N is killed, S takes
// batch 3 over, and the stream is read whole, once, in order.
func TestFaultReuseRacesTakeover(t *testing.T) {
	tally := &faultTally{name: "entry reused during a takeover scan"}
	for k := 0; k < faultReps(); k++ {
		tally.add(reuseRacesTakeoverOnce(t))
	}
	tally.report(t)
}

func reuseRacesTakeoverOnce(t *testing.T) time.Duration {
	const total = 64
	f := newFaultRing(t, streamLayout(8, total, 16))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env := []string{"RING=" + f.name, "SLOTS=8", "WORDS=16", fmt.Sprint("TOTAL=", total)}
	a := startFaultChild(t, "join-produce", FPSlotFilled+":3", env...)
	a.killedBy(t, FPSlotFilled) // entry 1, generation 0: batches 0 and 1 published, 2 WRITING
	s := startStoppedChild(t, "join-produce", FPSlotReclaimed+":1:stop", env...)
	sPID := uint32(s.cmd.Process.Pid)
	waitFor(t, "S to stop at slot-reclaimed", func() bool { return Stopped(sPID) })
	if c := atomic.LoadUint64(f.r.slotClaim(2)); c != batchClaim(2, 2, 0) {
		t.Fatalf("slot 2's claim word %#x, want batch 2 taken over by entry 2", c)
	}
	// Only entry 1 may be reused: entries 3 .. 31 are taken (finished producers).
	own := uint32(os.Getpid())
	for e := 3; e < MaxProducers; e++ {
		atomic.StoreUint64(f.r.entryWordOf(e), entryWord(EntryDone, 0, own))
	}
	p, err := f.r.NewProducer(1)
	if err != nil {
		t.Fatal(err)
	}
	p.takeoverScan() // entry 1 owes nothing (S holds batch 2 now): RECLAIMED
	if st := f.r.EntryState(1); st != EntryReclaimed {
		t.Fatalf("entry 1 is %s after this process's scan, want RECLAIMED", EntryStateName(st))
	}
	n := startFaultChild(t, "join-produce", "", append(env, "HANG_AFTER=0")...)
	nPID := uint32(n.cmd.Process.Pid)
	nClaim := batchClaim(3, 1, 1)
	for end := time.Now().Add(10 * time.Second); atomic.LoadUint64(f.r.slotClaim(3)) != nClaim ||
		atomic.LoadUint64(f.r.entryWordOf(1)) != entryWord(EntryActive, 1, nPID); time.Sleep(time.Millisecond) {
		exited := false
		select {
		case at := <-n.died:
			n.died <- at
			exited = true
		default:
		}
		if exited || !Stopped(sPID) || time.Now().After(end) {
			st, gen, pid := entryParts(atomic.LoadUint64(f.r.entryWordOf(1)))
			t.Fatalf("N (pid %d, exited %v) did not reuse entry 1 and claim batch 3 within 10 s while S stayed stopped (%v): slot 3's claim %#x, entry 1 %s generation %d pid %d; stats %+v",
				nPID, exited, Stopped(sPID), atomic.LoadUint64(f.r.slotClaim(3)), EntryStateName(st), gen, pid, f.r.Stats())
		}
	}
	if !Stopped(sPID) {
		t.Fatal("S was continued before this test continued it: the race is not set up")
	}
	read := make(chan error, 1)
	go func() { read <- f.readAll(ctx, 0) }()
	s.cmd.Process.Signal(syscall.SIGCONT)
	// S finishes its stale scan and produces batch 2 and what follows; the consumer then waits
	// for batch 3, which N holds.
	waitFor(t, "batch 2 published by S", func() bool {
		return f.r.published(2) || claimedBatch(atomic.LoadUint64(f.r.slotClaim(2))) > 2 // or the slot has moved on
	})
	time.Sleep(3 * waitSlice) // S's claim path scans every wait slice
	if c := atomic.LoadUint64(f.r.slotClaim(3)); c != nClaim {
		t.Fatalf("slot 3's claim word %#x after S resumed, want %#x (batch 3 held by the live N, entry 1 generation 1)", c, nClaim)
	}
	if w := atomic.LoadUint64(f.r.entryWordOf(1)); w != entryWord(EntryActive, 1, nPID) {
		st, gen, pid := entryParts(w)
		t.Fatalf("entry 1 is %s, generation %d, pid %d after S resumed, want ACTIVE, 1, %d (N)", EntryStateName(st), gen, pid, nPID)
	}
	reclaimed := f.reclaimedAt(ctx, 1)
	n.cmd.Process.Kill()
	died := <-n.died
	n.died <- died
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	at := <-reclaimed
	if at.IsZero() {
		t.Fatal("N's entry never became RECLAIMED")
	}
	if w := atomic.LoadUint64(f.r.entryWordOf(1)); w != entryWord(EntryReclaimed, 1, nPID) {
		t.Fatalf("entry 1 word %#x after N's death, want RECLAIMED, generation 1, pid %d", w, nPID)
	}
	f.c.Close()
	select {
	case at := <-s.died:
		s.died <- at
		if !s.cmd.ProcessState.Success() {
			t.Fatalf("S: %s", s.cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("S did not exit within 10 s of the consumer's close")
	}
	return max(at.Sub(died), 0)
}

// waitFor polls cond (bounded: 10 s) and fails the test naming what it waited for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestFaultConsumerDies: the consumer process dies at each consumer state; the producer's
// watchdog sees an ATTACHED consumer's death within 1 s, and a consumer that died CLAIMING
// leaves a claim that the next consumer takes over (and that GC resets).
func TestFaultConsumerDies(t *testing.T) {
	for _, fp := range []string{FPConsumerClaiming, FPConsumerAttached, FPConsumerReading + ":3", FPConsumerReleased + ":3"} {
		t.Run(strings.ReplaceAll(fp, ":", "@"), func(t *testing.T) {
			tally := &faultTally{name: "consumer dies at " + fp}
			for k := 0; k < faultReps(); k++ {
				tally.add(consumerDiesOnce(t, fp, k%2 == 1))
			}
			tally.report(t)
		})
	}
}

func consumerDiesOnce(t *testing.T, fp string, viaGC bool) time.Duration {
	dir := t.TempDir()
	old := shm.Dir
	shm.Dir = dir
	defer func() { shm.Dir = old }()
	name := fmt.Sprintf("f%d", time.Now().UnixNano()%1e9)
	l := streamLayout(4, 0, 16)
	seg, err := shm.Create(name, l.SegmentBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { seg.Close(); shm.Unlink(name); emptyDir(t, dir) }()
	r, err := Create(seg.Bytes(), l, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.NewProducer(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	watch := make(chan error, 1)
	go func() { watch <- p.Watch(ctx, WatchOptions{}) }()
	prodDone := make(chan error, 1)
	go func() { prodDone <- produce(ctx, p, 1, 0) }()
	ch := startFaultChild(t, "consume", fp, "RING="+name, "SLOTS=4", "WORDS=16")
	died := ch.killedBy(t, fp)
	if strings.HasPrefix(fp, FPConsumerClaiming) {
		// The claim is dead but as good as NONE: the producer keeps waiting for a consumer.
		if st, pid := r.consumerClaim(); st != ConsumerClaiming || pid != uint32(ch.cmd.Process.Pid) {
			t.Fatalf("claim word (%d, %d) after the death, want (CLAIMING, %d)", st, pid, ch.cmd.Process.Pid)
		}
		var lat time.Duration
		if viaGC {
			res, err := GC(GCOptions{})
			if err != nil || len(res) != 1 || res[0].Removed || !strings.Contains(res[0].Reason, "reclaimed") {
				t.Fatalf("GC: %v %+v, want the ring kept and its claim reclaimed", err, res)
			}
			if st, _ := r.consumerClaim(); st != ConsumerNone {
				t.Fatalf("consumer_state %d after GC, want NONE", st)
			}
		}
		c, err := r.NewConsumer()
		lat = time.Since(died)
		if err != nil {
			t.Fatalf("the next consumer after a death while CLAIMING: %v", err)
		}
		for k := 0; k < 10; k++ {
			s, err := c.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s.Seq() != uint64(k) || check(s.Tensor(0), s.Seq()) >= 0 {
				t.Fatalf("batch %d: seq %d or payload wrong after a reclaim", k, s.Seq())
			}
			c.Release(s)
		}
		c.Close()
		if err := <-watch; !errors.Is(err, ErrConsumerClosed) {
			t.Fatalf("watchdog: %v, want ErrConsumerClosed", err)
		}
		<-prodDone
		return lat
	}
	var err2 error
	select {
	case err2 = <-watch:
	case <-time.After(5 * time.Second):
		t.Fatalf("failpoint %s: the producer's watchdog did not see the consumer's death within 5 s", fp)
	}
	lat := time.Since(died)
	if !errors.Is(err2, ErrConsumerGone) || !strings.Contains(err2.Error(), fmt.Sprint(ch.cmd.Process.Pid)) {
		t.Fatalf("failpoint %s: watchdog returned %v, want ErrConsumerGone naming pid %d", fp, err2, ch.cmd.Process.Pid)
	}
	if lat > detectWithin {
		t.Fatalf("failpoint %s: consumer death seen after %v", fp, lat)
	}
	<-prodDone
	// A new consumer is refused, naming the dead one.
	if _, err := r.NewConsumer(); err == nil || !strings.Contains(err.Error(), "died after attaching") {
		t.Fatalf("attach after the consumer's death: %v, want a refusal naming the death", err)
	}
	return lat
}

func TestFailpointParse(t *testing.T) {
	for _, bad := range []string{"nope", FPSlotReady + ":0", FPSlotReady + ":x", FPSlotReady + ":1:boom", "a:1:2:3"} {
		if _, err := parseFailpoint(bad); err == nil {
			t.Errorf("parseFailpoint(%q) accepted", bad)
		}
	}
	fp, err := parseFailpoint(FPSlotReady + ":4:stop")
	if err != nil || fp.count != 4 || fp.sig.String() != "stopped (signal)" {
		t.Fatalf("parseFailpoint: %+v %v", fp, err)
	}
	if fp, err := parseFailpoint(""); fp != nil || err != nil {
		t.Fatal("empty failpoint armed")
	}
}

// TestFailpointsDocumented: every failpoint is in PROTOCOL.md's appendix A.
func TestFailpointsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b[strings.Index(string(b), "## Appendix A"):])
	for _, n := range Failpoints {
		if !strings.Contains(doc, "| `"+n+"` |") {
			t.Errorf("failpoint %s is not in PROTOCOL.md appendix A", n)
		}
	}
}

var _ = io.EOF
