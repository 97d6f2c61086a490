package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/feed"
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
	layout ring.Layout
	src    *runSource     // every configured source, as one sampler.Source
	stream sampler.Stream // this rank's share of the global batches
	parent *parentWatch   // --memfd: the trainer that started this process; nil otherwise
	sigc   chan os.Signal // SIGINT, SIGTERM

	ring *feed.Ring
}

func (pr *producerRun) run() int {
	if code := pr.attach(); code != exitOK {
		return code
	}
	pr.logStart()
	cause, readersDone := pr.produce()
	st := pr.ring.R.Stats()
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
	if err := pr.ring.Unlink(); err != nil {
		pr.log.Warn().Err(err).Msg("unlink")
	}
	if readersDone { // else a reader may still write into the mapping; the exit unmaps it
		pr.ring.Close()
	}
	return code
}

// attach creates the ring (a named one, or in the trainer's memfd) or joins one, with this
// process's producer entry; a joiner fills the ring's own layout.
func (pr *producerRun) attach() int {
	f := pr.flags
	var err error
	switch {
	case f.join && f.ring != "":
		pr.ring, err = feed.JoinNamed(f.ring, f.allowedUID(), pr.layout, f.window.StartSet, f.readers)
	case f.join:
		pr.ring, err = feed.JoinFD(f.memfd, pr.layout, f.window.StartSet, f.readers)
	case f.ring != "":
		pr.ring, err = feed.CreateNamed(f.ring, pr.layout, f.readers)
	default:
		pr.ring, err = feed.CreateInFD(f.memfd, pr.layout, f.readers)
	}
	if err != nil {
		what := f.ring
		if f.memfd >= 0 {
			what = fmt.Sprintf("--memfd %d", f.memfd)
		}
		switch {
		case f.join:
			err = fmt.Errorf("--join %s: %w", what, err)
		case f.memfd >= 0:
			err = fmt.Errorf("%s: %w", what, err)
		}
		if req := (*feed.RequestError)(nil); errors.As(err, &req) {
			return usageError("run", err)
		}
		fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
		return exitFailure
	}
	pr.layout = pr.ring.Layout()
	return exitOK
}

// logStart logs the ring and its tensors.
func (pr *producerRun) logStart() {
	r := pr.ring.R
	ev := pr.log.Info().Str("config", pr.flags.config).Int("readers", pr.flags.readers).
		Int("slots", pr.layout.Slots).Int64("slot_bytes", r.SlotBytes()).Int64("segment_bytes", r.SegmentBytes()).
		Uint64("start_batch", pr.layout.StartBatch).Uint64("total_batches", pr.layout.TotalBatches).
		Int("batch_size", pr.layout.BatchSize).Int("producer_entry", pr.ring.P.Entry()).Bool("creator", pr.ring.Creator)
	if pr.flags.ring != "" {
		ev = ev.Str("ring", pr.flags.ring).Str("path", shm.Path(pr.flags.ring))
	} else {
		ev = ev.Int("memfd", pr.flags.memfd)
	}
	for i, t := range pr.layout.Tensors {
		off, n := r.Tensor(i)
		ev = ev.Str("tensor_"+t.Name, fmt.Sprintf("%s%v @%d (%d bytes)", t.DType, t.Shape, off, n))
	}
	ev.Dur("since_exec", time.Since(processStart)).Msg("started")
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

// produce feeds the ring and handles signals and the parent until the process must stop. It
// returns why (nil: the stream is complete and consumed, or this joiner's share is done)
// and whether every reader goroutine has returned.
func (pr *producerRun) produce() (cause error, readersDone bool) {
	pool := feed.NewPool(pr.src, pr.flags.readers)
	var opt ring.WatchOptions
	if pr.parent != nil {
		opt.ParentPID = pr.parent.pid
	}
	f := pool.Start(pr.ring, pr.stream, opt)
	written := f.Done()
	var tick <-chan time.Time // polls for "consumer has read everything" once the stream is written
	streamDone := false
wait:
	for {
		select {
		case s := <-pr.sigc:
			cause = signalStop{s}
			if err := pr.parent.gone(); err != nil {
				cause = fmt.Errorf("%w; %s", err, signame(s))
			} else if !streamDone {
				// Batches this process numbered will never come: tell the consumer why.
				pr.ring.P.Fail(fmt.Errorf("producer pid %d %v", os.Getpid(), cause))
			}
			break wait
		case <-pr.parent.signals():
			if err := pr.parent.gone(); err != nil {
				cause = err
				break wait
			}
			pr.log.Info().Int("parent", pr.parent.pid).Msg("the parent thread that started this process exited; the parent process lives on")
		case <-f.Watched():
			cause = f.WatchErr()
			break wait
		case <-written:
			written = nil
			if cause = f.Err(); cause != nil {
				break wait
			}
			streamDone = true
			if !pr.ring.Creator || pr.ring.R.ConsumedAll() {
				break wait // a joiner leaves once its share is published
			}
			// The creator keeps a named segment alive until the consumer has it all.
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			tick = t.C
		case <-tick:
			if pr.ring.R.ConsumedAll() {
				break wait
			}
		}
	}
	if readersDone = f.Stop(stopGrace); !readersDone {
		pr.log.Warn().Dur("after", stopGrace).Msg("readers still busy at exit")
	}
	return cause, readersDone
}
