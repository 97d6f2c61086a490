package ring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Producer is one process's producer registry entry. Any number of goroutines may call
// Claim concurrently; each WriteSlot is filled and published by its claimer (several
// goroutines may fill one slot if they are joined before Publish).
type Producer struct {
	r     *Ring
	entry int
	gen   uint32 // the entry's generation (PROTOCOL.md 2.6)
	off   uint64 // registry entry offset

	outstanding atomic.Int64 // claims in progress (including ones not yet numbered)
	quit        atomic.Bool  // Done was called: Claims return io.EOF at once
	stop        atomic.Pointer[error]

	// Takeover of dead producers' claims (PROTOCOL.md 3.7, takeover.go).
	mu       sync.Mutex
	taken    []uint64      // batches taken over, not yet handed to a writer, ascending
	scanning atomic.Bool   // a takeover scan is running
	nextScan atomic.Uint64 // scanClock time of the claim path's next takeover scan
	tookOver atomic.Int64  // dead entries this producer marked RECLAIMED
}

// NewProducer returns this process's producer. On the ring's creator the first call takes
// over the entry that Create registered; otherwise (a joining producer, after Compatible) it
// registers a new entry. writers is informational (the registry's `writers`).
func (r *Ring) NewProducer(writers int) (*Producer, error) {
	var j int
	var gen uint32
	if r.creatorEntry >= 0 && r.creatorTaken.CompareAndSwap(false, true) {
		j, gen = r.creatorEntry, r.creatorGen
		atomicStore32(r.u32(entryOff(j)+regWriters), uint32(writers))
	} else {
		var err error
		if j, gen, err = r.register(writers); err != nil {
			return nil, err
		}
	}
	return &Producer{r: r, entry: j, gen: gen, off: entryOff(j)}, nil
}

func atomicStore32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// setState moves the producer's own entry from state from to state to, keeping its generation
// (the low half of the entry word, PROTOCOL.md 2.6).
func (p *Producer) setState(from, to uint32) bool {
	return atomic.CompareAndSwapUint32(p.r.u32(p.off+regState), entryLow(from, p.gen), entryLow(to, p.gen))
}

// Entry returns the producer's registry index.
func (p *Producer) Entry() int { return p.entry }

// WriteSlot is a claimed slot: fill its tensors, then Publish.
type WriteSlot struct {
	p       *Producer
	j       uint64 // relative sequence number
	slot    uint64
	lap     uint32
	claimed uint64 // monoNs when the claim was granted
	done    bool
}

// Seq returns the batch's absolute stream index (start_batch + j).
func (w *WriteSlot) Seq() uint64 { return w.p.r.layout.StartBatch + w.j }

// Index returns the batch's relative sequence number j (0 for the ring's first batch).
func (w *WriteSlot) Index() uint64 { return w.j }

// Slot returns the slot number.
func (w *WriteSlot) Slot() int { return int(w.slot) }

// Tensor returns the writable bytes of tensor i in this slot.
func (w *WriteSlot) Tensor(i int) []byte { return w.p.r.tensorIn(w.slot, i) }

// Payload returns the writable payload of this slot (slot_bytes bytes, all tensors).
func (w *WriteSlot) Payload() []byte { return w.p.r.slotPayload(w.slot) }

func (p *Producer) stopped() error {
	if e := p.stop.Load(); e != nil {
		return *e
	}
	return nil
}

// setStop records why the producer must stop (first reason wins) and wakes every sleeper.
func (p *Producer) setStop(err error) {
	if p.stop.CompareAndSwap(nil, &err) {
		p.r.WakeAll()
	}
}

// release ends one claim attempt; after Done the last one marks the entry DONE
// (PROTOCOL.md 2.6; at the natural end of a bounded stream claimBatch does, 3.7.3).
func (p *Producer) release() {
	if p.outstanding.Add(-1) == 0 && p.quit.Load() {
		p.setState(EntryActive, EntryDone)
	}
}

// Claim takes the next batch of the stream, a batch taken over from a dead producer first
// (PROTOCOL.md 3.7), records the claim at its position and waits until the consumer has granted
// the batch a free slot (3.1, 3.2): any slot it released, not one fixed by the batch number.
// It returns io.EOF when the stream is complete and every batch of it published (or after
// Done), ErrConsumerClosed or an error wrapping ErrConsumerGone when the consumer left, a
// *ProducerError when another producer recorded an error, or ctx's error. A Claim that fails
// after it recorded a claim leaves a hole in the stream, so it records an error for the
// consumer (except when the consumer is gone anyway).
func (p *Producer) Claim(ctx context.Context) (*WriteSlot, error) {
	if err := p.stopped(); err != nil {
		return nil, err
	}
	r := p.r
	p.outstanding.Add(1)
	j, taken, err := p.claimBatch(ctx)
	if err != nil {
		p.release()
		return nil, err
	}
	slot, lap, err := p.awaitGrant(ctx, &j, &taken)
	if err != nil {
		return nil, err
	}
	w := r.slotState(slot)
	if taken && atomic.LoadUint32(w) == slotWord(lap, SlotWriting) {
		// Its dead holder had begun to write it: the slot is ours to rewrite whole (3.2 step 3).
		return &WriteSlot{p: p, j: j, slot: slot, lap: lap, claimed: monoNs()}, nil
	}
	failpointBatch(FPSlotGranted, r.layout.StartBatch+j)
	if !atomic.CompareAndSwapUint32(w, slotWord(lap, SlotFree), slotWord(lap, SlotWriting)) {
		err := &ProtocolError{Slot: int(slot), Detail: fmt.Sprintf("state changed from FREE(lap %d) to %#x while producer entry %d claimed batch %d", lap, atomic.LoadUint32(w), p.entry, r.layout.StartBatch+j)}
		p.Fail(err)
		p.release()
		return nil, err
	}
	failpointBatch(FPSlotWriting, r.layout.StartBatch+j)
	return &WriteSlot{p: p, j: j, slot: slot, lap: lap, claimed: monoNs()}, nil
}

// awaitGrant waits until the consumer has granted batch *j a slot (PROTOCOL.md 3.2 step 3) and
// returns the slot and its lap. While it waits, a smaller batch taken over from a dead producer
// may be what the consumer needs first (it can hold the slots it would free while it waits for
// that one): the writer produces that one instead and leaves its claim, still recorded as its
// process's, to the next writer (*j and *taken change). A failure releases the claim attempt.
func (p *Producer) awaitGrant(ctx context.Context, j *uint64, taken *bool) (uint64, uint32, error) {
	r := p.r
	pos := *j % r.slots
	gw, waiters := r.grantLow(pos), r.grantWaiters(pos)
	tag := r.tagOf(*j)
	for i := 0; i < r.Spin && grantTag(atomic.LoadUint32(gw)) != tag; i++ {
	}
	var t0 uint64
	for {
		v := atomic.LoadUint32(gw)
		if grantTag(v) == tag {
			break
		}
		if t0 == 0 {
			t0 = monoNs()
		}
		waitWhile(gw, waiters, v, sliceFor(ctx))
		if grantTag(atomic.LoadUint32(gw)) == tag {
			break
		}
		if k, ok := p.swapTaken(*j); ok {
			*j, *taken = k, true
			return p.awaitGrant(ctx, j, taken)
		}
		if err := p.waitCheck(ctx); err != nil {
			if grantTag(atomic.LoadUint32(gw)) == tag {
				break
			}
			if !errors.Is(err, ErrConsumerGone) && !errors.Is(err, ErrConsumerClosed) && !isProducerError(err) {
				p.Fail(fmt.Errorf("producer pid %d stopped before batch %d: %w", os.Getpid(), r.layout.StartBatch+*j, err))
			}
			p.release()
			return 0, 0, err
		}
	}
	if t0 != 0 {
		atomic.AddUint64(r.u64(offProducerWaitNs), monoNs()-t0)
	}
	slot, lap, _ := r.grantOf(*j)
	return slot, lap, nil
}

func isProducerError(err error) bool {
	var pe *ProducerError
	return errors.As(err, &pe)
}

// waitCheck runs the producer's checks of PROTOCOL.md 3.5 after a wait round.
func (p *Producer) waitCheck(ctx context.Context) error {
	if err := p.stopped(); err != nil {
		return err
	}
	if err := p.r.consumerStatus(); err != nil {
		return err
	}
	if e := p.r.errorRecord(); e != nil {
		return e
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.maybeScan()
	atomic.AddUint64(p.r.u64(p.off+regHeartbeat), 1)
	return nil
}

// Publish hands the filled slot to the consumer (PROTOCOL.md 3.2 step 4). Every goroutine
// that wrote into the slot must have finished (joined) before Publish is called, and none
// may touch the slot afterwards.
func (w *WriteSlot) Publish() error {
	if w.done {
		return fmt.Errorf("gobatch ring: batch %d published twice", w.Seq())
	}
	w.done = true
	p, r := w.p, w.p.r
	st, waiters := r.slotState(w.slot), r.slotWaiters(w.slot)
	if v := atomic.LoadUint32(st); v != slotWord(w.lap, SlotWriting) {
		err := &ProtocolError{Slot: int(w.slot), Detail: fmt.Sprintf("state %#x at publish of batch %d, want WRITING(lap %d)", v, w.Seq(), w.lap)}
		p.Fail(err)
		p.release()
		return err
	}
	failpointBatch(FPSlotFilled, w.Seq())
	h := r.slotHeader(w.slot)
	*r.u64(h + shSeq) = w.Seq()
	*r.u32(h + shOwner) = uint32(p.entry + 1)
	*r.u64(h + shNbytes) = r.g.slotBytes
	now := monoNs()
	*r.u64(h + shPublishNs) = now
	atomic.AddUint64(r.u64(offBatchesWritten), 1)
	atomic.AddUint64(r.u64(offBytesWritten), r.g.slotBytes)
	atomic.AddUint64(r.u64(offProducerBusyNs), now-w.claimed)
	atomic.AddUint64(r.u64(p.off+regBatches), 1)
	atomic.StoreUint32(st, slotWord(w.lap, SlotReady))
	wake(st, waiters)
	failpointBatch(FPSlotReady, w.Seq())
	p.release()
	return nil
}

// Abandon gives up a claimed slot that cannot be filled. The stream then has a hole, so
// Abandon records err as the ring's error (the consumer fails with it) and stops this producer.
func (w *WriteSlot) Abandon(err error) {
	if w.done {
		return
	}
	w.done = true
	w.p.Fail(fmt.Errorf("batch %d: %w", w.Seq(), err))
	w.p.release()
}

// Fail records err in the ring's error record if no error is recorded yet (first error
// wins; PROTOCOL.md 2.5), marks this producer FAILED and wakes every waiter. Later Claims
// return the error.
func (p *Producer) Fail(err error) {
	r := p.r
	defer r.recoverFault(debug.SetPanicOnFault(true), nil)
	text := truncateUTF8(err.Error(), MaxErrorText)
	if atomic.CompareAndSwapUint32(r.u32(offErrorState), errNone, errWriting) {
		clear(r.mem[offErrorText : offErrorText+MaxErrorText])
		copy(r.mem[offErrorText:], text)
		atomic.StoreUint32(r.u32(offErrorLen), uint32(len(text)))
		atomic.StoreUint32(r.u32(offErrorProducer), uint32(p.entry+1))
		atomic.StoreUint32(r.u32(offErrorState), errSet)
	}
	atomic.StoreUint32(r.u32(p.off+regState), entryLow(EntryFailed, p.gen))
	var stop error = &ProducerError{Producer: p.entry + 1, Text: text}
	p.stop.CompareAndSwap(nil, &stop)
	r.WakeAll()
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Done ends this producer: later Claims return io.EOF, and the entry becomes DONE as soon as
// every slot it claimed is published (at once if none is in progress). Use it to end an
// unbounded stream; with a bounded stream the entry becomes DONE by itself once the stream is
// claimed and published.
func (p *Producer) Done() {
	p.quit.Store(true)
	if p.outstanding.Load() == 0 {
		p.setState(EntryActive, EntryDone)
	}
}

// SetParentDeathSignal asks the kernel to send sig to this process when its parent dies
// (PR_SET_PDEATHSIG; the "parent" is the thread that forked this process) and then checks that
// the parent is still parentPID, since a parent that died before the call sends nothing.
// Call it early in main; Watch with WatchOptions.ParentPID is the check that does not depend
// on threads.
func SetParentDeathSignal(sig unix.Signal, parentPID int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	return ParentGone(parentPID)
}

// ParentGone returns an error wrapping ErrParentDied when this process's parent is no longer
// parentPID (it died, and the process was reparented), nil otherwise.
func ParentGone(parentPID int) error {
	if now := os.Getppid(); now != parentPID {
		return fmt.Errorf("%w (was pid %d, parent is now %d)", ErrParentDied, parentPID, now)
	}
	return nil
}

// WatchOptions configure Watch.
type WatchOptions struct {
	// ParentPID, if not 0, is the pid of the process that started this one (--memfd):
	// Watch stops when getppid() no longer returns it.
	ParentPID int
	// Interval between checks; 0 means 100 ms (the protocol's maximum).
	Interval time.Duration
}

// Watch is the producer watchdog of PROTOCOL.md 3.5. Until ctx ends it checks, every
// interval, whether the consumer died (an error wrapping ErrConsumerGone) or closed
// (ErrConsumerClosed), whether the parent died (ErrParentDied) and whether another producer
// recorded an error (*ProducerError), and increments the entry's heartbeat. On any of these
// it makes every pending and future Claim return the same error and returns it; when ctx
// ends it returns ctx.Err(). Run it in its own goroutine.
//
// A fault on a page of a named ring whose file was cut short ends it with a *LostError (lost.go).
func (p *Producer) Watch(ctx context.Context, opt WatchOptions) (err error) {
	defer func() {
		if errors.Is(err, ErrSegmentLost) {
			p.setStop(err)
		}
	}()
	defer p.r.recoverFault(debug.SetPanicOnFault(true), &err)
	iv := opt.Interval
	if iv <= 0 || iv > waitSlice {
		iv = waitSlice
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		err := p.r.consumerStatus()
		if lost := p.r.Lost(); lost != nil { // another goroutine met the cut first
			err = lost
		}
		if err == nil && opt.ParentPID != 0 {
			err = ParentGone(opt.ParentPID)
		}
		if err == nil {
			if e := p.r.errorRecord(); e != nil {
				err = e
			}
		}
		if err != nil {
			p.setStop(err)
			return err
		}
		p.takeoverScan()
		atomic.AddUint64(p.r.u64(p.off+regHeartbeat), 1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
