package feed

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

// Pool is the readers of one source shared by any number of rings: `shmloader run` feeds its
// one ring from a pool, `shmloader serve` one ring per local rank, so that there is one fill
// path. Each feed runs as many claim loops as the pool has readers, and at most that many
// fills run at once across every feed of the pool (the pool's permits): a loop that waits for
// its ring's consumer holds no permit, so a rank that stops reading never holds up the others.
type Pool struct {
	src     sampler.Source
	readers int
	permits chan struct{} // one per fill running
}

// NewPool makes the pool of readers fill permits for src.
func NewPool(src sampler.Source, readers int) *Pool {
	return &Pool{src: src, readers: readers, permits: make(chan struct{}, readers)}
}

// Feed is one ring being fed from a pool: the pool's number of claim loops, each claiming the
// ring's next batch (Claim waits for a free slot: at most the ring's slots ahead of its
// consumer), filling it and publishing it; the watchdog (ring.Producer.Watch, and a check
// that the ring's file was not cut) beside them; a publisher that adds the source's counters
// to the ring's job counters. Every goroutine that touches the mapping belongs to the Feed, so
// once Stop reports the loops finished the caller may unmap the ring.
type Feed struct {
	r      *Ring
	stream sampler.Stream
	pool   *Pool
	ctx    context.Context
	cancel context.CancelFunc

	done    chan struct{} // closed once every claim loop returned
	watched chan struct{} // closed when the watchdog returns
	stopPub chan struct{} // closed by Stop: the publisher publishes once more and returns
	pubDone chan struct{}

	first    uint64     // the stream index of the ring's first batch
	epoch    uint64     // the rank's batches per epoch (0: no epochs)
	pubMu    sync.Mutex // guards counters: the publisher and the fills that publish (edge)
	counters Counters

	mu       sync.Mutex
	err      error // the feed's first error, by the precedence of record
	watchErr error
}

// Start feeds r, rank stream's ring, from the pool until the stream ends, something fails it,
// or Stop. opt is the watchdog's (a parent to watch).
func (p *Pool) Start(r *Ring, stream sampler.Stream, opt ring.WatchOptions) *Feed {
	f := &Feed{r: r, stream: stream, pool: p, done: make(chan struct{}), watched: make(chan struct{}),
		stopPub: make(chan struct{}), pubDone: make(chan struct{}), first: r.R.Layout().StartBatch,
		epoch: p.src.Stats().EpochBatches}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	var loops sync.WaitGroup
	for range p.readers {
		loops.Go(f.loop)
	}
	go func() { loops.Wait(); close(f.done) }()
	go f.watch(opt)
	go f.publish()
	return f
}

// Ring is the ring fed.
func (f *Feed) Ring() *Ring { return f.r }

// Done is closed once the ring's stream is written (Err nil) or the feed failed (Err).
func (f *Feed) Done() <-chan struct{} { return f.done }

// Err is why the feed ended, once Done is closed: nil when the stream is complete (or when
// the consumer went away after it received everything), else the first error, a source's or
// the ring's own before a *ring.ProducerError that only repeats it.
func (f *Feed) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Watched is closed when the watchdog returns: WatchErr says why.
func (f *Feed) Watched() <-chan struct{} { return f.watched }

// WatchErr is why the watchdog returned, once Watched is closed: the consumer closed the ring
// (ring.ErrConsumerClosed) or died (ring.ErrConsumerGone; nil when it had received every batch
// of a bounded stream, so did not die mid-stream), the parent died, an error recorded in the
// ring (*ring.ProducerError), the ring's file cut short (*CutError, which is recorded for the
// consumer too), or context.Canceled after Stop.
func (f *Feed) WatchErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watchErr
}

// Stop stops the feed: the watchdog and the publisher at once (the publisher publishes a last
// time), and the claim loops within grace (a loop waiting for a slot or a permit returns
// within a wait slice; one inside a fill may be in a slow read). It reports whether the loops
// finished: only then may the caller unmap the ring. Call it once.
func (f *Feed) Stop(grace time.Duration) (finished bool) {
	f.cancel()
	<-f.watched
	select {
	case <-f.done:
		finished = true
	case <-time.After(grace):
	}
	close(f.stopPub)
	<-f.pubDone
	return finished
}

// loop claims, fills and publishes the ring's batches until the stream ends or the feed
// stops or fails. Each loop holds one claim at a time, the one it is filling: a process that
// dies holds no more batches than it has readers, which is what a supervisor that restarts it
// is told it held.
func (f *Feed) loop() {
	batch := make([][]byte, len(f.pool.src.Tensors())) // the slot's tensors
	f.record(f.r.Guard(func() error {
		for {
			w, err := f.r.P.Claim(f.ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := f.fill(w, batch); err != nil {
				return err
			}
		}
	}))
}

// fill is the one step of every batch, once the pool gives a permit: fill the claimed slot's
// tensors from the source and publish it, or give the slot up with the error for the consumer
// to raise. A fill cut short by Stop records nothing in the ring: its owner is ending it for a
// reason of its own.
func (f *Feed) fill(w *ring.WriteSlot, batch [][]byte) error {
	select {
	case f.pool.permits <- struct{}{}: // a free permit: the usual case, without the wait below
	default:
		select {
		case f.pool.permits <- struct{}{}:
		case <-f.ctx.Done():
			return f.ctx.Err()
		}
	}
	defer func() { <-f.pool.permits }()
	for i := range batch {
		batch[i] = w.Tensor(i)
	}
	if err := f.pool.src.Fill(f.ctx, f.stream.Global(w.Seq()), batch); err != nil {
		if f.ctx.Err() == nil {
			w.Abandon(err) // the consumer gets the text
		}
		return err
	}
	if f.edge(w.Seq()) {
		f.publishCounters() // the consumer's stats() count this fill once it has this batch
	}
	return w.Publish()
}

// edge says whether batch k is one whose fill publishes the counters before the batch: the
// ring's first, and an epoch's first and last, so that the figures a consumer takes at an
// epoch's ends (gobatch's last_epoch) are not up to PublishEvery old.
func (f *Feed) edge(k uint64) bool {
	return k == f.first || f.epoch > 0 && (k%f.epoch == 0 || (k+1)%f.epoch == 0)
}

// record keeps the feed's first error. A failed fill records its error in the ring, which
// makes every other claim of the ring fail with a *ring.ProducerError carrying its text:
// the original wins over those, whichever goroutine records first.
func (f *Feed) record(err error) {
	if err = f.judge(err); err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var pe *ring.ProducerError
	if f.err == nil || errors.As(f.err, &pe) && !errors.As(err, &pe) {
		f.err = err
	}
}

// judge drops ring.ErrConsumerGone when the consumer had received every batch of a bounded
// stream (released them, or holds the last ones): it then exited without closing, but did
// not die mid-stream. Called while the ring is mapped.
func (f *Feed) judge(err error) error {
	if errors.Is(err, ring.ErrConsumerGone) && f.r.R.ReceivedAll() {
		return nil
	}
	return err
}

// watch runs the producer watchdog, and checks every wait slice that the ring's file is whole,
// until either ends the feed or Stop. A cut ring's error is recorded for the consumer, if the
// header is still there to say it in.
func (f *Feed) watch(opt ring.WatchOptions) {
	defer close(f.watched)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	wc := make(chan error, 1)
	go func() { wc <- f.r.P.Watch(ctx, opt) }()
	t := time.NewTicker(ring.WaitSlice)
	defer t.Stop()
	var err error
	for err == nil {
		select {
		case err = <-wc:
			wc = nil
			err = f.judge(err)
			if err == nil {
				f.setWatchErr(nil)
				return
			}
		case <-t.C:
			err = f.r.CutCheck()
		}
	}
	if wc != nil {
		cancel()
		<-wc // the watchdog reads the mapping
		if cut := (*CutError)(nil); errors.As(err, &cut) {
			f.r.Guard(func() error { f.r.P.Fail(err); return nil })
		}
	}
	f.setWatchErr(err)
}

func (f *Feed) setWatchErr(err error) {
	f.mu.Lock()
	f.watchErr = err
	f.mu.Unlock()
}
