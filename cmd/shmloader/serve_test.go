package main

// Tests of `shmloader serve` through the binary: the tests act as the ranks' Loaders, with the
// Go consumer (package ring) on the memfd each request returns, and check every batch against
// the synthetic contract (internal/synthcheck) at the global index the rank rule gives,
// written out here: rank r of w reads global batches k*w + r.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/internal/synthcheck"
	"github.com/gobatch/gobatch/nodewire"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// nodeHelperEnv makes the test binary a rank that takes one batch and then waits to be
// killed (the rank-death tests): SOCKET,RANK,WORLD,CONFIG_SHA256.
const nodeHelperEnv = "SHMLOADER_TEST_NODE_RANK"

func init() {
	if v := os.Getenv(nodeHelperEnv); v != "" {
		os.Exit(nodeHelper(v))
	}
}

func nodeHelper(v string) int {
	parts := strings.Split(v, ",")
	rank, _ := strconv.ParseUint(parts[1], 10, 64)
	world, _ := strconv.ParseUint(parts[2], 10, 64)
	nc, err := dialNodeErr(parts[0], 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	reply, fd, err := nc.request(nodewire.Request{Rank: &rank, WorldSize: world, ConfigSHA256: parts[3], PID: os.Getpid()})
	if err != nil || fd < 0 {
		fmt.Fprintln(os.Stderr, err, reply.Error)
		return 1
	}
	_, r, c, err := openMemfdRing(fd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := c.Next(context.Background())
	if err != nil || checkBatchAt(r, s, s.Seq()*world+rank) != nil {
		fmt.Fprintln(os.Stderr, "first batch:", err)
		return 1
	}
	fmt.Println("read")
	time.Sleep(time.Minute) // killed by the test
	return 0
}

// nodeClient is a test rank's connection to a node loader, past the handshake
// (package nodewire) with the empty secret the tests' node loaders have.
type nodeClient struct {
	c    *net.UnixConn
	auth *nodewire.Auth
	next string // the welcome's name for the next node loader's socket
}

func dialNodeErr(name string, d time.Duration) (*nodeClient, error) {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: "@" + name, Net: "unixpacket"})
		if err == nil {
			nc := &nodeClient{c: c, auth: nodewire.NewAuth(nil)}
			if err := nc.hello(); err != nil {
				c.Close()
				return nil, err
			}
			return nc, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hello runs the rank's side of the handshake and checks serve's proof.
func (nc *nodeClient) hello() error {
	h, err := nc.auth.Hello()
	if err != nil {
		return err
	}
	if err := nodewire.Send(nc.c, h, -1); err != nil {
		return err
	}
	buf := make([]byte, nodewire.MaxMessage)
	n, err := nc.c.Read(buf)
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	var w nodewire.Welcome
	if err := json.Unmarshal(buf[:n], &w); err != nil {
		return fmt.Errorf("welcome %q: %v", buf[:n], err)
	}
	nc.next = w.Next
	return nc.auth.Verify(w)
}

func dialNode(t *testing.T, name string, p *proc) *nodeClient {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := dialNodeErr(name, 0)
		if err == nil {
			t.Cleanup(nc.close)
			return nc
		}
		select {
		case <-p.done:
			t.Fatalf("shmloader serve exited %d; stderr:\n%s", p.code, p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect %s: %v", name, err)
		}
	}
}

func (nc *nodeClient) close() { nc.c.Close() }

// request sends one request and returns the reply and its descriptor (-1 when none).
func (nc *nodeClient) request(req nodewire.Request) (nodewire.Reply, int, error) {
	return nc.requestFD(req, -1)
}

// requestFD is request with a descriptor passed along (none when fd < 0).
func (nc *nodeClient) requestFD(req nodewire.Request, fd int) (nodewire.Reply, int, error) {
	if req.Auth == "" {
		req.Auth = nc.auth.Proof()
	}
	if err := nodewire.Send(nc.c, req, fd); err != nil {
		return nodewire.Reply{}, -1, err
	}
	return nc.reply()
}

// reply reads one reply and its descriptor (-1 when none).
func (nc *nodeClient) reply() (nodewire.Reply, int, error) {
	buf, oob := make([]byte, nodewire.MaxMessage), make([]byte, nodewire.OOBSpace)
	n, fd, err := nodewire.ReadMsg(nc.c, buf, oob)
	if err != nil {
		return nodewire.Reply{}, -1, err
	}
	var reply nodewire.Reply
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		return reply, fd, fmt.Errorf("reply %q: %w", buf[:n], err)
	}
	return reply, fd, nil
}

// openMemfdRing maps a received ring and attaches as its consumer.
func openMemfdRing(fd int) (*shm.Segment, *ring.Ring, *ring.Consumer, error) {
	seg, err := shm.FromFD(fd, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := ring.OpenContext(ctx, seg.Bytes())
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := r.NewConsumer()
	return seg, r, c, err
}

// checkBatchAt checks a batch against the synthetic contract for global batch g.
func checkBatchAt(r *ring.Ring, s *ring.ReadSlot, g uint64) error {
	l := r.Layout()
	for i, tn := range l.Tensors {
		elems := 1
		for _, d := range tn.Shape[1:] {
			elems *= d
		}
		if err := synthcheck.Check(s.Tensor(i), tn.DType, tn.Shape[0], elems, g); err != nil {
			return fmt.Errorf("tensor %s: %w", tn.Name, err)
		}
	}
	return nil
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// socketName is an abstract socket name unique to this test and process.
func socketName(t *testing.T) string {
	return fmt.Sprintf("shmloader-test-%d-%s", os.Getpid(), ringName(t))
}

// rankRing is a test rank's ring.
type rankRing struct {
	rank uint64
	seg  *shm.Segment
	r    *ring.Ring
	c    *ring.Consumer
}

// openRank asks for rank's ring (at start when >= 0) and checks the reply and the memfd's name.
func openRank(t *testing.T, nc *nodeClient, rank, world uint64, sha string, start int64) *rankRing {
	t.Helper()
	req := nodewire.Request{Rank: &rank, WorldSize: world, ConfigSHA256: sha, PID: os.Getpid()}
	if start >= 0 {
		s := uint64(start)
		req.Start = &s
	}
	return openRankWith(t, nc, req)
}

// openRankWith is openRank for a request made by the caller.
func openRankWith(t *testing.T, nc *nodeClient, req nodewire.Request) *rankRing {
	t.Helper()
	rank := *req.Rank
	reply, fd, err := nc.request(req)
	if err != nil || fd < 0 {
		t.Fatalf("rank %d: %v %+v", rank, err, reply)
	}
	defer unix.Close(fd)
	if reply.Rank != rank {
		t.Fatalf("asked for rank %d, reply says %d", rank, reply.Rank)
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil || !strings.Contains(link, fmt.Sprintf("rank%d ", rank)) {
		t.Fatalf("rank %d's ring is %q (%v)", rank, link, err)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	seg, r, c, err := openMemfdRing(dup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	return &rankRing{rank: rank, seg: seg, r: r, c: c}
}

// read takes n batches (all when n < 0, to the end of a bounded stream), checks each at its
// global index and returns their global indices.
func (rr *rankRing) read(n int, world uint64) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []uint64
	for n < 0 || len(got) < n {
		s, err := rr.c.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return got, err
		}
		g := s.Seq()*world + rr.rank
		if err := checkBatchAt(rr.r, s, g); err != nil {
			return got, fmt.Errorf("rank %d: %w", rr.rank, err)
		}
		got = append(got, g)
		rr.c.Release(s)
	}
	return got, nil
}

// startServe starts a node loader for ranks nodeRank*local .. of world on socket.
func startServe(t *testing.T, cfg, socket string, local, nodeRank, world int, extra ...string) *proc {
	args := append([]string{"serve", "--config", cfg, "--socket", socket, "--local-world-size", strconv.Itoa(local),
		"--node-rank", strconv.Itoa(nodeRank), "--world-size", strconv.Itoa(world), "--readers", "3"}, extra...)
	return start(t, args...)
}

// TestServeRanks: 2 and 4 local ranks on one node, and 2 nodes of 2 ranks, each with a
// bounded stream: every rank reads exactly its global batches k*w + r, correct element for
// element, and the node loader exits 0 once its last rank has left.
func TestServeRanks(t *testing.T) {
	const batches = 12
	cfg := writeConfig(t, "c.toml", allDTypes(3, batches, ""))
	sha := fileSHA(t, cfg)
	for _, c := range []struct{ nodes, local int }{{1, 2}, {1, 4}, {2, 2}} {
		t.Run(fmt.Sprintf("%dx%d", c.nodes, c.local), func(t *testing.T) {
			world := c.nodes * c.local
			var mu sync.Mutex
			seen := map[uint64]uint64{} // global batch -> rank that read it
			var wg sync.WaitGroup
			var procs []*proc
			for node := range c.nodes {
				socket := fmt.Sprintf("%s-%d", socketName(t), node)
				p := startServe(t, cfg, socket, c.local, node, world)
				procs = append(procs, p)
				for l := range c.local {
					rank := uint64(node*c.local + l)
					nc := dialNode(t, socket, p)
					rr := openRank(t, nc, rank, uint64(world), sha, -1)
					wg.Go(func() {
						got, err := rr.read(-1, uint64(world))
						if err != nil {
							t.Error(err)
						}
						rr.c.Close()
						nc.close()
						mu.Lock()
						defer mu.Unlock()
						for _, g := range got {
							if prev, dup := seen[g]; dup {
								t.Errorf("global batch %d read by ranks %d and %d", g, prev, rank)
							}
							seen[g] = rank
						}
					})
				}
			}
			wg.Wait()
			if len(seen) != batches*world {
				t.Fatalf("%d distinct global batches, want %d (each rank's %d)", len(seen), batches*world, batches)
			}
			for g := range uint64(batches * world) {
				if r, ok := seen[g]; !ok || r != g%uint64(world) {
					t.Fatalf("global batch %d read by rank %d (present %v), want rank %d", g, r, ok, g%uint64(world))
				}
			}
			for _, p := range procs {
				p.expectExit(t, exitOK)
			}
		})
	}
}

// TestServeResume: a rank that asks for its ring at --start K on its connection, after
// closing its first ring, reads from stream batch K on; the node loader stays for it.
func TestServeResume(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 20, ""))
	sha := fileSHA(t, cfg)
	socket := socketName(t)
	p := startServe(t, cfg, socket, 2, 0, 2)
	nc0, nc1 := dialNode(t, socket, p), dialNode(t, socket, p)
	r0 := openRank(t, nc0, 0, 2, sha, -1)
	r1 := openRank(t, nc1, 1, 2, sha, -1)
	if got, err := r1.read(3, 2); err != nil || fmt.Sprint(got) != "[1 3 5]" {
		t.Fatalf("rank 1: %v %v", got, err)
	}
	r1.c.Close()
	r1 = openRank(t, nc1, 1, 2, sha, 15) // resume at stream batch 15: global 31, 33, ...
	got, err := r1.read(-1, 2)
	if err != nil || fmt.Sprint(got) != "[31 33 35 37 39]" {
		t.Fatalf("rank 1 resumed: %v %v", got, err)
	}
	if got, err := r0.read(-1, 2); err != nil || len(got) != 20 || got[19] != 38 {
		t.Fatalf("rank 0: %v %v", got, err)
	}
	r0.c.Close()
	r1.c.Close()
	nc0.close()
	nc1.close()
	p.expectExit(t, exitOK)
}

// TestServeRefuses: requests the node loader must refuse, each with an error naming why.
func TestServeRefuses(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, ""))
	sha := fileSHA(t, cfg)
	socket := socketName(t)
	p := startServe(t, cfg, socket, 2, 1, 4) // ranks 2 and 3 of 4
	u := func(v uint64) *uint64 { return &v }
	for _, c := range []struct {
		req  nodewire.Request
		want string
	}{
		{nodewire.Request{Rank: u(0), WorldSize: 4, ConfigSHA256: sha}, "rank 0 is not on this node: this node loader (node rank 1, 2 local ranks) serves ranks 2 .. 3 of 4"},
		{nodewire.Request{Rank: u(2), WorldSize: 2, ConfigSHA256: sha}, "rank 2 asks for world size 2; this node loader serves world size 4"},
		{nodewire.Request{Rank: u(2), WorldSize: 4, ConfigSHA256: "00"}, "rank 2's configuration is not the node loader's"},
		{nodewire.Request{Rank: u(2), WorldSize: 4, ConfigSHA256: sha, Epoch: u(1)}, `--epoch 1 needs [batch] order = "epochs"`},
	} {
		nc := dialNode(t, socket, p)
		reply, fd, err := nc.request(c.req)
		if err != nil || fd >= 0 || !reply.Usage || !strings.Contains(reply.Error, c.want) {
			t.Errorf("%+v: %v fd %d %+v, want a usage error containing %q", c.req, err, fd, reply, c.want)
		}
		nc.close()
	}
	// One rank, one process: a second connection for a rank in use is refused.
	nc := dialNode(t, socket, p)
	rr := openRank(t, nc, 3, 4, sha, -1)
	other := dialNode(t, socket, p)
	reply, _, err := other.request(nodewire.Request{Rank: u(3), WorldSize: 4, ConfigSHA256: sha, PID: 1})
	if err != nil || !strings.Contains(reply.Error, fmt.Sprintf("rank 3 is already served to pid %d", os.Getpid())) {
		t.Fatalf("second rank 3: %v %+v", err, reply)
	}
	if _, err := rr.read(2, 4); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.expectExit(t, exitOK)
}

// TestServeRankDeath: a rank killed with its ring open. With on_rank_death = "continue" the
// other ranks read their whole streams; with "stop" each gets an error naming the dead rank.
func TestServeRankDeath(t *testing.T) {
	for _, policy := range []string{config.RankDeathContinue, config.RankDeathStop} {
		t.Run(policy, func(t *testing.T) {
			const world = 3
			cfg := writeConfig(t, "c.toml", fmt.Sprintf("[node]\non_rank_death = %q\n", policy)+allDTypes(2, 30, "delay_ms = 2"))
			sha := fileSHA(t, cfg)
			socket := socketName(t)
			p := startServe(t, cfg, socket, world, 0, world)
			h := exec.Command(os.Args[0], "-test.run=^$")
			h.Env = append(os.Environ(), fmt.Sprintf("%s=%s,1,%d,%s", nodeHelperEnv, socket, world, sha))
			out, err := h.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Start(); err != nil {
				t.Fatal(err)
			}
			var rings []*rankRing
			var conns []*nodeClient
			for _, rank := range []uint64{0, 2} {
				nc := dialNode(t, socket, p)
				conns = append(conns, nc)
				rr := openRank(t, nc, rank, world, sha, -1)
				if _, err := rr.read(2, world); err != nil {
					t.Fatal(err)
				}
				rings = append(rings, rr)
			}
			line := make([]byte, 5)
			if _, err := io.ReadFull(out, line); err != nil || string(line) != "read\n" {
				t.Fatalf("helper rank: %q %v", line, err)
			}
			h.Process.Kill()
			h.Wait()
			for _, rr := range rings {
				got, err := rr.read(-1, world)
				switch policy {
				case config.RankDeathContinue:
					if err != nil || len(got) != 28 {
						t.Fatalf("rank %d after rank 1 died: %d batches, %v", rr.rank, len(got), err)
					}
				case config.RankDeathStop:
					var pe *ring.ProducerError
					want := fmt.Sprintf("rank 1 (pid %d) died", h.Process.Pid)
					if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `on_rank_death = "stop"`) {
						t.Fatalf("rank %d after rank 1 died: %v, want a producer error containing %q", rr.rank, err, want)
					}
				}
				rr.c.Close()
			}
			want := map[string]int{config.RankDeathContinue: exitOK, config.RankDeathStop: exitConsumerDied}[policy]
			for _, nc := range conns {
				nc.close()
			}
			p.expectExit(t, want)
		})
	}
}

// TestServeShare: a sharing node loader (serve --share) serves two jobs of other
// configurations at once, each rank exactly its own job's stream (the synthetic contract of
// its own configuration at its global indices), refuses requests that name no job, a relative
// configuration path and a file whose sha256 is not the rank's, and exits 0 once no job has
// been connected for its linger.
func TestServeShare(t *testing.T) {
	cfgA := writeConfig(t, "a.toml", allDTypes(3, 10, ""))
	cfgB := writeConfig(t, "b.toml", allDTypes(2, 14, ""))
	cwd, _ := os.Getwd()
	socket := socketName(t)
	p := start(t, "serve", "--share", "--socket", socket, "--readers", "2", "--linger", "300ms")
	u := func(v uint64) *uint64 { return &v }
	job := func(name, cfg string, rank, world uint64) nodewire.Request {
		return nodewire.Request{Rank: u(rank), WorldSize: world, ConfigSHA256: fileSHA(t, cfg), PID: os.Getpid(),
			Share: &nodewire.ShareJob{Job: name, Config: cfg, Cwd: cwd}}
	}
	for _, c := range []struct {
		req  nodewire.Request
		want string
	}{
		{nodewire.Request{Rank: u(0), WorldSize: 1, ConfigSHA256: fileSHA(t, cfgA)}, "a request without its job (share)"},
		{func() nodewire.Request { r := job("x", cfgA, 0, 1); r.Share.Config = "a.toml"; return r }(), "must be absolute paths"},
		{func() nodewire.Request { r := job("x", cfgA, 0, 1); r.ConfigSHA256 = "00"; return r }(), "changed under the rank"},
		{job("x", cfgA, 2, 2), "rank 2 is not a rank of world size 2"},
	} {
		nc := dialNode(t, socket, p)
		reply, fd, err := nc.request(c.req)
		if err != nil || fd >= 0 || !reply.Usage || !strings.Contains(reply.Error, c.want) {
			t.Errorf("%+v: %v fd %d %+v, want a usage error containing %q", c.req, err, fd, reply, c.want)
		}
		nc.close()
	}
	var wg sync.WaitGroup
	for _, j := range []struct {
		name, cfg      string
		world, batches uint64
	}{{"a", cfgA, 2, 10}, {"b", cfgB, 1, 14}} {
		for rank := range j.world {
			nc := dialNode(t, socket, p)
			rr := openRankWith(t, nc, job(j.name, j.cfg, rank, j.world))
			wg.Go(func() {
				defer nc.close()
				got, err := rr.read(-1, j.world)
				rr.c.Close()
				if err != nil || uint64(len(got)) != j.batches || got[len(got)-1] != (j.batches-1)*j.world+rank {
					t.Errorf("job %s rank %d: %v %v, want its %d batches", j.name, rank, got, err, j.batches)
				}
			})
		}
	}
	wg.Wait()
	p.expectExit(t, exitOK)
}
