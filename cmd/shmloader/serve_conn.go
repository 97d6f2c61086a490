package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/feed"
)

// The socket side of `shmloader serve`. A rank's gobatch.Loader connects (SOCK_SEQPACKET: one
// message a request) and keeps the connection for its life; each request asks for a ring
// (at the start, and again for each epoch or resume), and each reply is a JSON object that
// carries, on success, the ring's memfd (SCM_RIGHTS). A connection serves one rank, and a
// rank is served to one connection at a time.

// nodeRequest asks for rank's ring. Start and Epoch are run's --start and --epoch.
type nodeRequest struct {
	Rank         *uint64 `json:"rank"`
	WorldSize    uint64  `json:"world_size"`
	Start        *uint64 `json:"start"`
	Epoch        *uint64 `json:"epoch"`
	ConfigSHA256 string  `json:"config_sha256"`
	PID          int     `json:"pid"`
	Auth         string  `json:"auth,omitempty"` // the rank's proof of the node's secret (serve_auth.go); its first request needs it
	// Join: the message carries the rank's ring (a memfd) that a node loader before this one
	// fed and died on; this one joins it as its producer (feed.JoinFD: it takes over the
	// batches the dead one held) instead of making a new ring, and the reply carries no
	// descriptor.
	Join bool `json:"join,omitempty"`
	fd   int  // the descriptor the message carried (-1: none)
}

// nodeReply answers a request: the ring (its memfd is the message's one descriptor), or an
// error; Usage marks an error of the request or the configuration (Python: ConfigError).
type nodeReply struct {
	Rank      uint64 `json:"rank"`
	Memfd     string `json:"memfd,omitempty"` // the memfd's name (/proc/PID/fd/N shows it): the Loader checks it is its rank's
	ServerPID int    `json:"server_pid"`
	Error     string `json:"error,omitempty"`
	Usage     bool   `json:"usage,omitempty"`
}

// maxRequest bounds a request message.
const maxRequest = 4096

// rankSession is the connection of one rank's Loader.
type rankSession struct {
	rank uint64
	pid  int
	cur  *nodeRing   // its open ring (nil before the first request); guarded by nodeServer.mu
	died atomic.Bool // on_rank_death applied
}

// serveConn answers the requests of one connection until it ends, then ends its rank's
// session: a ring still open then (its consumer neither closed it nor took every batch)
// means the rank's process died. The connection first passes the checks of serve_auth.go;
// until its first good request it is not a rank's, and is dropped after helloTimeout.
func (s *nodeServer) serveConn(c *net.UnixConn) {
	defer c.Close()
	auth, pid, ok := s.handshake(c)
	if !ok {
		return
	}
	var sess *rankSession
	buf, oob := make([]byte, maxRequest), make([]byte, unix.CmsgSpace(4))
	for {
		n, passed, err := readRequest(c, buf, oob)
		if err != nil || n == 0 {
			if sess == nil && err != nil {
				s.log.Debug().Err(err).Int("pid", pid).Msg("connection dropped before its first request")
			}
			break
		}
		var req nodeRequest
		var reply nodeReply
		fd := -1
		err = json.Unmarshal(buf[:n], &req)
		req.fd = passed
		switch {
		case err != nil:
			reply = nodeReply{Error: fmt.Sprintf("request: %v", err), Usage: true}
		case sess == nil && !auth.check(req.Auth):
			s.log.Warn().Int("pid", pid).Msg("request without the node's secret refused")
			reply = nodeReply{Error: errNotAuthenticated.Error()}
		default:
			req.PID = pid
			joined := sess == nil
			sess, reply, fd = s.request(c, sess, req)
			if joined && sess != nil {
				c.SetReadDeadline(time.Time{}) // a rank's now: it keeps its connection for its life
			}
		}
		if req.fd >= 0 { // not taken by a join
			unix.Close(req.fd)
		}
		reply.ServerPID = os.Getpid()
		err = s.send(c, reply, fd)
		if fd >= 0 {
			unix.Close(fd) // the rank has its own now
		}
		if err != nil {
			s.log.Warn().Err(err).Msg("reply")
			break
		}
	}
	s.endSession(sess)
}

// handshake admits the peer's uid and answers its hello (serve_auth.go), under the
// connection's helloTimeout; it returns the state that checks the first request's proof and
// the peer's pid as the kernel gives it.
func (s *nodeServer) handshake(c *net.UnixConn) (*nodeAuth, int, bool) {
	cred, err := admit(c, s.flags.allowUID)
	if err != nil {
		ev := s.log.Warn().Err(err)
		if cred != nil {
			ev = ev.Int32("pid", cred.Pid).Uint32("uid", cred.Uid)
		}
		ev.Msg("connection refused")
		s.send(c, nodeReply{Error: err.Error(), ServerPID: os.Getpid()}, -1)
		// Take its hello before closing (briefly): a peer that writes to a closed connection
		// gets EPIPE instead of reading why.
		c.SetReadDeadline(time.Now().Add(refusedLinger))
		c.Read(make([]byte, maxRequest))
		return nil, 0, false
	}
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	buf := make([]byte, maxRequest)
	n, err := c.Read(buf)
	if err != nil || n == 0 {
		s.log.Debug().AnErr("err", err).Int32("pid", cred.Pid).Msg("connection dropped before its hello")
		return nil, 0, false
	}
	auth := &nodeAuth{key: s.secret}
	var h nodeHello
	w, err := nodeWelcome{}, json.Unmarshal(buf[:n], &h)
	if err == nil {
		w, err = auth.welcome(h)
	}
	if err != nil {
		w = nodeWelcome{Error: fmt.Sprintf("not a hello (%v): this node loader expects a gobatch Loader of the same version", err)}
	}
	w.ServerPID = os.Getpid()
	b, _ := json.Marshal(w)
	if _, werr := c.Write(b); werr != nil || err != nil {
		return nil, 0, false
	}
	return auth, int(cred.Pid), true
}

// readRequest reads one message into buf, and the one descriptor it may carry (-1: none;
// any others are closed).
func readRequest(c *net.UnixConn, buf, oob []byte) (int, int, error) {
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || oobn == 0 {
		return n, -1, err
	}
	fd := -1
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for i := range msgs {
		fds, _ := unix.ParseUnixRights(&msgs[i])
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	return n, fd, nil
}

// send writes one reply, with fd when it is >= 0.
func (s *nodeServer) send(c *net.UnixConn, reply nodeReply, fd int) error {
	b, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// request checks one request and opens the rank's ring. It returns the connection's session
// (made by its first good request), the reply, and the ring's descriptor (-1 on error).
func (s *nodeServer) request(c *net.UnixConn, sess *rankSession, req nodeRequest) (*rankSession, nodeReply, int) {
	refuse := func(usage bool, format string, args ...any) (*rankSession, nodeReply, int) {
		return sess, nodeReply{Error: fmt.Sprintf(format, args...), Usage: usage}, -1
	}
	switch {
	case req.Rank == nil:
		return refuse(true, "request without a rank")
	case req.WorldSize != s.streams[0].WorldSize:
		return refuse(true, "rank %d asks for world size %d; this node loader serves world size %d", *req.Rank, req.WorldSize, s.streams[0].WorldSize)
	case req.ConfigSHA256 != s.cfg.SHA256:
		return refuse(true, "rank %d's configuration is not the node loader's (sha256 %.12s, the node loader's %.12s): give every rank the same configuration", *req.Rank, req.ConfigSHA256, s.cfg.SHA256)
	case sess != nil && sess.rank != *req.Rank:
		return refuse(true, "this connection serves rank %d, not rank %d", sess.rank, *req.Rank)
	}
	rank := *req.Rank
	stream, ok := s.stream(rank)
	if !ok {
		return refuse(true, "rank %d is not on this node: this node loader (node rank %d, %d local ranks) serves ranks %d .. %d of %d; check RANK, GROUP_RANK and LOCAL_WORLD_SIZE",
			rank, s.flags.nodeRank, len(s.streams), s.streams[0].Rank, s.streams[len(s.streams)-1].Rank, s.streams[0].WorldSize)
	}
	if sess == nil {
		var err error
		if sess, err = s.join(rank, req.PID); err != nil {
			return refuse(false, "%v", err)
		}
	}
	s.mu.Lock()
	stopped, prev := s.stopped, sess.cur
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
	if stopped := s.stopped; stopped != nil { // stopped while the ring was made
		s.mu.Unlock()
		r.close()
		return refuse(false, "%v", stopped)
	}
	if req.Join { // the rank has the ring already
		sess.cur = r
		r.start()
		s.mu.Unlock()
		return sess, nodeReply{Rank: rank, Memfd: r.memfdName}, -1
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
	return sess, nodeReply{Rank: rank, Memfd: r.memfdName}, fd
}

// join starts rank's session, refusing a rank that another live connection holds.
func (s *nodeServer) join(rank uint64, pid int) (*rankSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sessions[rank]; old != nil {
		return nil, fmt.Errorf("rank %d is already served to pid %d: two processes with the same RANK?", rank, old.pid)
	}
	sess := &rankSession{rank: rank, pid: pid}
	s.sessions[rank] = sess
	s.seen[rank] = true
	s.conns++
	s.log.Info().Uint64("rank", rank).Int("pid", pid).Msg("rank connected")
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
	delete(s.sessions, sess.rank)
	sess.cur = nil
	s.conns--
	s.mu.Unlock()
	s.log.Info().Uint64("rank", sess.rank).Int("pid", sess.pid).Msg("rank left")
	s.poke()
}
