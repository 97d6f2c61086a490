package nodewire

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Gate bounds the descriptors a server spends on connections that are not (yet) a rank's: those
// in their handshake, counted by peer uid, and refusals still open for the peer's hello
// ([Refuse]). The server's ranks need descriptors of their own (a connection, a ring's memfd
// and its duplicate, the chunk files its readers open), and a peer that floods the socket —
// another user refused by [Admit], or a runaway process of the job's own uid — must never take
// those: past its share, a connection is answered and closed at once.
type Gate struct {
	perUID    int // handshakes in flight per peer uid
	maxLinger int // refusals kept open for the peer's hello

	mu      sync.Mutex
	pending map[uint32]int
	linger  int
}

// GateLimits are a Gate's shares of the descriptors the server may spend on peers.
type GateLimits struct {
	PerUID int // handshakes in flight per peer uid (>= 1)
	Linger int // refusals kept open for the peer's hello at once (>= 0)
}

// Limits divides the descriptors a server may open (RLIMIT_NOFILE's soft limit, nofile)
// between its own needs (reserve: the ranks' connections and rings, the readers' files, the
// process's own) and peers that have not proved the secret, of which there are at most uids
// uids (this process's and the allowed ones): each uid's handshakes and the lingering
// refusals together take at most half of what the reserve leaves.
func Limits(nofile, reserve, uids int) GateLimits {
	spare := max(nofile-reserve, 0) / 2
	per := max(spare/(2*max(uids, 1)), 1)
	return GateLimits{PerUID: min(per, 64), Linger: min(spare/2, 8)}
}

// NewGate returns a gate with the given limits.
func NewGate(l GateLimits) *Gate {
	return &Gate{perUID: max(l.PerUID, 1), maxLinger: max(l.Linger, 0), pending: map[uint32]int{}}
}

// Enter takes a handshake place for a peer of uid, or returns an error saying why there is none,
// wrapping ErrBusy (the caller answers it and closes the connection). Leave gives it back.
func (g *Gate) Enter(uid uint32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[uid] >= g.perUID {
		return fmt.Errorf("refused (%w): %d connections of uid %d are already in their handshake (the node loader's limit per uid); try again", ErrBusy, g.perUID, uid)
	}
	g.pending[uid]++
	return nil
}

// Leave gives back the place Enter took for uid (the connection proved the secret, or ended).
func (g *Gate) Leave(uid uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[uid]--; g.pending[uid] <= 0 {
		delete(g.pending, uid)
	}
}

// Linger reports whether a refused connection may stay open for its peer's hello (so the peer
// reads why instead of EPIPE); when it may, EndLinger must follow.
func (g *Gate) Linger() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.linger >= g.maxLinger {
		return false
	}
	g.linger++
	return true
}

// EndLinger ends a refusal that Linger let stay open.
func (g *Gate) EndLinger() {
	g.mu.Lock()
	g.linger--
	g.mu.Unlock()
}

// OpenFiles returns this process's soft limit on open descriptors (RLIMIT_NOFILE).
func OpenFiles() (int, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if r.Cur > 1<<30 {
		return 1 << 30, nil
	}
	return int(r.Cur), nil
}
