package sampler

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/sampler/chunks"
)

// SharedCache is one decoded-chunk cache that several jobs of one process use at once (the
// node loader's jobs: `shmloader serve --share`). A job's own cache keys a chunk by its
// source's index in the job's configuration; jobs with other configurations number their
// sources otherwise, so a shared cache keys a chunk by what decoding it produces instead: the
// array (its stores, resolved to absolute paths or URLs, and its variable), the order its
// dimensions are cached in, and the entry's form (the stored values, or values converted at
// load with the normalisation and NaN policy that conversion applied). Two jobs that read the
// same array into the same form share every chunk of it, whatever else their configurations
// say; a job that converts differently (another normalisation of a float64 array) gets
// entries of its own. Every job plans with the whole budget.
type SharedCache struct {
	cache *chunks.Cache
	pace  *pacer // jobs of one block-shuffle order keep pace (pace.go)
	mu    sync.Mutex
	ids   map[string]uint64 // decoding identity -> the high bits of its keys
}

// NewSharedCache makes a shared cache of budget bytes.
func NewSharedCache(budget int64) *SharedCache {
	return &SharedCache{cache: chunks.NewCache(budget), pace: newPacer(), ids: map[string]uint64{}}
}

// Cache is the cache itself (its counters are every job's).
func (s *SharedCache) Cache() *chunks.Cache { return s.cache }

// Close releases the cache's memory; no job may use it afterwards.
func (s *SharedCache) Close() { s.cache.Close() }

// id returns the key prefix of a decoding identity, the same for every job that asks.
func (s *SharedCache) id(identity string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[identity]; ok {
		return id, nil
	}
	id := uint64(len(s.ids) + 1)
	if id >= 1<<(64-keyShift) {
		return 0, fmt.Errorf("shared cache: %d arrays in one process; at most %d", id, 1<<(64-keyShift)-1)
	}
	s.ids[identity] = id
	return id, nil
}

// useShared makes the job's sources key their chunks in the shared cache by their decoding
// identity (after their normalisation and forms are settled: chooseMode).
func (j *Job) useShared() error {
	j.cache = j.shared.cache
	for _, src := range j.srcs {
		c := src.data()
		id, err := j.shared.id(c.decodingIdentity())
		if err != nil {
			return err
		}
		c.id = id
	}
	return nil
}

// indexKeys records which source each key prefix is (keyed), once the prefixes are set.
func (j *Job) indexKeys() {
	var top uint64
	for _, src := range j.srcs {
		top = max(top, src.data().id)
	}
	j.keySrc = make([]int, top+1)
	for i, src := range j.srcs {
		j.keySrc[src.data().id] = i
	}
}

// keyed is the index in j.srcs of the source whose chunk key is.
func (j *Job) keyed(key uint64) int { return j.keySrc[key>>keyShift] }

// storesOf is where a source's chunks come from, for its decoding identity: its stores,
// resolved against the data root and made absolute when local, and its variable.
func (o *opener) storesOf(sp *Spec) string {
	var b strings.Builder
	for _, st := range sp.Stores {
		p := objstore.Join(o.opt.DataRoot, st)
		if !strings.Contains(p, "://") {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
		}
		b.WriteString(p)
		b.WriteByte(0)
	}
	b.WriteString(sp.Variable)
	return b.String()
}

// decodingIdentity is what the chunks of c decode to, as SharedCache keys them: where they
// come from, the cached order of their dimensions, the entry's form, and whether a chunk that
// is not stored fails.
func (c *chunked) decodingIdentity() string {
	form := "stored"
	switch {
	case c.f64:
		form = "float64 " + c.normIdentity()
	case !c.stored:
		form = fmt.Sprintf("float32 %v %s", cfParams(c.arr), c.normIdentity())
	}
	// A chunk that is not stored is an error under missing_chunks = "error" and the fill
	// value otherwise: jobs that differ there must not find each other's entries.
	return fmt.Sprintf("%s\x00%v\x00%s\x00refuse missing %v", c.from, c.perm, form, c.refuseMissing)
}

// normIdentity names the conversion a float32 or float64 entry applies at load.
func (c *chunked) normIdentity() string {
	return fmt.Sprintf("axis %d mean %v std %v lo %v hi %v nan %v %v", c.chanAxis, c.normMean, c.normStd, c.normLo, c.normHi, c.nanFill, c.fill)
}
