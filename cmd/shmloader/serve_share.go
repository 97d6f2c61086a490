package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/feed"
	"github.com/gobatch/gobatch/nodewire"
	"github.com/gobatch/gobatch/sampler"
)

// The jobs of `shmloader serve`. Without --share a node loader serves one job, the
// configuration it was started with, to its node's ranks. With --share it serves every job
// that connects (training runs of other configurations, seeds or models on the same node),
// each from its own configuration and batch options, over one decoded-chunk cache
// (sampler.SharedCache: a chunk two jobs read the same way is decoded once for both) and one
// process: a job's first rank to connect opens it (the configuration file its request names,
// read as that rank's user, who is the node loader's), its last rank to leave closes it. Each
// job's streams are exactly those `run` gives it alone; a rank's death applies its own job's
// on_rank_death, never another job's. Only this uid (and --allow-uid's) may connect, as for
// any node loader.

// shareRanks is how many ranks' descriptors a sharing node loader reserves room for.
const shareRanks = 64

// shareLinger is --share's --linger when none is given: the cache outlives a job by this
// long, so that the next run on the node finds it warm.
const shareLinger = 60 * time.Second

// nodeJob is one configuration a node loader serves: its sources, its readers, its ranks.
type nodeJob struct {
	key     string // --share: what tells it from the other jobs ("" for the one job)
	label   string // the configuration file, for logs and messages
	cfg     *config.Config
	flags   sourceFlags // its batch options and data root
	src     *runSource
	pool    *feed.Pool
	streams []sampler.Stream // the node's ranks; nil: any rank of world (--share)
	world   uint64
	users   int   // --share: connected ranks (nodeServer.mu); closed at 0
	stopped error // --share: set once on_rank_death = "stop" stopped it (nodeServer.mu)
}

// openJob opens cfg's sources (in shared, when not nil) and checks that its batches fit a
// ring; streams are the ranks it serves (nil: any rank of world, which only then counts).
func openJob(cfg *config.Config, f sourceFlags, streams []sampler.Stream, world uint64, shared *sampler.SharedCache, readers int, log zerolog.Logger) (*nodeJob, error) {
	var stream sampler.Stream
	if len(streams) > 0 {
		stream = streams[0]
	} else {
		var err error
		if stream, err = sampler.NewStream(0, int(world)); err != nil {
			return nil, fmt.Errorf("world size %d: %w", world, err)
		}
	}
	src, err := openSourcesIn(cfg, f, stream, shared, log)
	if err != nil {
		return nil, err
	}
	if _, err := (feed.Window{}).Layout(cfg, src); err != nil {
		src.close()
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return &nodeJob{label: cfg.File, cfg: cfg, flags: f, src: src, pool: feed.NewPool(src, readers),
		streams: streams, world: stream.WorldSize}, nil
}

// stream returns the stream of global rank, if the job serves it.
func (jb *nodeJob) stream(rank uint64) (sampler.Stream, bool) {
	if jb.streams == nil {
		s, err := sampler.NewStream(int(rank), int(jb.world))
		return s, err == nil
	}
	for _, st := range jb.streams {
		if st.Rank == rank {
			return st, true
		}
	}
	return sampler.Stream{}, false
}

// checkShare validates --share's flags.
func (f *serveFlags) checkShare() error {
	switch {
	case f.config != "":
		return errors.New("--config with --share: a sharing node loader opens each job's configuration as its ranks ask")
	case f.localWorld != 0 || f.nodeRank >= 0 || f.ofRank >= 0 || f.world != 0:
		return errors.New("--local-world-size, --node-rank, --of-rank or --world-size with --share: each job's ranks say their own")
	}
	if err := f.checkProcess(); err != nil {
		return err
	}
	if f.linger == 0 {
		f.linger = shareLinger
	}
	if f.cacheMB == 0 {
		f.cacheMB = sampler.DefaultCacheMB
	}
	return nil
}

// shareHost is a sharing node loader's jobs and their cache.
type shareHost struct {
	cache   *sampler.SharedCache
	opening sync.Mutex          // one job opens or closes at a time (opening reads a store's metadata)
	jobs    map[string]*nodeJob // by key (nodeServer.mu)
}

func newShareServer(log zerolog.Logger, f serveFlags) *nodeServer {
	s := newNodeServer(log, f, nil)
	s.share = &shareHost{cache: sampler.NewSharedCache(f.cacheMB << 20), jobs: map[string]*nodeJob{}}
	return s
}

// jobOf returns the job a request is for, or why it is refused (usage: the request's fault).
// The one job's ranks must ask with its configuration and options; with --share the request
// names its job, which is opened here when it is new.
func (s *nodeServer) jobOf(sess *rankSession, req nodewire.Request) (job *nodeJob, usage bool, err error) {
	if s.share == nil {
		return s.job, true, s.job.refusal(req)
	}
	if req.Share == nil {
		return nil, true, errors.New("a request without its job (share): this node loader serves several jobs (--share); update gobatch")
	}
	key := shareKey(req)
	if sess != nil {
		if sess.job.key != key {
			return nil, true, fmt.Errorf("this connection serves job %s; a request for another job needs its own connection", sess.job.label)
		}
		return sess.job, false, nil
	}
	h := s.share
	h.opening.Lock()
	defer h.opening.Unlock()
	s.mu.Lock()
	job = h.jobs[key]
	if job != nil {
		job.users++ // held for the new session (leaveJob gives it back)
	}
	s.mu.Unlock()
	if job != nil {
		return job, false, nil
	}
	job, err = s.openShared(req)
	if err != nil {
		return nil, true, err
	}
	job.key = key
	s.mu.Lock()
	h.jobs[key] = job
	job.users++
	s.mu.Unlock()
	s.log.Info().Str("job", job.label).Str("key", key[:12]).Uint64("world_size", job.world).Msg("job opened")
	return job, false, nil
}

// shareKey tells jobs apart: the job the ranks name, its configuration's bytes, its options
// and where its relative paths lead.
func shareKey(req nodewire.Request) string {
	h := sha256.New()
	for _, part := range []string{req.Share.Job, req.ConfigSHA256, strings.Join(req.Batch, "\x00"), req.DataRoot,
		req.Share.Config, req.Share.Cwd, fmt.Sprint(req.WorldSize)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// openShared opens the job of a request: its configuration file with its batch options, in
// the shared cache.
func (s *nodeServer) openShared(req nodewire.Request) (*nodeJob, error) {
	sj := req.Share
	if !filepath.IsAbs(sj.Config) || !filepath.IsAbs(sj.Cwd) {
		return nil, fmt.Errorf("share: config %q and cwd %q must be absolute paths", sj.Config, sj.Cwd)
	}
	var f sourceFlags
	fs := newFlagSet("serve", "")
	addDataFlags(fs, &f)
	if err := fs.FlagSet.Parse(req.Batch); err != nil || fs.NArg() > 0 {
		return nil, fmt.Errorf("batch options %q cannot be read (%v)", req.Batch, err)
	}
	if f.cacheMB != 0 {
		s.log.Info().Str("config", sj.Config).Int64("cache_mb", f.cacheMB).Msg("a job's cache_mb is not used: its node loader's shared cache serves it")
	}
	f.dataRoot = req.DataRoot
	cfg, err := config.LoadIn(sj.Config, f.batch, sj.Cwd)
	if err != nil {
		return nil, err
	}
	if cfg.SHA256 != req.ConfigSHA256 {
		return nil, fmt.Errorf("%s changed under the rank (sha256 %.12s, the rank's %.12s)", sj.Config, cfg.SHA256, req.ConfigSHA256)
	}
	return openJob(cfg, f, nil, req.WorldSize, s.share.cache, s.flags.readers, s.log.With().Str("job", sj.Config).Logger())
}

// refusal says why the one job's node loader cannot serve a request (nil: it can).
func (jb *nodeJob) refusal(req nodewire.Request) error {
	switch {
	case req.Share != nil:
		return errors.New("a request for a shared job: this node loader serves one configuration (start it with --share to serve several)")
	case req.WorldSize != jb.streams[0].WorldSize:
		return fmt.Errorf("rank %d asks for world size %d; this node loader serves world size %d", *req.Rank, req.WorldSize, jb.streams[0].WorldSize)
	case req.ConfigSHA256 != jb.cfg.SHA256:
		return fmt.Errorf("rank %d's configuration is not the node loader's (sha256 %.12s, the node loader's %.12s): give every rank the same configuration", *req.Rank, req.ConfigSHA256, jb.cfg.SHA256)
	}
	if differ := jb.optionsDiffer(req); differ != "" {
		return fmt.Errorf("rank %d's %s: give every rank the same options", *req.Rank, differ)
	}
	return nil
}

// optionsDiffer says how a rank's batch options and data root differ from the job's ("" when
// they are the same): with the same file they would make another stream, so a rank given
// other options must not silently get this one's batches.
func (jb *nodeJob) optionsDiffer(req nodewire.Request) string {
	o, err := config.ParseArgs(req.Batch)
	if err != nil {
		return fmt.Sprintf("batch options %q cannot be read (%v)", req.Batch, err)
	}
	if got, want := strings.Join(o.Args(), " "), strings.Join(jb.flags.batch.Args(), " "); got != want {
		return fmt.Sprintf("batch options [%s] are not the node loader's [%s]", got, want)
	}
	if req.DataRoot != jb.flags.dataRoot {
		return fmt.Sprintf("data root %q is not the node loader's %q", req.DataRoot, jb.flags.dataRoot)
	}
	return ""
}

// leaveJob gives back what jobOf held of job for a session (one that ended, or never began);
// with --share the job's last session closes it (its rings are closed by then).
func (s *nodeServer) leaveJob(job *nodeJob) {
	if s.share == nil {
		return
	}
	s.share.opening.Lock()
	defer s.share.opening.Unlock()
	s.mu.Lock()
	job.users--
	last := job.users == 0
	if last {
		delete(s.share.jobs, job.key)
	}
	s.mu.Unlock()
	if last {
		job.src.close()
		s.log.Info().Str("job", job.label).Msg("job closed")
	}
}

// stopJob fails job's open rings with err (each of its consumers' next batch raises it) and
// refuses its later requests; other jobs go on.
func (s *nodeServer) stopJob(job *nodeJob, err error) {
	s.mu.Lock()
	if job.stopped == nil {
		job.stopped = err
	}
	rings := s.openRings(job)
	for _, r := range rings {
		r.ring.P.Fail(err)
	}
	s.mu.Unlock()
	for _, r := range rings {
		r.close()
	}
}

// closeJobs releases every job's sources, and the shared cache, at exit.
func (s *nodeServer) closeJobs() {
	if s.job != nil {
		s.job.src.close()
		return
	}
	s.mu.Lock()
	jobs := make([]*nodeJob, 0, len(s.share.jobs))
	for _, j := range s.share.jobs {
		jobs = append(jobs, j)
	}
	s.mu.Unlock()
	for _, j := range jobs {
		j.src.close()
	}
	s.share.cache.Close()
}
