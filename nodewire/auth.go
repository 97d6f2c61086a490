package nodewire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// SecretEnv names the node's secret in the server's environment (and the Loaders').
const SecretEnv = "GOBATCH_NODE_SECRET"

// NonceBytes is the size of each side's nonce.
const NonceBytes = 32

// refusedLinger is how long a refused connection stays open for its hello.
const refusedLinger = time.Second

// Hello opens a connection: the rank's nonce, hex.
type Hello struct {
	Hello string `json:"hello"`
}

// Welcome answers a hello: the server's nonce and its proof, hex; or an error. Next is the
// socket name the ranks meet at to start the next server should this one die ([NextName]).
type Welcome struct {
	Nonce     string `json:"nonce,omitempty"`
	Proof     string `json:"proof,omitempty"`
	ServerPID int    `json:"server_pid"`
	Next      string `json:"next,omitempty"`
	Error     string `json:"error,omitempty"`
}

// ErrBusy marks a refusal that passes: the peer may try again (a [Gate] had no place for it).
var ErrBusy = errors.New("busy")

// ErrNotAuthenticated refuses a request of a connection that has not proved the secret.
var ErrNotAuthenticated = errors.New("refused: the request does not prove the node's secret (GOBATCH_NODE_SECRET): not a rank of this job")

// Auth is one connection's handshake state, on either side.
type Auth struct {
	key          []byte
	rank, server []byte // the nonces
}

// NewAuth starts a handshake keyed by the node's secret.
func NewAuth(key []byte) *Auth { return &Auth{key: key} }

// proof is HMAC-SHA256(key, role || rank nonce || server nonce).
func (a *Auth) proof(role string) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(role))
	m.Write(a.rank)
	m.Write(a.server)
	return m.Sum(nil)
}

// Welcome answers a rank's hello (the server's side), drawing the server's nonce.
func (a *Auth) Welcome(h Hello) (Welcome, error) {
	nr, err := hex.DecodeString(h.Hello)
	if err != nil || len(nr) != NonceBytes {
		return Welcome{}, fmt.Errorf("hello: want a %d-byte hex nonce", NonceBytes)
	}
	a.rank = nr
	if a.server, err = nonce(); err != nil {
		return Welcome{}, err
	}
	return Welcome{Nonce: hex.EncodeToString(a.server), Proof: hex.EncodeToString(a.proof("serve")),
		ServerPID: os.Getpid()}, nil
}

// Check verifies the rank's proof of its first request (the server's side).
func (a *Auth) Check(auth string) bool {
	got, err := hex.DecodeString(auth)
	return err == nil && a.server != nil && hmac.Equal(got, a.proof("rank"))
}

// Hello draws the rank's nonce and says hello (the rank's side).
func (a *Auth) Hello() (Hello, error) {
	var err error
	if a.rank, err = nonce(); err != nil {
		return Hello{}, err
	}
	return Hello{Hello: hex.EncodeToString(a.rank)}, nil
}

// Verify checks the server's welcome: a server that does not know the secret (a squatter on
// the name) fails (the rank's side).
func (a *Auth) Verify(w Welcome) error {
	if w.Error != "" {
		return fmt.Errorf("the node loader (pid %d) refused: %s", w.ServerPID, w.Error)
	}
	ns, err := hex.DecodeString(w.Nonce)
	if err != nil || len(ns) != NonceBytes {
		return fmt.Errorf("welcome: want a %d-byte hex nonce", NonceBytes)
	}
	a.server = ns
	if proof, _ := hex.DecodeString(w.Proof); !hmac.Equal(proof, a.proof("serve")) {
		return errors.New("the node loader's proof is wrong")
	}
	return nil
}

// Proof is the rank's proof for its first request's Auth (the rank's side, after Verify).
func (a *Auth) Proof() string { return hex.EncodeToString(a.proof("rank")) }

func nonce() ([]byte, error) {
	b := make([]byte, NonceBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return b, nil
}

// Greet reads a rank's hello on c and answers it (the server's side, after Admit) with the
// name of the next server's socket (next, from [NextName]); it returns the state that checks
// the first request's proof. A message that is not a hello gets an error in its welcome.
func Greet(c *net.UnixConn, key []byte, next string) (*Auth, error) {
	buf := make([]byte, MaxMessage)
	n, err := c.Read(buf)
	if err == nil && n == 0 {
		err = errors.New("empty message")
	}
	if err != nil {
		return nil, fmt.Errorf("before its hello: %w", err)
	}
	a := NewAuth(key)
	var h Hello
	w, err := Welcome{}, json.Unmarshal(buf[:n], &h)
	if err == nil {
		w, err = a.Welcome(h)
	}
	if err != nil {
		err = fmt.Errorf("not a hello (%v): this node loader expects a gobatch Loader of the same version", err)
		w = Welcome{Error: err.Error()}
	} else {
		w.Next = next
	}
	w.ServerPID = os.Getpid()
	b, _ := json.Marshal(w)
	if _, werr := c.Write(b); err == nil && werr != nil {
		err = fmt.Errorf("welcome: %w", werr)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// PeerCred returns the credentials the kernel recorded for c's peer when it connected.
func PeerCred(c *net.UnixConn) (*unix.Ucred, error) {
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

// Admit checks a new connection's peer uid: this process's, or one of allowed. The
// credentials come back with a refusal too (nil when they could not be read).
func Admit(c *net.UnixConn, allowed []int) (*unix.Ucred, error) {
	cred, err := PeerCred(c)
	if err != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if int(cred.Uid) != os.Getuid() && !slices.Contains(allowed, int(cred.Uid)) {
		return cred, fmt.Errorf("refused: pid %d runs as uid %d; this node loader (pid %d) serves uid %d only (--allow-uid adds one)",
			cred.Pid, cred.Uid, os.Getpid(), os.Getuid())
	}
	return cred, nil
}

// Refuse answers a peer that Admit (or a [Gate]) refused with why. With linger, it then takes
// the peer's hello before the caller closes the connection (waiting up to a second): a peer
// that writes to a closed connection gets EPIPE instead of reading why.
func Refuse(c *net.UnixConn, why error, linger bool) {
	c.SetWriteDeadline(time.Now().Add(refusedLinger))
	Send(c, Reply{Error: why.Error(), Busy: errors.Is(why, ErrBusy), ServerPID: os.Getpid()}, -1)
	wait := time.Now() // without linger, take only a hello already sent: closing on an unread
	if linger {        // message resets the connection, and the peer may lose the reply with it
		wait = wait.Add(refusedLinger)
	}
	c.SetReadDeadline(wait)
	c.Read(make([]byte, MaxMessage))
}

// NextName draws the socket name a server's ranks restart it at should it die: random, and
// told only to peers that pass [Admit] (in the [Welcome]), so a process of another user, which
// can list every abstract socket name in /proc/net/unix and bind one the moment it is free,
// cannot hold the name the ranks meet at while the node loader restarts.
func NextName() (string, error) {
	b, err := nonce()
	if err != nil {
		return "", err
	}
	return "gobatch-node-" + hex.EncodeToString(b[:16]), nil
}

// TakeSecret takes the node's secret from the environment (and removes it there, so no child
// inherits it).
func TakeSecret() []byte {
	s := os.Getenv(SecretEnv)
	os.Unsetenv(SecretEnv)
	return []byte(s)
}
