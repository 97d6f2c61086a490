package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// One rank's ring in `shmloader serve`: a memfd ring with this process as its one producer.
// A claimer goroutine claims its batches in stream order (at most a ring's slots ahead of
// the consumer, as Claim waits for a free slot) and hands them to the node's reader pool,
// which fills them from the one shared source; the watchdog (ring.Producer.Watch) ends the
// ring when its consumer closes it or dies.

// memfdName is the name of rank's ring memfd (shown in /proc/PID/fd): the rank is in it, and
// the Loader refuses a ring whose name is not its rank's.
func memfdName(rank uint64) string { return fmt.Sprintf("gobatch-rank%d", rank) }

// nodeRing is one rank's ring.
type nodeRing struct {
	srv       *nodeServer
	sess      *rankSession
	stream    sampler.Stream
	memfdName string
	seg       *shm.Segment
	r         *ring.Ring
	p         *ring.Producer
	reported  ring.JobCounters // the source's counters already added to this ring

	ctx      context.Context
	cancel   context.CancelFunc
	inflight sync.WaitGroup // slots handed to the reader pool
	claimed  chan struct{}  // closed when the claimer returns
	watched  chan struct{}  // closed when the watchdog returns
	started  atomic.Bool    // start ran (under nodeServer.mu)
	once     sync.Once
	closed   chan struct{} // closed once the mapping is released
}

// fillJob is a claimed slot for the reader pool.
type fillJob struct {
	r *nodeRing
	w *ring.WriteSlot
}

// openRing makes rank's ring for a request: the layout of the part of the stream it asks for
// (run's --start and --epoch rules), a memfd of that size, the ring and its producer entry.
func (s *nodeServer) openRing(sess *rankSession, stream sampler.Stream, req nodeRequest) (*nodeRing, error) {
	var f runFlags
	if req.Start != nil {
		f.start, f.startSet = *req.Start, true
	}
	if req.Epoch != nil {
		f.epoch, f.epochSet = *req.Epoch, true
	}
	l, err := streamLayout(s.cfg, s.src.Tensors(), f, s.src.Stats())
	if err != nil {
		return nil, &usageErr{err}
	}
	if err := preflight(l.SegmentBytes(), false); err != nil {
		return nil, err
	}
	name := memfdName(stream.Rank)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	seg, err := shm.FromFD(fd, l.SegmentBytes())
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	r, err := ring.Create(seg.Bytes(), l, false)
	if err != nil {
		seg.Close()
		return nil, err
	}
	p, err := r.NewProducer(s.flags.readers)
	if err != nil {
		seg.Close()
		return nil, err
	}
	nr := &nodeRing{srv: s, sess: sess, stream: stream, memfdName: name, seg: seg, r: r, p: p,
		claimed: make(chan struct{}), watched: make(chan struct{}), closed: make(chan struct{})}
	nr.ctx, nr.cancel = context.WithCancel(context.Background())
	s.log.Info().Uint64("rank", stream.Rank).Uint64("start_batch", l.StartBatch).Uint64("total_batches", l.TotalBatches).
		Int("slots", l.Slots).Int64("segment_bytes", r.SegmentBytes()).Msg("ring")
	return nr, nil
}

// start runs the ring's watchdog and claimer (nodeServer.mu held, so that close, which
// closeAll may call as soon as the ring is listed, sees whether it ran).
func (nr *nodeRing) start() {
	nr.started.Store(true)
	go nr.watch()
	go nr.claim()
}

// watch runs the producer watchdog until the consumer closes the ring or dies (on_rank_death
// then applies), or the ring is closed here; then it closes the ring.
func (nr *nodeRing) watch() {
	err := nr.p.Watch(nr.ctx, ring.WatchOptions{})
	died := errors.Is(err, ring.ErrConsumerGone) && !ringReceivedAll(nr.r) // before close may unmap
	close(nr.watched)
	if died {
		nr.srv.rankDied(nr.sess, err)
	}
	if nr.ctx.Err() == nil {
		go nr.close() // close waits for this goroutine
	}
}

// claim claims the ring's batches in order and hands them to the reader pool, until the
// stream ends or the ring stops.
func (nr *nodeRing) claim() {
	defer close(nr.claimed)
	for {
		w, err := nr.p.Claim(nr.ctx)
		if err == io.EOF {
			return
		}
		if err != nil {
			if nr.ctx.Err() == nil && !errors.Is(err, ring.ErrConsumerClosed) && !errors.Is(err, ring.ErrConsumerGone) {
				nr.srv.log.Warn().Uint64("rank", nr.stream.Rank).Err(err).Msg("claim")
			}
			return
		}
		nr.inflight.Add(1)
		select {
		case nr.srv.work <- fillJob{nr, w}:
		case <-nr.ctx.Done():
			w.Abandon(nr.ctx.Err())
			nr.inflight.Done()
			return
		}
	}
}

// fill fills and publishes one claimed slot; a failed fill is recorded for the consumer.
func (nr *nodeRing) fill(w *ring.WriteSlot, batch [][]byte) {
	defer nr.inflight.Done()
	batch = batch[:len(nr.r.Layout().Tensors)]
	for i := range batch {
		batch[i] = w.Tensor(i)
	}
	if err := nr.srv.src.Fill(nr.ctx, nr.stream.Global(w.Seq()), batch); err != nil {
		if nr.ctx.Err() == nil {
			nr.srv.log.Warn().Uint64("rank", nr.stream.Rank).Uint64("batch", w.Seq()).Err(err).Msg("fill")
		}
		w.Abandon(err)
		return
	}
	w.Publish()
}

// readLoop is one reader of the pool: it fills claimed slots of any ring.
func (s *nodeServer) readLoop() {
	batch := make([][]byte, len(s.src.Tensors()))
	for j := range s.work {
		j.r.fill(j.w, batch)
	}
}

// leftOpen reports whether the ring's consumer has neither closed it nor taken every batch of
// a bounded stream: a rank whose connection ends then has died. Call with nodeServer.mu held
// (close unmaps only after taking it).
func (nr *nodeRing) leftOpen() bool {
	select {
	case <-nr.closed:
		return false // closed by its watchdog: the consumer closed it, or its death was handled
	default:
	}
	return nr.r.Stats().ConsumerState != ring.ConsumerClosed && !ringReceivedAll(nr.r)
}

// publish adds the source's counters to the ring's job counters (nodeServer.mu held, so that
// the mapping stays while it writes).
func (nr *nodeRing) publish() {
	select {
	case <-nr.closed:
	default:
		nr.srv.src.publish(nr.r, &nr.reported)
	}
}

// close stops the ring's goroutines and, once no reader is in its slots, releases the
// mapping (the consumer keeps its own). Idempotent; callers must not hold nodeServer.mu.
func (nr *nodeRing) close() {
	nr.once.Do(func() {
		nr.cancel()
		if nr.started.Load() {
			<-nr.watched
			<-nr.claimed
		}
		done := make(chan struct{})
		go func() { nr.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(stopGrace):
			nr.srv.log.Warn().Uint64("rank", nr.stream.Rank).Dur("after", stopGrace).Msg("readers still busy; the ring stays mapped")
			close(nr.closed)
			return
		}
		nr.srv.mu.Lock()
		nr.srv.src.publish(nr.r, &nr.reported)
		close(nr.closed)
		if nr.sess.cur == nr {
			nr.sess.cur = nil
		}
		nr.srv.mu.Unlock()
		nr.srv.log.Info().Uint64("rank", nr.stream.Rank).Uint64("batches_written", nr.r.Stats().BatchesWritten).Msg("ring closed")
		if err := nr.seg.Close(); err != nil {
			nr.srv.log.Warn().Err(err).Msg("unmap")
		}
	})
	<-nr.closed
}
