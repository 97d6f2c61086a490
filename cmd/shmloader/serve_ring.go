package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/feed"
	"github.com/gobatch/gobatch/nodewire"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

// One rank's ring in `shmloader serve`: a memfd ring with this process as its one producer,
// fed from the node's one pool (package feed) until its consumer closes it or dies, when
// on_rank_death applies.

// memfdName is the name of rank's ring memfd (shown in /proc/PID/fd): the rank is in it, and
// the Loader refuses a ring whose name is not its rank's.
func memfdName(rank uint64) string { return fmt.Sprintf("gobatch-rank%d", rank) }

// nodeRing is one rank's ring.
type nodeRing struct {
	srv       *nodeServer
	sess      *rankSession
	stream    sampler.Stream
	memfdName string
	ring      *feed.Ring
	feed      *feed.Feed // set by start (under nodeServer.mu)
	once      sync.Once
	closed    chan struct{} // closed once the mapping is released
}

// openRing makes rank's ring for a request: the layout of the part of the stream it asks for
// (a *feed.RequestError when that is not in the stream), a memfd of that size, the ring and
// its producer entry.
func (s *nodeServer) openRing(sess *rankSession, stream sampler.Stream, req nodewire.Request) (*nodeRing, error) {
	var w feed.Window
	if req.Start != nil {
		w.Start, w.StartSet = *req.Start, true
	}
	if req.Epoch != nil {
		w.Epoch, w.EpochSet = *req.Epoch, true
	}
	l, err := w.Layout(sess.job.cfg, sess.job.src)
	if err != nil {
		return nil, err
	}
	name := memfdName(stream.Rank)
	var r *feed.Ring
	if req.Join {
		r, err = s.joinRing(req, l)
	} else {
		r, err = feed.CreateMemfd(name, l, s.flags.readers)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info().Uint64("rank", stream.Rank).Uint64("start_batch", l.StartBatch).Uint64("total_batches", l.TotalBatches).
		Int("slots", l.Slots).Int64("segment_bytes", r.R.SegmentBytes()).Msg("ring")
	return &nodeRing{srv: s, sess: sess, stream: stream, memfdName: name, ring: r, closed: make(chan struct{})}, nil
}

// joinRing joins the ring a join request carries (its memfd, which must be the rank's) as
// its producer: the ring's position and layout are its own (the request's epoch must match).
func (s *nodeServer) joinRing(req nodewire.Request, l ring.Layout) (*feed.Ring, error) {
	if req.FD < 0 {
		return nil, &feed.RequestError{Err: errors.New("a join request without the ring's memfd")}
	}
	want := "/memfd:" + memfdName(*req.Rank) + " "
	if link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", req.FD)); err != nil || !strings.HasPrefix(link, want) {
		return nil, &feed.RequestError{Err: fmt.Errorf("join: the memfd passed is %q, not rank %d's ring", link, *req.Rank)}
	}
	// JoinFD owns the descriptor it is given (the caller closes the request's own): a
	// duplicate, closed here when JoinFD failed before it took it (still open, same file).
	fd, err := unix.FcntlInt(uintptr(req.FD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("join: dup the ring's memfd: %w", err)
	}
	r, err := feed.JoinFD(fd, l, false, s.flags.readers)
	if err != nil {
		var a, b unix.Stat_t
		if unix.Fstat(fd, &a) == nil && unix.Fstat(req.FD, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("join: %w", err)
	}
	return r, nil
}

// start feeds the ring (nodeServer.mu held, so that close, which closeAll may call as soon as
// the ring is listed, sees whether it ran).
func (nr *nodeRing) start() {
	nr.feed = nr.sess.job.pool.Start(nr.ring, nr.stream, ring.WatchOptions{})
	go nr.watch()
}

// watch waits until the consumer closes the ring or dies (on_rank_death then applies), or an
// error ends it, and then closes the ring; nothing when the ring is being closed here.
func (nr *nodeRing) watch() {
	f := nr.feed
	select {
	case <-f.Done():
		if err := f.Err(); err != nil && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, ring.ErrConsumerClosed) && !errors.Is(err, ring.ErrConsumerGone) {
			nr.srv.log.Warn().Uint64("rank", nr.stream.Rank).Err(err).Msg("fill")
		}
		<-f.Watched()
	case <-f.Watched():
	}
	err := f.WatchErr()
	if errors.Is(err, context.Canceled) {
		return // closed here
	}
	if errors.Is(err, ring.ErrConsumerGone) {
		nr.srv.rankDied(nr.sess, err)
	}
	nr.close()
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
	return nr.ring.R.Stats().ConsumerState != ring.ConsumerClosed && !nr.ring.R.ReceivedAll()
}

// close stops the ring's feed and, once no reader is in its slots, releases the mapping (the
// consumer keeps its own). Idempotent; callers must not hold nodeServer.mu.
func (nr *nodeRing) close() {
	nr.once.Do(func() {
		if nr.feed != nil && !nr.feed.Stop(stopGrace) {
			nr.srv.log.Warn().Uint64("rank", nr.stream.Rank).Dur("after", stopGrace).Msg("readers still busy; the ring stays mapped")
			close(nr.closed)
			return
		}
		nr.srv.mu.Lock()
		close(nr.closed)
		if nr.sess.cur == nr {
			nr.sess.cur = nil
		}
		nr.srv.mu.Unlock()
		nr.srv.log.Info().Uint64("rank", nr.stream.Rank).Uint64("batches_written", nr.ring.R.Stats().BatchesWritten).Msg("ring closed")
		if err := nr.ring.Close(); err != nil {
			nr.srv.log.Warn().Err(err).Msg("unmap")
		}
	})
	<-nr.closed
}
