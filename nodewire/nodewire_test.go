package nodewire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

var sockets atomic.Int64

// connect returns both ends of a fresh connection on an abstract SOCK_SEQPACKET socket: the
// server's (accepted) and the rank's (dialled).
func connect(t *testing.T) (server, rank *net.UnixConn) {
	t.Helper()
	addr := &net.UnixAddr{Name: fmt.Sprintf("@nodewire-test-%d-%d", os.Getpid(), sockets.Add(1)), Net: "unixpacket"}
	ln, err := net.ListenUnix("unixpacket", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rank, err = net.DialUnix("unixpacket", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); rank.Close() })
	return server, rank
}

// TestHandshake: a rank and a server with the same secret prove it to each other; a server
// of another secret fails the rank's check, and the rank's proof fails that server's; a
// message that is not a hello is answered with an error.
func TestHandshake(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rankKey, srvK string
		ok            bool
	}{
		{"same secret", "k", "k", true},
		{"another secret", "k", "other", false},
		{"empty against a secret", "", "k", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, rank := connect(t)
			a := NewAuth([]byte(tc.rankKey))
			h, err := a.Hello()
			if err != nil {
				t.Fatal(err)
			}
			if err := Send(rank, h, -1); err != nil {
				t.Fatal(err)
			}
			srv, err := Greet(server, []byte(tc.srvK), "gobatch-node-next")
			if err != nil {
				t.Fatalf("greet: %v", err)
			}
			var w Welcome
			buf := make([]byte, MaxMessage)
			n, err := rank.Read(buf)
			if err != nil || json.Unmarshal(buf[:n], &w) != nil {
				t.Fatalf("welcome %q: %v", buf[:n], err)
			}
			if w.ServerPID != os.Getpid() || w.Next != "gobatch-node-next" {
				t.Fatalf("server_pid %d, next %q; want %d, the name Greet was given", w.ServerPID, w.Next, os.Getpid())
			}
			err = a.Verify(w)
			if tc.ok != (err == nil) {
				t.Fatalf("rank's check of the server: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok {
				if !srv.Check(a.Proof()) {
					t.Fatal("server refused the rank's good proof")
				}
			} else if err == nil || !strings.Contains(err.Error(), "proof is wrong") {
				t.Fatalf("verify: %v, want the proof refused", err)
			}
			if srv.Check("") || srv.Check("zz") || srv.Check(strings.Repeat("00", 32)) {
				t.Fatal("server accepted a proof without the secret")
			}
		})
	}
	t.Run("not a hello", func(t *testing.T) {
		server, rank := connect(t)
		if err := Send(rank, Request{}, -1); err != nil {
			t.Fatal(err)
		}
		if _, err := Greet(server, nil, ""); err == nil || !strings.Contains(err.Error(), "not a hello") {
			t.Fatalf("greet of a request: %v", err)
		}
		buf := make([]byte, MaxMessage)
		n, _ := rank.Read(buf)
		var w Welcome
		if json.Unmarshal(buf[:n], &w); !strings.Contains(w.Error, "not a hello") || w.Nonce != "" || w.Next != "" {
			t.Fatalf("welcome %q, want an error and no nonce or next name", buf[:n])
		}
		if err := NewAuth(nil).Verify(w); err == nil {
			t.Fatal("rank accepted an error welcome")
		}
	})
	t.Run("check before welcome", func(t *testing.T) {
		if NewAuth(nil).Check(NewAuth(nil).Proof()) {
			t.Fatal("a proof was accepted before any hello")
		}
	})
}

// TestMessageFD: a message carries one descriptor either way, with its JSON fields under
// the names the Python side uses; extra descriptors are closed, none reads as -1.
func TestMessageFD(t *testing.T) {
	server, rank := connect(t)
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := uint64(3)
	if err := Send(rank, Request{Rank: &r, WorldSize: 4, ConfigSHA256: "ab", Join: true}, int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, MaxMessage), make([]byte, OOBSpace)
	n, fd, err := ReadMsg(server, buf, oob)
	if err != nil || fd < 0 {
		t.Fatalf("read: %v fd %d", err, fd)
	}
	defer unix.Close(fd)
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Fstat(int(f.Fd()), &b) != nil || a.Ino != b.Ino {
		t.Fatal("the descriptor received is not the file sent")
	}
	var fields map[string]any
	json.Unmarshal(buf[:n], &fields)
	for _, k := range []string{"rank", "world_size", "start", "epoch", "config_sha256", "pid", "join"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("request %s lacks %q", buf[:n], k)
		}
	}
	if _, ok := fields["FD"]; ok {
		t.Errorf("request %s carries its descriptor number", buf[:n])
	}

	// Two descriptors: the first is kept, the second closed.
	oob2 := unix.UnixRights(int(f.Fd()), int(f.Fd()))
	if _, _, err := server.WriteMsgUnix([]byte(`{"rank": 3}`), oob2, nil); err != nil {
		t.Fatal(err)
	}
	_, fd2, err := ReadMsg(rank, buf, make([]byte, unix.CmsgSpace(8)))
	if err != nil || fd2 < 0 {
		t.Fatalf("read two: %v fd %d", err, fd2)
	}
	unix.Close(fd2)
	if err := Send(server, Reply{Rank: 3, Error: "x", Usage: true}, -1); err != nil {
		t.Fatal(err)
	}
	n, fd, err = ReadMsg(rank, buf, oob)
	if err != nil || fd != -1 {
		t.Fatalf("read without a descriptor: %v fd %d", err, fd)
	}
	if got := string(buf[:n]); got != `{"rank":3,"server_pid":0,"error":"x","usage":true}` {
		t.Fatalf("reply %s", got)
	}
}

// TestAdmit: a peer of this process's uid is admitted, and the credentials are the peer's.
func TestAdmit(t *testing.T) {
	server, _ := connect(t)
	cred, err := Admit(server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if int(cred.Uid) != os.Getuid() || int(cred.Pid) != os.Getpid() {
		t.Fatalf("credentials uid %d pid %d, want %d %d", cred.Uid, cred.Pid, os.Getuid(), os.Getpid())
	}
}

// TestTakeSecret: the secret is read once and removed from the environment.
func TestTakeSecret(t *testing.T) {
	t.Setenv(SecretEnv, "s3cret")
	if got := string(TakeSecret()); got != "s3cret" {
		t.Fatalf("secret %q", got)
	}
	if _, ok := os.LookupEnv(SecretEnv); ok {
		t.Fatal("the secret is still in the environment")
	}
}

// TestNextNameIsFreshAndValid: each server draws its own name, one a rank's Loader accepts.
func TestNextNameIsFreshAndValid(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n, err := NextName()
		if err != nil {
			t.Fatal(err)
		}
		if len(n) != len("gobatch-node-")+32 || !strings.HasPrefix(n, "gobatch-node-") || seen[n] {
			t.Fatalf("name %q: want gobatch-node- and 32 fresh hex digits", n)
		}
		seen[n] = true
	}
}

// TestGateSharesAndLimits: each uid has its own handshake places (another uid's flood leaves a
// uid's untouched), a place comes back with Leave, lingering refusals are bounded, and the
// shares of a small descriptor limit leave the reserve alone.
func TestGateSharesAndLimits(t *testing.T) {
	g := NewGate(GateLimits{PerUID: 3, Linger: 2})
	for i := range 3 {
		if err := g.Enter(1000); err != nil {
			t.Fatalf("place %d of uid 1000: %v", i, err)
		}
	}
	err := g.Enter(1000)
	if err == nil || !strings.Contains(err.Error(), "3 connections of uid 1000") || !errors.Is(err, ErrBusy) {
		t.Fatalf("fourth place of uid 1000: %v, want the limit named", err)
	}
	if err := g.Enter(0); err != nil {
		t.Fatalf("uid 0 beside uid 1000's full share: %v", err)
	}
	g.Leave(1000)
	if err := g.Enter(1000); err != nil {
		t.Fatalf("a place given back: %v", err)
	}
	if !g.Linger() || !g.Linger() || g.Linger() {
		t.Fatal("want exactly 2 lingering refusals")
	}
	g.EndLinger()
	if !g.Linger() {
		t.Fatal("an ended linger is not given back")
	}

	for _, tc := range []struct{ nofile, reserve, uids, per, linger int }{
		{256, 104, 1, 38, 8},     // ulimit -n 256: 76 of 152 spare descriptors to peers
		{256, 104, 2, 19, 8},     // an allowed uid halves each uid's share
		{100, 104, 1, 1, 0},      // nothing spare: one handshake, no lingering
		{1 << 20, 104, 1, 64, 8}, // a large limit: the fixed caps
	} {
		l := Limits(tc.nofile, tc.reserve, tc.uids)
		if l.PerUID != tc.per || l.Linger != tc.linger {
			t.Errorf("Limits(%d, %d, %d) = %+v, want per uid %d, linger %d", tc.nofile, tc.reserve, tc.uids, l, tc.per, tc.linger)
		}
		if spent := l.PerUID*tc.uids + l.Linger; tc.nofile > tc.reserve && spent > tc.nofile-tc.reserve {
			t.Errorf("Limits(%d, %d, %d) spends %d of the %d spare", tc.nofile, tc.reserve, tc.uids, spent, tc.nofile-tc.reserve)
		}
	}
}
