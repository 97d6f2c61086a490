package sampler

import (
	"context"
	"fmt"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/sampler/chunks"
)

// Source is a batch source: the part of every batch that one kind of configured source makes.
// shmloader runs every configuration through this one interface (usually the Set that Open
// returns): it lays the ring out from Tensors, and its reader goroutines call Fill with slot
// memory, so a source writes its bytes straight into the ring.
//
// Sources fill global batches: a batch is a pure function of its global index (and the
// configuration), whichever process or goroutine fills it. Stream maps a rank's stream to
// global indices.
type Source interface {
	// Tensors are the tensors the source contributes to every batch, in slot order; the first
	// dimension of each is the batch size.
	Tensors() []config.Tensor
	// Fill writes global batch g into dst, one slice per tensor of Tensors, each exactly the
	// tensor's size. Several goroutines may fill different batches at once. It returns early
	// with ctx's error when ctx ends.
	Fill(ctx context.Context, g uint64, dst [][]byte) error
	// Prefetch prepares what global batch g needs (decoding its chunks) and returns when it is
	// ready; a source with nothing to prepare returns at once. Used to overlap the first
	// batch's work with the rest of start-up.
	Prefetch(g uint64)
	// Stats returns the source's counters.
	Stats() Stats
	// View is how the batch is presented to the trainer (nesting, key names, constants); nil
	// for a flat batch.
	View() View
	// Warnings are what a user would want to know of the source before the first batch
	// (locations left out, a batch larger than the data), each a sentence; nil for none.
	Warnings() []string
}

// Stats is a snapshot of a source's counters. Sources without a cache or a sampling mode
// leave those fields zero.
type Stats struct {
	Mode       string // sampling mode (SampleRandom or SampleLocality)
	Why        string // how sampling "auto" chose, or how epochs larger than the cache are ordered (Job.Why)
	Batches    uint64 // batches filled
	Candidates int    // valid t0 (anchor time indices)
	// Pairs: the rule set's own (t0, location) pairs the batches are drawn
	// from (SampleSpace); 0 under gobatch's rules.
	Pairs     uint64
	DataBytes int64 // decoded (float32) size of every data array: what the cache would need to hold everything
	Cache     chunks.Stats
	// SegmentsPerBatch is the mean number of distinct time segments the examples of a batch
	// came from (locality mode; 0 in random mode): the randomness the locality costs.
	SegmentsPerBatch float64
	SegmentsSum      uint64 // the sum behind SegmentsPerBatch (over Batches batches)
	ResidentSegments int
	// Order is the batch order (config.OrderStream or config.OrderEpochs). With epochs,
	// Samples is the sample space an epoch permutes and EpochBatches this rank's batches per
	// epoch (0 otherwise).
	Order                 string
	Samples, EpochBatches uint64
	// Site-anchored jobs: the locations examples are centred on, and the systems dropped
	// (no position, outside the grid, crop does not fit). Both 0 otherwise.
	Locations, LocationsDropped int
	// Per source (index: its position in the configuration): the chunks decoded since the
	// start, and those among them that were not stored and read as the fill value; the bytes
	// of the chunks decoded (in the cache's form) and of the source's tensor delivered in the
	// batches filled, whose ratio is the source's decode amplification.
	ChunksDecoded, ChunksMissing [config.MaxSources]uint64
	DecodedBytes, DeliveredBytes [config.MaxSources]uint64
	// The stages of a batch (for the limiting one, python/gobatch/_stages.py): the time spent
	// reading chunks' stored bytes, decoding them into the cache, and copying examples into
	// slots, each summed over everything that ran it at once (nanoseconds); and how many can
	// run at once: reads in flight (the largest fetch depth), cores, fills (readers).
	ReadNS, DecodeNS, GatherNS          uint64
	ReadSlots, DecodeSlots, GatherSlots int
}

// Set is every source of a configuration as one Source: the tensors of its parts in
// configuration order.
type Set struct {
	parts   []Source
	first   []int // index in tensors of each part's first tensor
	tensors []config.Tensor
}

// A kindOpener opens every source of its kind in a configuration (for zarr sources: metadata and
// coordinates only) as the parts of the Set. Each kind registers its config decoder and its opener
// together (registerKind, in the kind's own file), so that adding a kind is one file and Open
// is a lookup.
type kindOpener func(cfg *config.Config, opt Options) ([]Source, error)

var openers = map[string]kindOpener{}

// registerKind makes a source kind known to the configuration (its table's decoder) and to
// Open (its opener). Call it from an init function.
func registerKind(kind string, decode config.Kind, open kindOpener) {
	config.RegisterKind(kind, decode)
	openers[kind] = open
}

// Open opens the sources of cfg as one Source: each kind's opener once, in the order the kinds
// first appear. Its errors are configuration errors naming the field at fault.
func Open(cfg *config.Config, opt Options) (*Set, error) {
	var parts []Source
	opened := map[string]bool{}
	for i, s := range cfg.Sources {
		if opened[s.Kind] {
			continue
		}
		open, ok := openers[s.Kind]
		if !ok {
			return nil, cfg.Errorf(fmt.Sprintf("source[%d].kind", i), "kind %q is not supported by this build", s.Kind)
		}
		ps, err := open(cfg, opt)
		if err != nil {
			return nil, err
		}
		opened[s.Kind] = true
		parts = append(parts, ps...)
	}
	return newSet(parts), nil
}

func newSet(parts []Source) *Set {
	s := &Set{parts: parts}
	for _, p := range parts {
		s.first = append(s.first, len(s.tensors))
		s.tensors = append(s.tensors, p.Tensors()...)
	}
	return s
}

// Tensors implements Source.
func (s *Set) Tensors() []config.Tensor { return s.tensors }

// Fill implements Source: each part fills its own tensors.
func (s *Set) Fill(ctx context.Context, g uint64, dst [][]byte) error {
	if len(dst) != len(s.tensors) {
		return fmt.Errorf("fill batch %d: %d tensors, expected %d", g, len(dst), len(s.tensors))
	}
	for i, p := range s.parts {
		n := len(p.Tensors())
		if err := p.Fill(ctx, g, dst[s.first[i]:s.first[i]+n]); err != nil {
			return err
		}
	}
	return nil
}

// Prefetch implements Source.
func (s *Set) Prefetch(g uint64) {
	for _, p := range s.parts {
		p.Prefetch(g)
	}
}

// Stats implements Source: the counters of the part that keeps them (the zarr job; a
// configuration has at most one).
func (s *Set) Stats() Stats {
	var st Stats
	for _, p := range s.parts {
		if ps := p.Stats(); ps.Mode != "" {
			st = ps
		}
	}
	return st
}

// View implements Source: the parts' views, one after another.
func (s *Set) View() View {
	var v View
	for _, p := range s.parts {
		v = append(v, p.View()...)
	}
	return v
}

// Warnings implements Source: the parts' warnings, one after another.
func (s *Set) Warnings() []string {
	var w []string
	for _, p := range s.parts {
		w = append(w, p.Warnings()...)
	}
	return w
}

// Rejections is the zarr job's report of the anchor times each source rules out as t0
// (Job.Rejections); nil when the configuration has no zarr sources.
func (s *Set) Rejections() []Rejection {
	for _, p := range s.parts {
		if j, ok := p.(*Job); ok {
			return j.Rejections()
		}
	}
	return nil
}

// SiteExclusions is the zarr job's report of the locations its sources cannot crop under
// a crop rule in every source's own system (Job.SiteExclusions); nil otherwise.
func (s *Set) SiteExclusions() []SiteExclusion {
	for _, p := range s.parts {
		if j, ok := p.(*Job); ok {
			return j.SiteExclusions()
		}
	}
	return nil
}

// Close releases what the sources hold (the zarr job's cache). No Fill may run afterwards.
// ReadBufferBytes is the heap the parts' chunk reads in flight may hold (Job.ReadBufferBytes).
func (s *Set) ReadBufferBytes() int64 {
	var n int64
	for _, p := range s.parts {
		if j, ok := p.(*Job); ok {
			n += j.ReadBufferBytes()
		}
	}
	return n
}

func (s *Set) Close() {
	for _, p := range s.parts {
		if j, ok := p.(*Job); ok {
			j.Close()
		}
	}
}
