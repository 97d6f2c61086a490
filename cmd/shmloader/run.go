package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

func init() {
	// Keep the main goroutine on the main thread. PR_SET_PDEATHSIG (--memfd) is a property of
	// the thread that set it and is lost if that thread exits; the main thread never does.
	runtime.LockOSThread()
	register("run", "produce batches into a ring: run --config FILE (--ring NAME | --memfd FD)", cmdRun)
}

// stopGrace is how long run waits for reader goroutines to return after it decided to stop
// (a reader may be inside a slow read). After that it exits without unmapping.
const stopGrace = 2 * time.Second

// pdeathSignal is what the kernel sends (PR_SET_PDEATHSIG) when the parent thread exits.
const pdeathSignal = syscall.SIGUSR2

// signalStop is the stop cause for SIGINT and SIGTERM.
type signalStop struct{ sig os.Signal }

func (s signalStop) Error() string { return "stopped by " + signame(s.sig) }

func signame(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		return unix.SignalName(n)
	}
	return s.String()
}

type runFlags struct {
	config   string
	ring     string
	memfd    int
	readers  int
	start    uint64
	startSet bool
	dataRoot string
	join     bool
}

func cmdRun(args []string) int {
	// In --memfd mode the parent is the trainer; remember it before anything else happens.
	ppid := os.Getppid()
	// Catch SIGINT and SIGTERM from the start, so that one arriving while the segment is being
	// created still ends in a clean stop (and unlink) instead of the default death.
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)

	fs := newFlagSet("run", "--config FILE (--ring NAME | --memfd FD)")
	var f runFlags
	fs.StringVar(&f.config, "config", "", "configuration file (TOML, or JSON when it ends in .json)")
	fs.StringVar(&f.ring, "ring", "", "create the named ring /dev/shm/gobatch-NAME")
	fs.IntVar(&f.memfd, "memfd", -1, "create the ring in this inherited memfd (the trainer's gobatch.Loader passes it)")
	fs.IntVar(&f.readers, "readers", runtime.GOMAXPROCS(0), "reader goroutines filling batches")
	fs.Func("start", "begin the stream at batch `K` (resume)", func(s string) error {
		k, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want a batch number >= 0")
		}
		f.start, f.startSet = k, true
		return nil
	})
	fs.StringVar(&f.dataRoot, "data-root", "", "directory that relative data paths in the configuration are resolved against")
	fs.BoolVar(&f.join, "join", false, "attach to the existing named ring as an additional producer process")
	lf := addLogFlags(fs)
	zf := addZarrFlags(fs.FlagSet)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if err := f.check(pos); err != nil {
		return usageError("run", fmt.Errorf("%w (see shmloader run -h)", err))
	}
	log, err := lf.logger("run")
	if err != nil {
		return usageError("run", err)
	}
	var pdeathc chan os.Signal
	if f.memfd >= 0 {
		// Exit when the trainer dies, even if it dies while we are busy. The kernel sends the
		// signal when the parent *thread* that started us exits, also when the rest of the
		// parent process lives on (a trainer that starts its loader from a helper thread), so
		// it is a dedicated signal (not SIGTERM) whose handler checks getppid(). Handle it
		// before asking for it, then check that the parent has not already gone (the signal
		// would never come).
		pdeathc = make(chan os.Signal, 4)
		signal.Notify(pdeathc, pdeathSignal)
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(pdeathSignal), 0, 0, 0); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: prctl(PR_SET_PDEATHSIG): %v\n", err)
			return exitFailure
		}
		if os.Getppid() != ppid {
			fmt.Fprintln(os.Stderr, "shmloader run: the parent process died during start-up")
			return exitConsumerDied
		}
	}

	cfg, err := config.Load(f.config)
	if err != nil {
		return usageError("run", err)
	}
	if hasZarrSources(cfg) { // the sampler fills whole batches (zarr_job.go)
		zj, err := newZarrJob(cfg, f.dataRoot, zf, log)
		if err != nil {
			return usageError("run", err)
		}
		layout, err := zj.layout(cfg, f.start)
		if err != nil {
			return usageError("run", fmt.Errorf("%s: %w", f.config, err))
		}
		if !f.join {
			zj.warm(layout.StartBatch) // the first batch's chunks, while the ring is made
		}
		p := &producerRun{log: log, flags: f, cfg: cfg, layout: layout, zarr: zj, ppid: ppid, pdeathc: pdeathc, sigc: sigc}
		code := p.run()
		zj.LogStats()
		return code
	}
	layout, err := layoutFor(cfg, f.start)
	if err != nil {
		return usageError("run", fmt.Errorf("%s: %w", f.config, err))
	}
	fillers := make([]filler, len(cfg.Sources))
	for i, s := range cfg.Sources {
		if fillers[i], err = newFiller(s, cfg.Batch.Size, sourceOptions{dataRoot: f.dataRoot}); err != nil {
			return usageError("run", fmt.Errorf("%s: %w", f.config, err))
		}
	}

	if zf.worldSize < 1 || zf.rank < 0 || zf.rank >= zf.worldSize {
		return usageError("run", fmt.Errorf("--rank %d --world-size %d: expected world size >= 1 and 0 <= rank < world size", zf.rank, zf.worldSize))
	}
	p := &producerRun{log: log, flags: f, cfg: cfg, layout: layout, fillers: fillers, ppid: ppid, pdeathc: pdeathc, sigc: sigc,
		rank: uint64(zf.rank), worldSize: uint64(zf.worldSize)}
	return p.run()
}

// check validates the flag combination.
func (f *runFlags) check(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case f.config == "":
		return errors.New("--config FILE is required")
	case (f.ring == "") == (f.memfd < 0):
		return errors.New("give exactly one of --ring NAME and --memfd FD")
	case f.join && f.ring == "":
		return errors.New("--join needs --ring NAME (a memfd ring has exactly one producer process)")
	case f.readers < 1 || f.readers > 1024:
		return fmt.Errorf("--readers %d: want 1 to 1024", f.readers)
	}
	if f.ring != "" {
		if err := shm.ValidateName(f.ring); err != nil {
			return fmt.Errorf("--ring: %w", err)
		}
	}
	return nil
}

// layoutFor is the ring layout of a configuration: one tensor per source, [size, shape...],
// and the part of the stream that starts at batch start.
func layoutFor(cfg *config.Config, start uint64) (ring.Layout, error) {
	l := ring.Layout{Slots: cfg.Ring.Slots, StartBatch: start, BatchSize: cfg.Batch.Size}
	if n := cfg.Batch.Batches; n != 0 {
		if start >= n {
			return l, fmt.Errorf("--start %d is past the end of the stream (batch.batches = %d)", start, n)
		}
		l.TotalBatches = n - start
	}
	for _, t := range cfg.Tensors() {
		l.Tensors = append(l.Tensors, ring.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return l, l.Validate()
}

// producerRun is one `shmloader run` process.
type producerRun struct {
	log     zerolog.Logger
	flags   runFlags
	cfg     *config.Config
	layout  ring.Layout
	fillers []filler
	zarr    *zarrJob // instead of fillers: the sampler fills whole batches
	// rank and worldSize map this stream's batch k to global batch k*worldSize+rank (synthetic
	// sources; the sampler maps inside its job).
	rank, worldSize uint64
	ppid            int
	pdeathc         chan os.Signal // pdeathSignal (--memfd); nil otherwise
	sigc            chan os.Signal // SIGINT, SIGTERM

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

// preflight refuses a segment that cannot fit before anything is reserved. fallocate on a
// tmpfs as large as RAM (the usual /dev/shm) would fill memory up to ENOSPC, and wake the OOM
// killer, before it fails.
func preflight(need int64, named bool) error {
	if named {
		var st unix.Statfs_t
		if err := unix.Statfs(shm.Dir, &st); err == nil {
			if avail := int64(st.Bavail) * int64(st.Bsize); need > avail {
				return fmt.Errorf("the ring needs %d bytes (%s) of shared memory and %s has %d (%s) free: "+
					"use fewer or smaller ring slots or batches, or make the mount larger (Docker --shm-size)",
					need, mb(need), shm.Dir, avail, mb(avail))
			}
		}
	}
	if avail, ok := memAvailable(); ok && need > avail {
		return fmt.Errorf("the ring needs %d bytes (%s) of shared memory, more than the %d (%s) of memory available: "+
			"use fewer or smaller ring slots or batches", need, mb(need), avail, mb(avail))
	}
	return nil
}

// memAvailable reads MemAvailable from /proc/meminfo.
func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10, true
			}
		}
	}
	return 0, false
}

// attach creates the segment and the ring (or joins one) and registers this producer.
func (pr *producerRun) attach() int {
	f, l := pr.flags, pr.layout
	var err error
	if !f.join {
		if err := preflight(l.SegmentBytes(), f.ring != ""); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
	}
	switch {
	case f.join:
		ctx, cancel := context.WithTimeout(context.Background(), ring.DefaultAttachTimeout)
		pr.seg, pr.r, err = ring.AttachNamed(ctx, f.ring, true)
		cancel()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("--join: no ring %q (%s): start its creator first", f.ring, shm.Path(f.ring))
			}
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
		if err := pr.compatible(); err != nil {
			pr.seg.Close()
			return usageError("run", fmt.Errorf("--join %s: %w", f.ring, err))
		}
	case f.ring != "":
		if pr.seg, err = shm.Create(f.ring, l.SegmentBytes()); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
		pr.creator = true
		if pr.r, err = ring.Create(pr.seg.Bytes(), l, true); err != nil {
			shm.Unlink(f.ring)
			pr.seg.Close()
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
	default:
		if pr.seg, err = shm.FromFD(f.memfd, l.SegmentBytes()); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: --memfd %d: %v\n", f.memfd, err)
			return exitFailure
		}
		pr.creator = true
		if pr.r, err = ring.Create(pr.seg.Bytes(), l, false); err != nil {
			pr.seg.Close()
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			return exitFailure
		}
	}
	if pr.p, err = pr.r.NewProducer(f.readers); err != nil {
		if pr.creator && f.ring != "" {
			shm.Unlink(f.ring)
		}
		pr.seg.Close()
		fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// compatible refuses to join a ring whose layout differs from the one this configuration makes.
func (pr *producerRun) compatible() error {
	if err := pr.r.Compatible(pr.layout); err != nil {
		return err
	}
	have, want := pr.r.Layout(), pr.layout
	switch {
	case have.Slots != want.Slots:
		return fmt.Errorf("the ring has %d slots, this configuration %d", have.Slots, want.Slots)
	case have.BatchSize != want.BatchSize:
		return fmt.Errorf("the ring has batch size %d, this configuration %d", have.BatchSize, want.BatchSize)
	case pr.flags.startSet && have.StartBatch != want.StartBatch:
		return fmt.Errorf("the ring starts at batch %d, --start says %d", have.StartBatch, want.StartBatch)
	case pr.cfg.Batch.Batches != 0 && have.StartBatch+have.TotalBatches != pr.cfg.Batch.Batches,
		pr.cfg.Batch.Batches == 0 && have.TotalBatches != 0:
		return fmt.Errorf("the ring's stream ends at batch %d (start %d + total %d), this configuration's at %d (0 = unbounded)",
			have.StartBatch+have.TotalBatches, have.StartBatch, have.TotalBatches, pr.cfg.Batch.Batches)
	}
	pr.layout = have // the ring's own start and total (relevant without --start)
	return nil
}

// produce runs the readers, the watchdog and the signal handler until the process must stop.
// It returns why (nil: the stream is complete and consumed, or this joiner's share is done)
// and whether every reader goroutine has returned.
func (pr *producerRun) produce() (cause error, readersDone bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var opt ring.WatchOptions
	if pr.flags.memfd >= 0 {
		opt.ParentPID = pr.ppid
	}
	watchc := make(chan error, 1)
	go func() { watchc <- pr.p.Watch(ctx, opt) }()

	readc := make(chan error, 1)
	go func() { readc <- pr.readAll(ctx) }()

	publishc := make(chan struct{})
	if pr.zarr != nil { // the sampler's cache counters, for the consumer's stats
		go func() {
			defer close(publishc)
			t := time.NewTicker(publishEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					pr.zarr.publish(pr.r)
					return
				case <-t.C:
					pr.zarr.publish(pr.r)
				}
			}
		}()
	} else {
		close(publishc)
	}

	var tick <-chan time.Time // polls for "consumer has read everything" once the stream is written
	streamDone := false
wait:
	for {
		select {
		case s := <-pr.sigc:
			cause = signalStop{s}
			if pr.flags.memfd >= 0 && os.Getppid() != pr.ppid {
				cause = fmt.Errorf("%w (was pid %d; %s)", ring.ErrParentDied, pr.ppid, signame(s))
			} else if !streamDone {
				// Batches this process numbered will never come: tell the consumer why.
				pr.p.Fail(fmt.Errorf("producer pid %d %v", os.Getpid(), cause))
			}
			break wait
		case <-pr.pdeathc:
			if os.Getppid() != pr.ppid {
				cause = fmt.Errorf("%w (was pid %d)", ring.ErrParentDied, pr.ppid)
				break wait
			}
			pr.log.Info().Int("parent", pr.ppid).Msg("the parent thread that started this process exited; the parent process lives on")
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

// receivedAll reports whether the consumer has taken every batch of a bounded stream: released
// them all, or all but those it still holds (a consumer may exit holding the last one).
func (pr *producerRun) receivedAll() bool {
	st := pr.r.Stats()
	held := uint64(0)
	for _, sl := range st.SlotState {
		if sl.State == ring.SlotReading {
			held++
		}
	}
	return st.TotalBatches != 0 && st.BatchesRead+held >= st.TotalBatches
}

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

// globalBatch maps batch k of this rank's stream to global batch k*worldSize + rank.
func (pr *producerRun) globalBatch(k uint64) uint64 {
	if pr.worldSize <= 1 {
		return k
	}
	return k*pr.worldSize + pr.rank
}

func (pr *producerRun) readLoop(ctx context.Context) error {
	var batch [][]byte // the slot's tensors, for the sampler
	if pr.zarr != nil {
		batch = make([][]byte, len(pr.layout.Tensors))
	}
	for {
		w, err := pr.p.Claim(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if pr.zarr != nil {
			for i := range batch {
				batch[i] = w.Tensor(i)
			}
			if err := pr.zarr.Fill(w.Seq(), batch); err != nil {
				if ctx.Err() == nil {
					w.Abandon(err) // the consumer gets the text
				}
				return err
			}
		}
		// Data parallelism: batch k of this rank's stream is global batch k*world_size + rank
		// (the sampler applies the same rule inside its Fill).
		global := pr.globalBatch(w.Seq())
		for i, f := range pr.fillers {
			if err := f.Fill(ctx, w.Tensor(i), global); err != nil {
				err = fmt.Errorf("source %q, batch %d: %w", pr.cfg.Sources[i].Name, w.Seq(), err)
				if ctx.Err() == nil {
					w.Abandon(err) // the consumer gets the text
				}
				return err
			}
		}
		if err := w.Publish(); err != nil {
			return err
		}
	}
}
