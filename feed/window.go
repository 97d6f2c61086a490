package feed

import (
	"fmt"
	"math"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// Window is the part of a rank's stream that one ring carries: `run --start K --epoch E
// --epochs N`, or the start and epoch of a node loader's request. Without an epoch the ring
// starts at Start (0 when unset) and ends where the configured stream does; with one it
// carries epochs Epoch .. Epoch+Epochs-1 of the rank's stream (Epochs 0 counts as 1), one
// after another, from the first batch of epoch Epoch or from Start, which must lie in that
// epoch. So the ring ends at (Epoch+Epochs) * the rank's batches per epoch, from which the
// consumer reads the epoch length back (gobatch.Loader runs many epochs in one ring, its
// child's cache kept).
type Window struct {
	Start    uint64
	StartSet bool
	Epoch    uint64
	EpochSet bool
	Epochs   uint64
}

// RequestError is an error of what was asked rather than of the machine: a window outside
// the stream, a layout the configuration cannot make, a ring that refuses to be joined by this
// configuration. shmloader reports it as a usage error (exit status 2; Python: ConfigError).
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// Layout is the ring layout of the window for a configuration whose sources are src: their
// tensors, and the batch description (PROTOCOL.md 2.9) of their order, batches per epoch and
// view. It is validated here, once; every error is a *RequestError.
func (w Window) Layout(cfg *config.Config, src sampler.Source) (ring.Layout, error) {
	st := src.Stats()
	l, err := w.layout(cfg, src.Tensors(), st)
	if err == nil {
		warnings := src.Warnings()
		if s := ringShare(l.SegmentBytes()); s != "" {
			warnings = append(warnings, s)
		}
		l.Description, err = Describe(st, src.View(), warnings) // bounded there: l stays valid
	}
	if err != nil {
		return l, &RequestError{err}
	}
	return l, nil
}

func (w Window) layout(cfg *config.Config, tensors []config.Tensor, st sampler.Stats) (ring.Layout, error) {
	if !w.EpochSet {
		return layoutFrom(cfg, tensors, w.Start)
	}
	if st.Order != config.OrderEpochs {
		return ring.Layout{}, fmt.Errorf("--epoch %d needs [batch] order = %q; this configuration's order is %q", w.Epoch, config.OrderEpochs, cfg.Batch.Order)
	}
	n := st.EpochBatches
	first, end, ok := sampler.EpochSpan(w.Epoch, n)
	if !ok {
		return ring.Layout{}, fmt.Errorf("--epoch %d: its batches are past the largest stream index", w.Epoch)
	}
	last := end // the end of the ring: of epoch Epoch+Epochs-1
	if w.Epochs > 1 {
		if w.Epoch > math.MaxUint64-(w.Epochs-1) {
			return ring.Layout{}, fmt.Errorf("--epoch %d --epochs %d: the last epoch is past the largest epoch number", w.Epoch, w.Epochs)
		}
		if _, last, ok = sampler.EpochSpan(w.Epoch+w.Epochs-1, n); !ok {
			return ring.Layout{}, fmt.Errorf("--epoch %d --epochs %d: the last epoch's batches are past the largest stream index; expected fewer epochs", w.Epoch, w.Epochs)
		}
	}
	start := first
	if w.StartSet {
		if w.Start < first || w.Start >= end {
			return ring.Layout{}, fmt.Errorf("--start %d is not in --epoch %d, whose batches are %d .. %d of this rank's stream (%d per epoch); expected --start in that range, or --epoch %d",
				w.Start, w.Epoch, first, end-1, n, w.Start/n)
		}
		start = w.Start
	}
	l, err := layoutFrom(cfg, tensors, start)
	if err != nil {
		return l, err
	}
	l.TotalBatches = last - start
	return l, l.Validate()
}

// ringShareWarn is the share of the memory available above which a ring's size is worth a
// warning: the trainer, its model and the page cache need the rest.
const ringShareWarn = 4

// ringShare warns of a ring that takes more than a quarter of the memory available ("" when it
// does not, or when the memory cannot be read).
func ringShare(bytes int64) string {
	avail, ok := shm.MemAvailable()
	if !ok || bytes <= avail/ringShareWarn {
		return ""
	}
	return fmt.Sprintf("the ring takes %.2f GB of shared memory, %.0f%% of the %.2f GB of memory available: "+
		"lower %s or the ring's %s", float64(bytes)/1e9, 100*float64(bytes)/float64(avail), float64(avail)/1e9,
		config.Spell("batch_size"), config.Spell("slots"))
}

// layoutFrom is the layout of the configured stream from batch start: the slots, the batches
// left of a bounded stream, and the tensors.
func layoutFrom(cfg *config.Config, tensors []config.Tensor, start uint64) (ring.Layout, error) {
	l := ring.Layout{Slots: cfg.Ring.Slots, StartBatch: start, BatchSize: cfg.Batch.Size}
	if n := cfg.Batch.Batches; n != 0 {
		if start >= n {
			return l, fmt.Errorf("--start %d is past the end of the stream (batch.batches = %d)", start, n)
		}
		l.TotalBatches = n - start
	}
	for _, t := range tensors {
		l.Tensors = append(l.Tensors, t.Ring())
	}
	return l, l.Validate()
}

// End is the absolute index where l's stream ends (0: unbounded): with an epoch the end of
// that epoch, else batch.batches. A joining producer's configuration must end where the ring
// does (ring.Ring.JoinLayout).
func End(l ring.Layout) uint64 {
	if l.TotalBatches == 0 {
		return 0
	}
	return l.StartBatch + l.TotalBatches
}
