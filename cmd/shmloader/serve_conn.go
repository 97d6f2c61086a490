package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/feed"
	"github.com/gobatch/gobatch/nodewire"
)

// The socket side of `shmloader serve`. A rank's gobatch.Loader connects (SOCK_SEQPACKET: one
// message a request) and keeps the connection for its life; each request asks for a ring
// (at the start, and again for each epoch or resume), and each reply is a JSON object that
// carries, on success, the ring's memfd (SCM_RIGHTS). A connection serves one rank, and a
// rank is served to one connection at a time.

// helloTimeout bounds the handshake (package nodewire): from accept to the first good request.
const helloTimeout = 5 * time.Second

// rankSession is the connection of one rank's Loader.
type rankSession struct {
	job  *nodeJob
	rank uint64
	pid  int
	cur  *nodeRing   // its open ring (nil before the first request); guarded by nodeServer.mu
	died atomic.Bool // on_rank_death applied
}

// admit decides, in the accept loop, what a new connection may cost: a peer that Admit
// refuses (another user) or whose uid has no handshake place left (nodewire.Gate) is answered
// and closed here, kept open for its hello only while the gate lets refusals linger; any
// other gets a goroutine (serveConn) and holds its place until it proves the secret or ends.
func (s *nodeServer) admit(c *net.UnixConn) {
	cred, err := nodewire.Admit(c, s.flags.allowUID)
	if err == nil {
		if err = s.gate.Enter(cred.Uid); err == nil {
			go s.serveConn(c, cred)
			return
		}
	}
	if n := s.refused.Add(1); n&(n-1) == 0 { // a flood logs 1, 2, 4, 8, ... lines
		ev := s.log.Warn().Err(err).Int64("refused_so_far", n)
		if cred != nil {
			ev = ev.Int32("pid", cred.Pid).Uint32("uid", cred.Uid)
		}
		ev.Msg("connection refused")
	}
	if !s.gate.Linger() {
		nodewire.Refuse(c, err, false)
		c.Close()
		return
	}
	go func() {
		defer s.gate.EndLinger()
		defer c.Close()
		nodewire.Refuse(c, err, true)
	}()
}

// serveConn answers the requests of one admitted connection until it ends, then ends its
// rank's session: a ring still open then (its consumer neither closed it nor took every
// batch) means the rank's process died. Until its first good request the connection is not a
// rank's and holds its uid's handshake place: it is dropped after helloTimeout, and after the
// refusal of a first request that is not one (unreadable, or without the node's proof), so
// that a peer without the secret gets one answer and no more of the node loader's time.
func (s *nodeServer) serveConn(c *net.UnixConn, cred *unix.Ucred) {
	defer c.Close()
	gated := true
	leave := func() {
		if gated {
			gated = false
			s.gate.Leave(cred.Uid)
		}
	}
	defer leave()
	pid := int(cred.Pid)
	auth, ok := s.handshake(c, pid)
	if !ok {
		return
	}
	var sess *rankSession
	buf, oob := make([]byte, nodewire.MaxMessage), make([]byte, nodewire.OOBSpace)
	for {
		n, passed, err := nodewire.ReadMsg(c, buf, oob)
		if err != nil || n == 0 {
			if sess == nil && err != nil {
				s.log.Debug().Err(err).Int("pid", pid).Msg("connection dropped before its first request")
			}
			break
		}
		var req nodewire.Request
		var reply nodewire.Reply
		fd := -1
		drop := false // refuse this connection after the reply: it has not proved the secret
		err = json.Unmarshal(buf[:n], &req)
		req.FD = passed
		switch {
		case err != nil:
			reply = nodewire.Reply{Error: fmt.Sprintf("request: %v", err), Usage: true}
			drop = sess == nil
		case sess == nil && !auth.Check(req.Auth):
			s.log.Warn().Int("pid", pid).Msg("request without the node's secret refused; connection dropped")
			reply = nodewire.Reply{Error: nodewire.ErrNotAuthenticated.Error()}
			drop = true
		default:
			req.PID = pid
			joined := sess == nil
			sess, reply, fd = s.request(c, sess, req)
			if joined && sess != nil {
				c.SetReadDeadline(time.Time{}) // a rank's now: it keeps its connection for its life
				leave()
			}
		}
		if req.FD >= 0 { // not taken by a join
			unix.Close(req.FD)
		}
		reply.ServerPID = os.Getpid()
		err = nodewire.Send(c, reply, fd)
		if fd >= 0 {
			unix.Close(fd) // the rank has its own now
		}
		if err != nil {
			s.log.Warn().Err(err).Msg("reply")
			break
		}
		if drop {
			break
		}
	}
	s.endSession(sess)
}

// handshake answers the admitted peer's hello (package nodewire) under the connection's
// helloTimeout, telling it where the ranks meet should this node loader die; it returns the
// state that checks the first request's proof.
func (s *nodeServer) handshake(c *net.UnixConn, pid int) (*nodewire.Auth, bool) {
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	auth, err := nodewire.Greet(c, s.secret, s.next)
	if err != nil {
		s.log.Debug().Err(err).Int("pid", pid).Msg("connection dropped in its handshake")
		return nil, false
	}
	return auth, true
}

// request checks one request and opens the rank's ring. It returns the connection's session
// (made by its first good request), the reply, and the ring's descriptor (-1 on error).
func (s *nodeServer) request(c *net.UnixConn, sess *rankSession, req nodewire.Request) (*rankSession, nodewire.Reply, int) {
	refuse := func(usage bool, format string, args ...any) (*rankSession, nodewire.Reply, int) {
		return sess, nodewire.Reply{Error: fmt.Sprintf(format, args...), Usage: usage}, -1
	}
	if req.Rank == nil {
		return refuse(true, "request without a rank")
	}
	rank := *req.Rank
	if sess != nil && sess.rank != rank {
		return refuse(true, "this connection serves rank %d, not rank %d", sess.rank, rank)
	}
	job, usage, err := s.jobOf(sess, req) // with --share, a new session's job is held for it (users)
	if err != nil {
		return refuse(usage, "%v", err)
	}
	stream, ok := job.stream(rank)
	if !ok {
		if sess == nil {
			s.leaveJob(job)
		}
		if job.streams == nil {
			return refuse(true, "rank %d is not a rank of world size %d", rank, job.world)
		}
		return refuse(true, "rank %d is not on this node: this node loader (node rank %d, %d local ranks) serves ranks %d .. %d of %d; check RANK, GROUP_RANK and LOCAL_WORLD_SIZE",
			rank, s.flags.nodeRank, len(job.streams), job.streams[0].Rank, job.streams[len(job.streams)-1].Rank, job.streams[0].WorldSize)
	}
	if sess == nil {
		if sess, err = s.join(job, rank, req.PID); err != nil {
			s.leaveJob(job)
			return refuse(false, "%v", err)
		}
	}
	s.mu.Lock()
	stopped, prev := cmp.Or(s.stopped, job.stopped), sess.cur
	s.mu.Unlock()
	if stopped != nil {
		return refuse(false, "%v", stopped)
	}
	if prev != nil { // an epoch or a resume: the Loader closed the previous ring first
		prev.close()
	}
	r, err := s.openRing(sess, stream, req)
	if err != nil {
		var usage *feed.RequestError
		return refuse(errors.As(err, &usage), "rank %d: %v", rank, err)
	}
	s.mu.Lock()
	if stopped := cmp.Or(s.stopped, job.stopped); stopped != nil { // stopped while the ring was made
		s.mu.Unlock()
		r.close()
		return refuse(false, "%v", stopped)
	}
	if req.Join { // the rank has the ring already
		sess.cur = r
		r.start()
		s.mu.Unlock()
		return sess, nodewire.Reply{Rank: rank, Memfd: r.memfdName}, -1
	}
	// The reply carries a duplicate: the ring may be closed (a stop) before the reply is sent.
	fd, err := unix.FcntlInt(uintptr(r.ring.Seg.Fd()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		s.mu.Unlock()
		r.close()
		return refuse(false, "rank %d: dup the ring's memfd: %v", rank, err)
	}
	sess.cur = r
	r.start()
	s.mu.Unlock()
	return sess, nodewire.Reply{Rank: rank, Memfd: r.memfdName}, fd
}

// join starts rank's session in job, refusing a rank that another live connection holds.
func (s *nodeServer) join(job *nodeJob, rank uint64, pid int) (*rankSession, error) {
	s.mu.Lock()
	key := sessionKey{job.key, rank}
	if old := s.sessions[key]; old != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("rank %d is already served to pid %d: two processes with the same RANK?", rank, old.pid)
	}
	sess := &rankSession{job: job, rank: rank, pid: pid}
	s.sessions[key] = sess
	if s.share == nil {
		s.seen[rank] = true
	}
	s.conns++
	s.mu.Unlock()
	s.log.Info().Uint64("rank", rank).Int("pid", pid).Str("job", job.label).Msg("rank connected")
	return sess, nil
}

// endSession ends a connection's session: a ring it leaves open means its process died.
func (s *nodeServer) endSession(sess *rankSession) {
	if sess == nil {
		return // never a rank's: it was not counted
	}
	s.mu.Lock()
	r := sess.cur
	open := r != nil && r.leftOpen()
	s.mu.Unlock()
	if open {
		s.rankDied(sess, errors.New("its connection to the node loader ended"))
	}
	if r != nil {
		r.close()
	}
	s.mu.Lock()
	delete(s.sessions, sessionKey{sess.job.key, sess.rank})
	sess.cur = nil
	s.conns--
	s.mu.Unlock()
	s.leaveJob(sess.job)
	s.log.Info().Uint64("rank", sess.rank).Int("pid", sess.pid).Str("job", sess.job.label).Msg("rank left")
	s.poke()
}
