package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// stopGrace is how long run waits for reader goroutines to return after it decided to stop
// (a reader may be inside a slow read). After that it exits without unmapping.
const stopGrace = 2 * time.Second

// producerRun is one `shmloader run` process.
type producerRun struct {
	log    zerolog.Logger
	flags  runFlags
	cfg    *config.Config
	layout ring.Layout
	src    *runSource     // every configured source, as one sampler.Source
	stream sampler.Stream // this rank's share of the global batches
	parent *parentWatch   // --memfd: the trainer that started this process; nil otherwise
	sigc   chan os.Signal // SIGINT, SIGTERM

	seg     *shm.Segment
	r       *ring.Ring
	p       *ring.Producer
	creator bool // this process created the ring (it unlinks a named one at exit)
}

func (pr *producerRun) run() int {
	if code := pr.attach(); code != exitOK {
		return code
	}
	unmap := true
	defer func() {
		if pr.creator && pr.flags.ring != "" {
			if err := shm.Unlink(pr.flags.ring); err != nil {
				pr.log.Warn().Err(err).Msg("unlink")
			}
		}
		if unmap {
			pr.seg.Close()
		}
	}()
	ev := pr.log.Info().Str("config", pr.flags.config).Int("readers", pr.flags.readers).
		Int("slots", pr.layout.Slots).Int64("slot_bytes", pr.r.SlotBytes()).Int64("segment_bytes", pr.r.SegmentBytes()).
		Uint64("start_batch", pr.layout.StartBatch).Uint64("total_batches", pr.layout.TotalBatches).
		Int("batch_size", pr.layout.BatchSize).Int("producer_entry", pr.p.Entry()).Bool("creator", pr.creator)
	if pr.flags.ring != "" {
		ev = ev.Str("ring", pr.flags.ring).Str("path", shm.Path(pr.flags.ring))
	} else {
		ev = ev.Int("memfd", pr.flags.memfd)
	}
	for i, t := range pr.layout.Tensors {
		off, n := pr.r.Tensor(i)
		ev = ev.Str("tensor_"+t.Name, fmt.Sprintf("%s%v @%d (%d bytes)", t.DType, t.Shape, off, n))
	}
	ev.Dur("since_exec", time.Since(processStart)).Msg("started")

	cause, readersDone := pr.produce()
	if !readersDone {
		unmap = false // a reader may still write into the mapping; the exit unmaps it
	}
	st := pr.r.Stats()
	code := exitCode(cause)
	pr.log.Info().Int("exit", code).AnErr("cause", cause).Uint64("batches_written", st.BatchesWritten).
		Uint64("batches_read", st.BatchesRead).Msg("stopped")
	switch code {
	case exitOK, exitInterrupted:
	case exitConsumerDied:
		fmt.Fprintf(os.Stderr, "shmloader run: %v; stopping\n", cause)
	default:
		fmt.Fprintf(os.Stderr, "shmloader run: %v\n", cause)
	}
	return code
}

// exitInterrupted is the conventional status after SIGINT (128 + 2).
const exitInterrupted = 130

func exitCode(cause error) int {
	var sig signalStop
	switch {
	case cause == nil, errors.Is(cause, ring.ErrConsumerClosed):
		return exitOK
	case errors.Is(cause, ring.ErrConsumerGone), errors.Is(cause, ring.ErrParentDied):
		return exitConsumerDied
	case errors.As(cause, &sig):
		if sig.sig == os.Interrupt {
			return exitInterrupted
		}
		return exitOK
	}
	return exitFailure
}

// produce runs the readers, the watchdog and the signal handler until the process must stop.
// It returns why (nil: the stream is complete and consumed, or this joiner's share is done)
// and whether every reader goroutine has returned.
func (pr *producerRun) produce() (cause error, readersDone bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var opt ring.WatchOptions
	if pr.parent != nil {
		opt.ParentPID = pr.parent.pid
	}
	watchc := make(chan error, 1)
	go func() { watchc <- pr.p.Watch(ctx, opt) }()

	readc := make(chan error, 1)
	go func() { readc <- pr.readAll(ctx) }()

	publishc := make(chan struct{}) // the source's counters, for the consumer's stats
	go func() {
		defer close(publishc)
		pr.src.publishUntil(ctx, pr.r)
	}()

	var tick <-chan time.Time // polls for "consumer has read everything" once the stream is written
	streamDone := false
	sizeTick := time.NewTicker(ring.WaitSlice) // the file cut short under us (run_guard.go)
	defer sizeTick.Stop()
wait:
	for {
		select {
		case <-sizeTick.C:
			if err := pr.cutCheck(); err != nil {
				cause = err
				break wait
			}
		case s := <-pr.sigc:
			cause = signalStop{s}
			if err := pr.parent.gone(); err != nil {
				cause = fmt.Errorf("%w; %s", err, signame(s))
			} else if !streamDone {
				// Batches this process numbered will never come: tell the consumer why.
				pr.p.Fail(fmt.Errorf("producer pid %d %v", os.Getpid(), cause))
			}
			break wait
		case <-pr.parent.signals():
			if err := pr.parent.gone(); err != nil {
				cause = err
				break wait
			}
			pr.log.Info().Int("parent", pr.parent.pid).Msg("the parent thread that started this process exited; the parent process lives on")
		case err := <-watchc:
			watchc = nil
			cause = err
			break wait
		case err := <-readc:
			readersDone = true
			if err != nil {
				cause = err
				break wait
			}
			streamDone = true
			if !pr.creator || pr.consumedAll() {
				break wait // a joiner leaves once its share is published
			}
			// The creator keeps a named segment alive until the consumer has it all.
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			tick = t.C
		case <-tick:
			if pr.consumedAll() {
				break wait
			}
		}
	}
	var cut *ringCutError
	if errors.As(cause, &cut) { // tell the consumer, if the header is still there to say it in
		pr.withFaultGuard(func() error { pr.p.Fail(cause); return nil })
	}
	if errors.Is(cause, ring.ErrConsumerGone) && pr.receivedAll() {
		cause = nil // it had everything, then exited without closing (seen by the watchdog or a Claim)
	}
	cancel()
	if watchc != nil {
		<-watchc // the watchdog reads the mapping: it must be gone before the caller unmaps
	}
	<-publishc // so does the counter publisher
	if !readersDone {
		select {
		case <-readc:
			readersDone = true
		case <-time.After(stopGrace):
			pr.log.Warn().Dur("after", stopGrace).Msg("readers still busy at exit")
		}
	}
	return cause, readersDone
}

// consumedAll reports whether the consumer has released every batch of a bounded stream.
func (pr *producerRun) consumedAll() bool {
	st := pr.r.Stats()
	return st.TotalBatches != 0 && st.BatchesRead >= st.TotalBatches
}

// receivedAll reports whether the consumer has taken every batch of a bounded stream.
func (pr *producerRun) receivedAll() bool { return ringReceivedAll(pr.r) }

// readAll runs the reader goroutines: each claims a batch, fills every tensor and publishes,
// until the stream ends (nil) or something stops it (the first error).
func (pr *producerRun) readAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, pr.flags.readers)
	for i := range errs {
		wg.Go(func() { errs[i] = pr.readLoop(ctx) })
	}
	wg.Wait()
	// The reader that failed first recorded the error; the others then stopped with a
	// *ring.ProducerError carrying its text. Report the original.
	var first error
	for _, err := range errs {
		var pe *ring.ProducerError
		if err != nil && (first == nil || errors.As(first, &pe) && !errors.As(err, &pe)) {
			first = err
		}
	}
	return first
}

func (pr *producerRun) readLoop(ctx context.Context) error {
	return pr.withFaultGuard(func() error { return pr.fillLoop(ctx) })
}

// fillLoop claims, fills and publishes batches until the stream ends or something stops it.
func (pr *producerRun) fillLoop(ctx context.Context) error {
	batch := make([][]byte, len(pr.layout.Tensors)) // the slot's tensors
	for {
		w, err := pr.p.Claim(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for i := range batch {
			batch[i] = w.Tensor(i)
		}
		if err := pr.src.Fill(ctx, pr.stream.Global(w.Seq()), batch); err != nil {
			if ctx.Err() == nil {
				w.Abandon(err) // the consumer gets the text
			}
			return err
		}
		if err := w.Publish(); err != nil {
			return err
		}
	}
}
