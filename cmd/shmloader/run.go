package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/feed"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// `shmloader run`: one path for every configuration. The flags are checked, the configuration
// is loaded, sampler.Open opens its sources (one sampler.Source), the ring layout is built from
// the source's tensors and validated once, the first batch is prefetched while the ring is
// created or joined, and a feed (package feed) fills claimed slots until the stream ends or
// something stops it (run_produce.go). This file and run_produce.go are the policy: flags,
// signals, the parent, when to stop, logging and the exit status.

func init() {
	// Keep the main goroutine on the main thread. PR_SET_PDEATHSIG (--memfd) is a property of
	// the thread that set it and is lost if that thread exits; the main thread never does.
	runtime.LockOSThread()
	register("run", "produce batches into a ring: run --config FILE (--ring NAME | --memfd FD)", cmdRun)
}

// pdeathSignal is what the kernel sends (PR_SET_PDEATHSIG) when the parent thread exits.
const pdeathSignal = syscall.SIGUSR2

// processStart is when the process began (package initialisation): the start-up timings in
// the debug log count from it.
var processStart = time.Now()

type runFlags struct {
	config   string
	ring     string
	memfd    int
	readers  int
	window   feed.Window // --start, --epoch, --epochs
	join     bool
	allowUID *int // --allow-uid, with --join
	sourceFlags
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
	fs.StringVar(&f.config, "config", "", "configuration file (TOML, or JSON when it ends in .json; - reads JSON from stdin, as gobatch.Loader passes a dict)")
	fs.StringVar(&f.ring, "ring", "", "create the named ring /dev/shm/gobatch-NAME")
	fs.IntVar(&f.memfd, "memfd", -1, "create the ring in this inherited memfd (the trainer's gobatch.Loader passes it)")
	fs.IntVar(&f.readers, "readers", runtime.GOMAXPROCS(0), "reader goroutines filling batches")
	fs.Func("start", "begin the stream at batch `K` (resume)", func(s string) error {
		k, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want a batch number >= 0")
		}
		f.window.Start, f.window.StartSet = k, true
		return nil
	})
	fs.Func("epoch", "with [batch] order = \"epochs\": produce epoch `E` of this rank's stream (and the next ones, --epochs), from its first batch or from --start, which must lie in it", func(s string) error {
		e, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want an epoch number >= 0")
		}
		f.window.Epoch, f.window.EpochSet = e, true
		return nil
	})
	fs.Func("epochs", "with --epoch E: produce `N` epochs, E .. E+N-1, one after another in the one ring (default 1; gobatch.Loader asks for many, so that one child with one cache serves them all)", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("want a number of epochs >= 1")
		}
		f.window.Epochs = n
		return nil
	})
	fs.BoolVar(&f.join, "join", false, "attach to the existing ring (--ring NAME, or the trainer's --memfd FD when gobatch.Loader restarts its child) as an additional producer process: it takes over the batches of dead producers and continues at the ring's position")
	f.allowUID = addAllowUIDFlag(fs)
	addSourceFlags(fs, &f.sourceFlags)
	lf := addLogFlags(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	stream, err := f.check(pos)
	if err != nil {
		return usageError("run", fmt.Errorf("%w (see shmloader run -h)", err))
	}
	log, err := lf.logger("run")
	if err != nil {
		return usageError("run", err)
	}
	var parent *parentWatch
	if f.memfd >= 0 {
		if parent, err = watchParent(ppid); err != nil {
			fmt.Fprintf(os.Stderr, "shmloader run: %v\n", err)
			if errors.Is(err, ring.ErrParentDied) {
				return exitConsumerDied
			}
			return exitFailure
		}
	}

	cfg, err := config.Read(f.config, os.Stdin, f.batch)
	if err != nil {
		return usageError("run", err)
	}
	src, err := openSources(cfg, f.sourceFlags, stream, log)
	if err != nil {
		return usageError("run", err)
	}
	layout, err := f.window.Layout(cfg, src)
	if err != nil {
		return usageError("run", fmt.Errorf("%s: %w", cfg.File, err))
	}
	if !f.join {
		src.warm(stream.Global(layout.StartBatch)) // the first batch's chunks, while the ring is made
	}
	p := &producerRun{log: log, flags: f, layout: layout, src: src, stream: stream, parent: parent, sigc: sigc}
	code = p.run()
	src.logStats()
	return code
}

// allowedUID is --allow-uid's uid, or shm.NoOtherUID.
func (f *runFlags) allowedUID() int {
	if f.allowUID == nil {
		return shm.NoOtherUID
	}
	return *f.allowUID
}

// check validates the flag combination and returns the rank's stream.
func (f *runFlags) check(rest []string) (sampler.Stream, error) {
	switch {
	case len(rest) > 0:
		return sampler.Stream{}, fmt.Errorf("unexpected argument %q", rest[0])
	case f.config == "":
		return sampler.Stream{}, errors.New("--config FILE is required")
	case (f.ring == "") == (f.memfd < 0):
		return sampler.Stream{}, errors.New("give exactly one of --ring NAME and --memfd FD")
	case f.allowedUID() != shm.NoOtherUID && !f.join:
		return sampler.Stream{}, errors.New("--allow-uid needs --join (a ring this process creates is its own)")
	case f.readers < 1 || f.readers > 1024:
		return sampler.Stream{}, fmt.Errorf("--readers %d: want 1 to 1024", f.readers)
	case f.window.Epochs != 0 && !f.window.EpochSet:
		return sampler.Stream{}, errors.New("--epochs needs --epoch (the first of the epochs)")
	}
	if f.ring != "" {
		if err := shm.ValidateName(f.ring); err != nil {
			return sampler.Stream{}, fmt.Errorf("--ring: %w", err)
		}
	}
	return f.sourceFlags.check()
}

// parentWatch ties a --memfd producer to the trainer that started it: the kernel sends
// pdeathSignal when the parent thread exits, and gone tells whether the parent process did
// (a trainer may start its loader from a helper thread and live on).
type parentWatch struct {
	pid  int
	sigc chan os.Signal // pdeathSignal
}

// watchParent handles pdeathSignal before asking for it, so that it cannot kill the process,
// then asks for it (ring.SetParentDeathSignal also checks that the parent has not already gone:
// the signal would never come).
func watchParent(pid int) (*parentWatch, error) {
	p := &parentWatch{pid: pid, sigc: make(chan os.Signal, 4)}
	signal.Notify(p.sigc, pdeathSignal)
	if err := ring.SetParentDeathSignal(pdeathSignal, pid); err != nil {
		return nil, err
	}
	return p, nil
}

// gone returns ring.ErrParentDied (wrapped) when the parent process has exited; nil otherwise
// and on a nil watch.
func (p *parentWatch) gone() error {
	if p == nil {
		return nil
	}
	return ring.ParentGone(p.pid)
}

// signals returns the channel of pdeathSignal; nil (never ready) on a nil watch.
func (p *parentWatch) signals() <-chan os.Signal {
	if p == nil {
		return nil
	}
	return p.sigc
}

// signalStop is the stop cause for SIGINT and SIGTERM.
type signalStop struct{ sig os.Signal }

func (s signalStop) Error() string { return "stopped by " + signame(s.sig) }

func signame(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		return unix.SignalName(n)
	}
	return s.String()
}
