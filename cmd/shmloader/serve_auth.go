package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Who may talk to `shmloader serve`, checked both ways before any ring changes hands.
//
// The kernel: the peer's uid (SO_PEERCRED) must be this process's, or one given with
// --allow-uid; an abstract socket has no file permissions, so this is the only gate against
// other users. The job: both ends prove that they know the node's secret (GOBATCH_NODE_SECRET,
// which the Loader that starts serve puts in its environment) by an HMAC-SHA256 over two fresh
// nonces, so the secret never crosses the socket:
//
//	rank  -> serve  {"hello": Nr}
//	serve -> rank   {"nonce": Ns, "proof": HMAC(K, "serve" Nr Ns), "server_pid": P}
//	rank  -> serve  the first request, with "auth": HMAC(K, "rank" Nr Ns)
//
// The rank refuses a serve whose proof is wrong (a squatter on the name); serve answers nothing
// but an error to a peer of another uid or a request without a good proof. A connection that has
// not sent a good first request within helloTimeout is dropped, and until then it does not count
// as a rank (it never keeps the process alive).

// secretEnv names the node's secret in serve's environment (and the Loaders').
const secretEnv = "GOBATCH_NODE_SECRET"

// helloTimeout bounds the handshake: from accept to the first good request.
const helloTimeout = 5 * time.Second

// refusedLinger is how long a refused connection stays open for its hello.
const refusedLinger = time.Second

// nonceBytes is the size of each side's nonce.
const nonceBytes = 32

// nodeHello opens a connection: the rank's nonce, hex.
type nodeHello struct {
	Hello string `json:"hello"`
}

// nodeWelcome answers a hello: serve's nonce and its proof, hex; or an error.
type nodeWelcome struct {
	Nonce     string `json:"nonce,omitempty"`
	Proof     string `json:"proof,omitempty"`
	ServerPID int    `json:"server_pid"`
	Error     string `json:"error,omitempty"`
}

// nodeAuth is one connection's handshake state.
type nodeAuth struct {
	key          []byte
	rank, server []byte // the nonces
}

// proof is HMAC-SHA256(key, role || rank nonce || serve nonce).
func (a *nodeAuth) proof(role string) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(role))
	m.Write(a.rank)
	m.Write(a.server)
	return m.Sum(nil)
}

// welcome answers a rank's hello, drawing serve's nonce.
func (a *nodeAuth) welcome(h nodeHello) (nodeWelcome, error) {
	nr, err := hex.DecodeString(h.Hello)
	if err != nil || len(nr) != nonceBytes {
		return nodeWelcome{}, fmt.Errorf("hello: want a %d-byte hex nonce", nonceBytes)
	}
	a.rank = nr
	a.server = make([]byte, nonceBytes)
	if _, err := rand.Read(a.server); err != nil {
		return nodeWelcome{}, fmt.Errorf("nonce: %w", err)
	}
	return nodeWelcome{Nonce: hex.EncodeToString(a.server), Proof: hex.EncodeToString(a.proof("serve")),
		ServerPID: os.Getpid()}, nil
}

// check verifies the rank's proof of its first request.
func (a *nodeAuth) check(auth string) bool {
	got, err := hex.DecodeString(auth)
	return err == nil && a.server != nil && hmac.Equal(got, a.proof("rank"))
}

// peerCred returns the credentials the kernel recorded for c's peer when it connected.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// admit checks a new connection's peer uid: this process's, or one of allowed.
func admit(c *net.UnixConn, allowed []int) (*unix.Ucred, error) {
	cred, err := peerCred(c)
	if err != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if int(cred.Uid) != os.Getuid() && !slices.Contains(allowed, int(cred.Uid)) {
		return cred, fmt.Errorf("refused: pid %d runs as uid %d; this node loader (pid %d) serves uid %d only (--allow-uid adds one)",
			cred.Pid, cred.Uid, os.Getpid(), os.Getuid())
	}
	return cred, nil
}

// errNotAuthenticated refuses a request of a connection that has not proved the secret.
var errNotAuthenticated = errors.New("refused: the request does not prove the node's secret (GOBATCH_NODE_SECRET): not a rank of this job")

// readSecret takes the node's secret from the environment (and removes it there, so no child
// inherits it).
func readSecret() []byte {
	s := os.Getenv(secretEnv)
	os.Unsetenv(secretEnv)
	return []byte(s)
}
