package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/nodewire"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// `shmloader serve`: one loader process per node. It opens the configured sources once (one
// sampler.Set: one decoded-chunk cache, one cache budget), runs one pool of readers (package feed),
// and gives each local rank a ring of its own: a memfd that it sends over a Unix socket to
// the rank's gobatch.Loader (serve_conn.go; the protocol is package nodewire's), whose stream
// is exactly `run --rank R --world-size W`'s (serve_ring.go). The ranks it serves are
// sampler.NodeStreams' for --node-rank and --local-world-size.
//
// Lifetimes: each Loader keeps its connection for its whole life (across epochs and resumes,
// which ask for a new ring on the same connection). A rank whose process dies with its ring
// open (its ring's dead consumer claim, or its connection ending while the ring is open) is
// handled by [node] on_rank_death: "stop" fails every rank's ring with an error naming it,
// "continue" stops that ring only. The process exits once every local rank has come and gone
// (no connection left), or once none is connected for --linger. Only peers that pass
// package nodewire's checks (their uid, the node's secret) become ranks.
//
// With --share the process serves every job that connects, each from its own configuration,
// over one cache (serve_share.go): a job is what a nodeJob holds (configuration, sources,
// readers, ranks), and a rank's session belongs to its job.

func init() {
	register("serve", "one loader per node: a ring for each local rank, fed from one cache", cmdServe)
}

type serveFlags struct {
	share      bool // serve any job that connects, each from its own configuration (serve_share.go)
	config     string
	socket     string // abstract Unix socket name to bind
	listenFD   int    // or an inherited listening socket (gobatch.Loader binds it: the rendezvous)
	localWorld int
	nodeRank   int // -1: not given
	ofRank     int // -1: not given; else serve the node of this global rank
	readers    int
	linger     time.Duration
	allowUID   []int // peers of these uids too (nodewire.Admit)
	sourceFlags
}

func cmdServe(args []string) int {
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)

	fs := newFlagSet("serve", "(--share | --config FILE --local-world-size N) (--socket NAME | --listen-fd FD)")
	var f serveFlags
	fs.BoolVar(&f.share, "share", false, "serve every job that connects (each its own configuration, batch options and ranks) from one decoded-chunk cache of --cache-mb, instead of one configuration's ranks")
	fs.StringVar(&f.config, "config", "", "configuration file (TOML, or JSON when it ends in .json; - reads JSON from stdin)")
	fs.StringVar(&f.socket, "socket", "", "listen on the abstract Unix socket NAME (give the same name to gobatch.Loader(node=NAME) or GOBATCH_NODE)")
	fs.IntVar(&f.listenFD, "listen-fd", -1, "listen on this inherited Unix socket (SOCK_SEQPACKET; gobatch.Loader binds it)")
	fs.IntVar(&f.localWorld, "local-world-size", 0, "ranks on this node (torchrun's LOCAL_WORLD_SIZE)")
	f.nodeRank, f.ofRank = -1, -1
	fs.Func("node-rank", "this node's rank `G` (torchrun's GROUP_RANK; default 0): it serves global ranks G*N .. G*N + N-1", rankFlag(&f.nodeRank))
	fs.Func("of-rank", "serve the node of global rank `R` (instead of --node-rank: gobatch.Loader passes its rank when it does not know GROUP_RANK)", rankFlag(&f.ofRank))
	fs.IntVar(&f.world, "world-size", 0, "number of data-parallel ranks in all (default: --local-world-size, one node)")
	fs.IntVar(&f.readers, "readers", runtime.GOMAXPROCS(0), "reader goroutines filling the batches of every rank")
	fs.DurationVar(&f.linger, "linger", 0, "exit when no rank has been connected for this long (0: wait for every local rank to come and go)")
	fs.Func("allow-uid", "also serve ranks running as `UID` (repeatable; by default only this process's uid)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errors.New("want a uid >= 0")
		}
		f.allowUID = append(f.allowUID, n)
		return nil
	})
	addDataFlags(fs, &f.sourceFlags)
	lf := addLogFlags(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	streams, err := f.check(pos)
	if err != nil {
		return usageError("serve", fmt.Errorf("%w (see shmloader serve -h)", err))
	}
	log, err := lf.logger("serve")
	if err != nil {
		return usageError("serve", err)
	}
	var srv *nodeServer
	if f.share {
		srv = newShareServer(log, f)
	} else {
		cfg, err := config.Read(f.config, os.Stdin, f.batch)
		if err != nil {
			return usageError("serve", err)
		}
		job, err := openJob(cfg, f.sourceFlags, streams, 0, nil, f.readers, log)
		if err != nil {
			return usageError("serve", err)
		}
		srv = newNodeServer(log, f, job)
	}
	ln, err := f.listen()
	if err != nil {
		fmt.Fprintf(os.Stderr, "shmloader serve: %v\n", err)
		return exitFailure
	}
	srv.secret = nodewire.TakeSecret()
	if err := srv.guard(); err != nil {
		fmt.Fprintf(os.Stderr, "shmloader serve: %v\n", err)
		return exitFailure
	}
	code = srv.run(ln, sigc)
	srv.closeJobs()
	return code
}

// check validates the flag combination and returns the streams of the node's ranks (none
// with --share: each job's ranks are its own).
func (f *serveFlags) check(rest []string) ([]sampler.Stream, error) {
	if len(rest) > 0 {
		return nil, fmt.Errorf("unexpected argument %q", rest[0])
	}
	if f.share {
		return nil, f.checkShare()
	}
	switch {
	case f.config == "":
		return nil, errors.New("--config FILE is required (or --share)")
	case f.localWorld < 1:
		return nil, errors.New("--local-world-size N is required (N >= 1)")
	case f.nodeRank >= 0 && f.ofRank >= 0:
		return nil, errors.New("give at most one of --node-rank and --of-rank")
	}
	if err := f.checkProcess(); err != nil {
		return nil, err
	}
	switch {
	case f.ofRank >= 0:
		f.nodeRank = sampler.NodeOf(f.ofRank, f.localWorld)
	case f.nodeRank < 0:
		f.nodeRank = 0
	}
	if f.world == 0 {
		f.world = f.localWorld
	}
	streams, err := sampler.NodeStreams(f.nodeRank, f.localWorld, f.world)
	if err != nil {
		return nil, fmt.Errorf("--node-rank %d --local-world-size %d --world-size %d: %w", f.nodeRank, f.localWorld, f.world, err)
	}
	return streams, nil
}

// checkProcess validates the flags of the process itself, with or without --share: where it
// listens, its readers, its linger and its cache.
func (f *serveFlags) checkProcess() error {
	switch {
	case (f.socket == "") == (f.listenFD < 0):
		return errors.New("give exactly one of --socket NAME and --listen-fd FD")
	case f.readers < 1 || f.readers > 1024:
		return fmt.Errorf("--readers %d: want 1 to 1024", f.readers)
	case f.linger < 0:
		return fmt.Errorf("--linger %v: want a duration >= 0", f.linger)
	}
	if f.socket != "" {
		if err := shm.ValidateName(f.socket); err != nil {
			return fmt.Errorf("--socket: %w", err)
		}
	}
	return f.checkData()
}

// rankFlag parses a rank (>= 0) into dst.
func rankFlag(dst *int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("want an integer >= 0")
		}
		*dst = n
		return nil
	}
}

// listen binds the abstract socket (whose name vanishes with the process: nothing to remove)
// or adopts the inherited one.
func (f *serveFlags) listen() (*net.UnixListener, error) {
	if f.socket != "" {
		ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: "@" + f.socket, Net: "unixpacket"})
		if err != nil {
			return nil, fmt.Errorf("--socket %s: %w (is another node loader serving that name?)", f.socket, err)
		}
		return ln, nil
	}
	file := os.NewFile(uintptr(f.listenFD), "listen")
	defer file.Close() // FileListener duplicated it
	l, err := net.FileListener(file)
	if err != nil {
		return nil, fmt.Errorf("--listen-fd %d: %w", f.listenFD, err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("--listen-fd %d: not a Unix socket", f.listenFD)
	}
	return ul, nil
}

// nodeServer is one `shmloader serve` process.
type nodeServer struct {
	log     zerolog.Logger
	flags   serveFlags
	job     *nodeJob            // the one configuration's (nil with --share: jobs)
	share   *shareHost          // --share: the jobs and their one cache
	secret  []byte              // the node's secret (nodewire.TakeSecret)
	next    string              // where the ranks meet should this process die (nodewire.NextName)
	gate    *nodewire.Gate      // descriptors for peers that are not ranks (yet)
	refused atomic.Int64        // connections refused, for the log
	sleep   func(time.Duration) // accept's backoff (nil: time.Sleep; a test records it)

	mu       sync.Mutex
	sessions map[sessionKey]*rankSession // a job's global rank -> the Loader connected for it
	seen     map[uint64]bool             // ranks of the one job that have connected
	conns    int
	stopped  error // set once every ring was failed (on_rank_death = "stop", a signal)
	changed  chan struct{}
}

func newNodeServer(log zerolog.Logger, f serveFlags, job *nodeJob) *nodeServer {
	return &nodeServer{log: log, flags: f, job: job,
		sessions: map[sessionKey]*rankSession{}, seen: map[uint64]bool{},
		changed: make(chan struct{}, 1)}
}

// sessionKey names a rank's session: its job's key ("" for the one job) and its global rank.
type sessionKey struct {
	job  string
	rank uint64
}

// guard draws the name of the next node loader's socket and shares the descriptors this
// process may open (RLIMIT_NOFILE) between its ranks and peers that are not ranks yet: the
// reserve covers, per local rank, its connection and ring (memfd, a duplicate, a ring handed
// back to join), per reader the chunk files it may hold open, and the process's own.
func (s *nodeServer) guard() error {
	next, err := nodewire.NextName()
	if err != nil {
		return err
	}
	nofile, err := nodewire.OpenFiles()
	if err != nil {
		return err
	}
	ranks := shareRanks // --share: room for this many ranks' connections and rings at once
	if s.job != nil {
		ranks = len(s.job.streams)
	}
	reserve := 64 + 4*ranks + 16*s.flags.readers
	limits := nodewire.Limits(nofile, reserve, 1+len(s.flags.allowUID))
	s.next, s.gate = next, nodewire.NewGate(limits)
	s.log.Debug().Int("nofile", nofile).Int("reserve", reserve).Int("handshakes_per_uid", limits.PerUID).
		Int("lingering_refusals", limits.Linger).Msg("descriptor shares")
	return nil
}

// poke tells run that the connections changed.
func (s *nodeServer) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// run accepts the ranks' connections until the node's work is over: every local rank has
// come and gone, no rank was connected for --linger, or a signal.
func (s *nodeServer) run(ln *net.UnixListener, sigc chan os.Signal) int {
	if s.job != nil {
		s.log.Info().Int("local_world_size", len(s.job.streams)).Uint64("first_rank", s.job.streams[0].Rank).
			Uint64("world_size", s.job.streams[0].WorldSize).Int("readers", s.flags.readers).
			Str("on_rank_death", s.job.cfg.Node.OnRankDeath).Str("addr", ln.Addr().String()).
			Dur("since_exec", time.Since(processStart)).Msg("serving")
	} else {
		s.log.Info().Bool("share", true).Int64("cache_mb", s.share.cache.Cache().Budget()>>20).Int("readers", s.flags.readers).
			Dur("linger", s.flags.linger).Str("addr", ln.Addr().String()).Dur("since_exec", time.Since(processStart)).Msg("serving")
	}
	go s.accept(ln)

	code := s.waitDone(sigc)
	s.mu.Lock()
	if s.stopped == nil { // a request still in flight is refused from here on
		s.stopped = errors.New("the node loader is exiting")
	}
	s.mu.Unlock()
	ln.Close()
	s.closeAll()
	s.log.Info().Int("exit", code).Msg("stopped")
	return code
}

// waitDone returns the exit status once the process should stop.
func (s *nodeServer) waitDone(sigc chan os.Signal) int {
	var linger <-chan time.Time
	for {
		select {
		case sig := <-sigc:
			cause := signalStop{sig}
			s.stopAll(fmt.Errorf("node loader pid %d %v", os.Getpid(), cause))
			return exitCode(cause)
		case <-linger:
			if s.idle() {
				s.log.Info().Dur("linger", s.flags.linger).Msg("no rank connected")
				return s.idleCode()
			}
			linger = nil
		case <-s.changed:
			if !s.idle() {
				linger = nil
				continue
			}
			if s.allCame() {
				return s.idleCode()
			}
			if s.flags.linger > 0 && linger == nil {
				linger = time.After(s.flags.linger)
			}
		}
	}
}

// idle reports whether no rank is connected.
func (s *nodeServer) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns == 0
}

// allCame reports whether every local rank has connected (or the node stopped them all).
func (s *nodeServer) allCame() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job == nil {
		return s.stopped != nil // --share: jobs come until none has for --linger
	}
	return len(s.seen) == len(s.job.streams) || s.stopped != nil
}

func (s *nodeServer) idleCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped != nil {
		return exitConsumerDied
	}
	return exitOK
}

// acceptor is what accept needs of a listener (a test gives it failures).
type acceptor interface {
	AcceptUnix() (*net.UnixConn, error)
}

// Accept's backoff after a failure that passes (out of descriptors, a connection aborted):
// it doubles from the first to the last, and starts again after a success.
const (
	acceptBackoffFirst = 5 * time.Millisecond
	acceptBackoffMax   = time.Second
)

// accept serves each connection in its own goroutine until the listener is closed. Any other
// failure (EMFILE, ENFILE, ECONNABORTED: a flood of connections must not stop a node loader
// for good) waits and tries again; the connections already served go on meanwhile, and
// their ends free the descriptors.
func (s *nodeServer) accept(ln acceptor) {
	var backoff time.Duration
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if backoff == 0 {
				backoff = acceptBackoffFirst
				s.log.Warn().Err(err).Msg("accept failed; retrying with a backoff")
			} else {
				backoff = min(2*backoff, acceptBackoffMax)
			}
			if s.sleep != nil {
				s.sleep(backoff)
			} else {
				time.Sleep(backoff)
			}
			continue
		}
		if backoff != 0 {
			s.log.Info().Msg("accept recovered")
			backoff = 0
		}
		s.admit(c)
	}
}

// rankDied applies its job's on_rank_death to a rank whose process died with its ring open:
// "stop" stops the job's other ranks (with --share, other jobs go on).
func (s *nodeServer) rankDied(sess *rankSession, cause error) {
	if !sess.died.CompareAndSwap(false, true) {
		return
	}
	policy := sess.job.cfg.Node.OnRankDeath
	s.log.Warn().Uint64("rank", sess.rank).Int("pid", sess.pid).AnErr("cause", cause).Str("job", sess.job.label).
		Str("on_rank_death", policy).Msg("rank died")
	if policy != config.RankDeathStop {
		return
	}
	if s.share != nil {
		s.stopJob(sess.job, fmt.Errorf("rank %d (pid %d) of job %s died with its ring open (%v); the node loader stops the job's every rank ([node] on_rank_death = %q)",
			sess.rank, sess.pid, sess.job.label, cause, config.RankDeathStop))
		return
	}
	s.stopAll(fmt.Errorf("rank %d (pid %d) died with its ring open (%v); the node loader stops every rank ([node] on_rank_death = %q)",
		sess.rank, sess.pid, cause, config.RankDeathStop))
}

// stopAll fails every open ring with err (each consumer's next batch raises it) and refuses
// later requests.
func (s *nodeServer) stopAll(err error) {
	s.mu.Lock()
	if s.stopped == nil {
		s.stopped = err
	}
	rings := s.openRings(nil)
	for _, r := range rings {
		r.ring.P.Fail(err) // under s.mu: no ring is unmapped meanwhile
	}
	s.mu.Unlock()
	for _, r := range rings {
		r.close()
	}
	s.poke()
}

// openRings lists the rings of the connected ranks of job (nil: of every job; s.mu held).
func (s *nodeServer) openRings(job *nodeJob) []*nodeRing {
	var out []*nodeRing
	for _, sess := range s.sessions {
		if sess.cur != nil && (job == nil || sess.job == job) {
			out = append(out, sess.cur)
		}
	}
	return out
}

// closeAll stops and unmaps every ring (at exit).
func (s *nodeServer) closeAll() {
	s.mu.Lock()
	rings := s.openRings(nil)
	s.mu.Unlock()
	for _, r := range rings {
		r.close()
	}
}
