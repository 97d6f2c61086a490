package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/nodewire"
)

// TestAcceptBacksOff: accept failures that pass (out of descriptors, an aborted connection)
// do not end the accept loop: it waits, growing its wait, and serves the next connection;
// only a closed listener ends it.
func TestAcceptBacksOff(t *testing.T) {
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fl := &failingListener{errs: []error{
		&net.OpError{Op: "accept", Net: "unixpacket", Err: os.NewSyscallError("accept4", syscall.EMFILE)},
		&net.OpError{Op: "accept", Net: "unixpacket", Err: os.NewSyscallError("accept4", syscall.ENFILE)},
		&net.OpError{Op: "accept", Net: "unixpacket", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)},
	}, conn: a}
	var waits []time.Duration // accept's backoffs, recorded instead of slept
	srv := &nodeServer{log: zerolog.Nop(), sessions: map[sessionKey]*rankSession{}, seen: map[uint64]bool{}, changed: make(chan struct{}, 1),
		gate: nodewire.NewGate(nodewire.GateLimits{PerUID: 1}), sleep: func(d time.Duration) { waits = append(waits, d) }}
	done := make(chan struct{})
	go func() { srv.accept(fl); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("accept loop still running after its listener closed")
	}
	// The connection it got after the failures was served: it answers the handshake (a
	// request before the hello is not a hello).
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := b.Write([]byte(`{"rank": 0}`)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := b.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "not a hello") {
		t.Fatalf("after the accept failures: %q %v, want the served connection's answer", buf[:n], err)
	}
	fl.mu.Lock()
	calls := fl.calls
	fl.mu.Unlock()
	// 3 failures, the connection, the close; waits of 5, 10 and 20 ms between.
	want := []time.Duration{acceptBackoffFirst, 2 * acceptBackoffFirst, 4 * acceptBackoffFirst}
	if calls != 5 || !slices.Equal(waits, want) {
		t.Fatalf("%d accepts with waits %v, want 5 with waits %v", calls, waits, want)
	}
}

// failingListener returns its errors, then its connection, then net.ErrClosed.
type failingListener struct {
	mu    sync.Mutex
	errs  []error
	conn  *net.UnixConn
	calls int
}

func (f *failingListener) AcceptUnix() (*net.UnixConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	if c := f.conn; c != nil {
		f.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}

// socketPair returns two connected SOCK_SEQPACKET Unix sockets.
func socketPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var out [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		out[i] = c.(*net.UnixConn)
	}
	return out[0], out[1], nil
}

// TestServeHandshake: a request without the node's proof is refused (the config digest is no
// longer the only gate); a node loader with another secret fails the rank's check of its
// proof; a connection that never says hello is dropped within helloTimeout and does not keep
// the node loader alive after its ranks have left.
func TestServeHandshake(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 3, ""))
	sha := fileSHA(t, cfg)
	socket := socketName(t)
	cmd := exec.Command(binPath, "serve", "--config", cfg, "--socket", socket, "--local-world-size", "1", "--readers", "2",
		"--log-level", "debug")
	cmd.Env = append(os.Environ(), nodewire.SecretEnv+"=the-job-secret")
	p := startCmd(t, cmd)

	// A client with another secret (the empty one): the node loader's proof fails its check,
	// and its request, with a proof of its own secret, is refused.
	other := &nodeClient{c: rawDial(t, socket, p), auth: nodewire.NewAuth(nil)}
	defer other.close()
	if err := other.hello(); err == nil || !strings.Contains(err.Error(), "proof is wrong") {
		t.Fatalf("hello to a node loader of another secret: %v", err)
	}
	u := uint64(0)
	reply, fd, err := other.request(nodewire.Request{Rank: &u, WorldSize: 1, ConfigSHA256: sha})
	if err != nil || fd >= 0 || !strings.Contains(reply.Error, "does not prove the node's secret") {
		t.Fatalf("request with the wrong proof: %v fd %d %+v", err, fd, reply)
	}
	// One refusal, then the connection is dropped: a peer without the secret gets no more.
	if reply, fd, err := other.request(nodewire.Request{Rank: &u, WorldSize: 1, ConfigSHA256: sha}); err == nil {
		t.Fatalf("a second request after the refusal was answered: fd %d %+v", fd, reply)
	}

	// A silent connection: dropped after helloTimeout.
	silent := rawDial(t, socket, p)
	silent.SetReadDeadline(time.Now().Add(helloTimeout + time.Minute)) // a hang detector
	if _, err := silent.Read(make([]byte, 16)); !errors.Is(err, io.EOF) && err != nil && !isReset(err) {
		t.Fatalf("silent connection: %v, want it closed by the node loader", err)
	}

	// A rank that knows the secret reads its stream, and the node loader exits when it leaves,
	// although another silent connection is still open.
	rawDial(t, socket, p)
	rank := dialKeyed(t, socket, []byte("the-job-secret"))
	if !strings.HasPrefix(rank.next, "gobatch-node-") || len(rank.next) != len("gobatch-node-")+32 {
		t.Fatalf("the welcome's next name %q: want gobatch-node- and 32 hex digits", rank.next)
	}
	if again := dialKeyed(t, socket, []byte("the-job-secret")); again.next != rank.next {
		t.Fatalf("two welcomes of one node loader name %q and %q: want one next name", rank.next, again.next)
	}
	rr := openRank(t, rank, 0, 1, sha, -1)
	got, err := rr.read(-1, 1)
	if err != nil || len(got) != 3 {
		t.Fatalf("rank 0: %v %v", got, err)
	}
	rr.c.Close()
	rank.close()
	p.expectExit(t, exitOK)
	// With the second silent connection still in its handshake: only the first one's ran out
	// of time (a wait for the second would have logged it too).
	if n := strings.Count(p.stderr.String(), "i/o timeout"); n != 1 {
		t.Fatalf("%d handshakes ran out of time, want the first silent connection's only; stderr:\n%s", n, p.stderr.String())
	}
}

// rawDial connects to socket, once p listens, and says nothing.
func rawDial(t *testing.T, socket string, p *proc) *net.UnixConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: "@" + socket, Net: "unixpacket"})
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		select {
		case <-p.done:
			t.Fatalf("shmloader serve exited %d; stderr:\n%s", p.code, p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect %s: %v", socket, err)
		}
	}
}

// dialKeyed connects as a rank that knows key.
func dialKeyed(t *testing.T, socket string, key []byte) *nodeClient {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: "@" + socket, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	nc := &nodeClient{c: c, auth: nodewire.NewAuth(key)}
	if err := nc.hello(); err != nil {
		t.Fatal(fmt.Errorf("hello: %w", err))
	}
	t.Cleanup(nc.close)
	return nc
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// TestServeJoin: a node loader killed with kill -9 while its rank reads; another, started on
// the same name, joins the rank's ring (a join request carrying its memfd): the rank reads the
// rest of its stream, every batch once and in order, and a join with another rank's ring, or
// none, is refused.
func TestServeJoin(t *testing.T) {
	const batches = 40
	cfg := writeConfig(t, "c.toml", allDTypes(2, batches, "delay_ms = 2"))
	sha := fileSHA(t, cfg)
	socket := socketName(t)
	first := startServe(t, cfg, socket, 2, 0, 2)
	nc := dialNode(t, socket, first)
	rr := openRank(t, nc, 1, 2, sha, -1)
	got, err := rr.read(5, 2)
	if err != nil {
		t.Fatal(err)
	}
	first.cmd.Process.Kill()
	<-first.done
	nc.close()

	second := startServe(t, cfg, socket, 2, 0, 2)
	u := func(v uint64) *uint64 { return &v }
	refused := dialNode(t, socket, second)
	if reply, _, err := refused.request(nodewire.Request{Rank: u(0), WorldSize: 2, ConfigSHA256: sha, Join: true}); err != nil ||
		!reply.Usage || !strings.Contains(reply.Error, "a join request without the ring's memfd") {
		t.Fatalf("join without a memfd: %v %+v", err, reply)
	}
	if reply, _, err := refused.requestFD(nodewire.Request{Rank: u(0), WorldSize: 2, ConfigSHA256: sha, Join: true}, rr.seg.Fd()); err != nil ||
		!reply.Usage || !strings.Contains(reply.Error, "not rank 0's ring") {
		t.Fatalf("join with rank 1's ring as rank 0: %v %+v", err, reply)
	}
	refused.close()
	nc = dialNode(t, socket, second)
	reply, fd, err := nc.requestFD(nodewire.Request{Rank: u(1), WorldSize: 2, ConfigSHA256: sha, Join: true}, rr.seg.Fd())
	if err != nil || reply.Error != "" || fd >= 0 {
		t.Fatalf("join: %v fd %d %+v", err, fd, reply)
	}
	rest, err := rr.read(-1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if len(got) != batches {
		t.Fatalf("%d batches, want %d", len(got), batches)
	}
	for k, g := range got {
		if g != uint64(2*k+1) {
			t.Fatalf("batch %d is global %d, want %d (in order, once)", k, g, 2*k+1)
		}
	}
	rr.c.Close()
	nc.close()
	second.cmd.Process.Signal(syscall.SIGTERM)
	second.expectExit(t, exitOK)
}

// TestServeHandshakePlacesPerUID: under a descriptor limit of 110 (readers 2, one rank: a
// reserve of 100), the node loader gives peers of its uid 2 handshake places; a third silent
// connection is answered with the limit and closed, and a rank still gets its ring once one
// place is free: a flood of connections cannot take the descriptors a ring needs.
func TestServeHandshakePlacesPerUID(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 3, ""))
	sha := fileSHA(t, cfg)
	socket := socketName(t)
	cmd := exec.Command("sh", "-c", `ulimit -n 110 && exec "$0" "$@"`, binPath, "serve", "--config", cfg, "--socket", socket,
		"--local-world-size", "1", "--readers", "2", "--log-level", "debug")
	p := startCmd(t, cmd)
	silent := []*net.UnixConn{rawDial(t, socket, p), rawDial(t, socket, p)}
	third := rawDial(t, socket, p)
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, nodewire.MaxMessage)
	n, err := third.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "2 connections of uid") {
		t.Fatalf("third silent connection: %q %v, want the per-uid limit named", buf[:n], err)
	}
	if n, err := third.Read(buf); n != 0 || (err != nil && !errors.Is(err, io.EOF) && !isReset(err)) {
		t.Fatalf("after the refusal: %q %v, want the connection closed", buf[:n], err)
	}
	silent[0].Close()
	var rank *nodeClient
	deadline := time.Now().Add(5 * time.Second)
	for rank == nil {
		nc, err := dialNodeErr(socket, 0)
		switch {
		case err == nil:
			rank = nc
		case time.Now().After(deadline):
			t.Fatalf("no handshake place after one silent connection closed: %v", err)
		default:
			time.Sleep(10 * time.Millisecond)
		}
	}
	defer rank.close()
	rr := openRank(t, rank, 0, 1, sha, -1)
	if got, err := rr.read(-1, 1); err != nil || len(got) != 3 {
		t.Fatalf("rank 0 beside a silent connection: %v %v", got, err)
	}
	rr.c.Close()
	rank.close()
	p.expectExit(t, exitOK)
	if log := p.stderr.String(); !strings.Contains(log, `"handshakes_per_uid":2`) {
		t.Fatalf("log does not state the shares:\n%s", log)
	}
}
