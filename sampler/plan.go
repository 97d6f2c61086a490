package sampler

import (
	"container/list"
	"fmt"
	"math"
	"strings"

	"github.com/gobatch/gobatch/config"
)

// Plan describes what a configuration's sources would do, found at start-up without filling a
// batch or starting a ring: the dry run that `shmloader plan` prints and gobatch.plan returns.
type Plan struct {
	Sources []SourcePlan `json:"sources"`
	Tensors []TensorPlan `json:"tensors"`
	// BatchBytes is the size of one batch (every tensor).
	BatchBytes int64 `json:"batch_bytes"`

	// The zarr job's sampling; zero without zarr sources.
	Mode        string `json:"mode,omitempty"`          // SampleRandom or SampleLocality
	Candidates  int    `json:"t0_candidates,omitempty"` // anchor times where every window fits
	AnchorTimes int    `json:"anchor_times,omitempty"`  // anchor times in the store
	Centres     int    `json:"centres,omitempty"`       // anchor pixels a crop can be centred on
	// Site-anchored: the locations examples are centred on, and the systems dropped.
	Locations        int `json:"locations,omitempty"`
	LocationsDropped int `json:"locations_dropped,omitempty"`
	// SiteExclusions (crops in every source's own system) are the locations a source cannot
	// crop by the rule set's crop rule, left out of the job (Job.SiteExclusions).
	SiteExclusions []SiteExclusion `json:"excluded_locations,omitempty"`
	// View is how the batch is presented to the trainer (Source.View; PROTOCOL.md 2.9), by the
	// job's rule set; nil for a flat batch.
	View         View  `json:"view,omitempty"`
	DecodedBytes int64 `json:"decoded_bytes,omitempty"` // every data array decoded (float32)
	CacheBytes   int64 `json:"cache_bytes,omitempty"`   // the cache budget
	// SampleSpace is the rule set's own (t0, location) pairs when it has them (they replace
	// the t0 candidates); nil otherwise.
	SampleSpace *SpaceInfo `json:"sample_space,omitempty"`
	// Rejections are the anchor times each source rules out as t0, by cause, and why the
	// first was (Job.Rejections).
	Rejections []Rejection `json:"t0_rejections,omitempty"`

	// Order is the batch order (config.OrderStream or config.OrderEpochs); with epochs,
	// Samples is the sample space one epoch permutes and EpochBatches the rank's batches per
	// epoch.
	Order        string `json:"order"`
	Samples      uint64 `json:"samples,omitempty"`
	EpochBatches uint64 `json:"epoch_batches,omitempty"`

	// Why says how sampling "auto" chose, or how epochs larger than the cache are ordered, and
	// what cache_mb would change it.
	Why string `json:"sampling_why,omitempty"`
	// Traffic is what a batch costs the cache and the stores, from the chunk keys of the first
	// batches run through a model of the cache; nil without zarr sources.
	Traffic *TrafficPlan `json:"traffic,omitempty"`
	// Mixing describes how the time segments mix in a batch when the data is larger than the
	// cache (locality sampling, or epochs' block shuffle); nil otherwise.
	Mixing *MixingPlan `json:"mixing,omitempty"`
}

// TrafficPlan is what batches cost the cache and the stores: the distinct chunks of the first
// Batches batches of the rank's stream, listed as a Fill lists them (no chunk is read), run in
// order through a least-recently-used cache of the job's budget.
type TrafficPlan struct {
	Batches int `json:"batches"` // batches simulated
	// ChunksPerBatch are the distinct chunks a batch touches; ReadsPerBatch the store reads
	// a cold batch makes (one per chunk).
	ChunksPerBatch float64 `json:"chunks_per_batch"`
	ReadsPerBatch  float64 `json:"reads_per_batch"`
	// MissesPerBatch are the chunks a batch finds missing from the cache, over the second
	// half of the simulated batches (the cache warm, or as full as it gets); FirstBatchMisses
	// those of the first batch.
	MissesPerBatch   float64 `json:"misses_per_batch"`
	FirstBatchMisses int     `json:"first_batch_misses"`
	// DecodedPerDelivered is the decoded bytes of those misses per byte of batch delivered:
	// the bytes a store serves per byte delivered are this times the chunks' stored / decoded
	// ratio (their compression). Remote is whether any store is in object storage.
	DecodedPerDelivered float64 `json:"decoded_per_delivered"`
	// DecodeAmplification is DecodedPerDelivered source by source (in configuration order):
	// the decoded bytes of a source's chunks that miss per byte of its tensor delivered. Its
	// measured counterpart is stats()' decode_amplification.
	DecodeAmplification []float64 `json:"decode_amplification"`
	Remote              bool      `json:"remote,omitempty"`
}

// MixingPlan is the mixing of a batch under locality sampling or the block shuffle.
type MixingPlan struct {
	Segments     int `json:"segments"`      // non-empty time segments
	SegmentSteps int `json:"segment_steps"` // anchor time steps per segment
	// ResidentSegments are the segments a batch draws from: the resident set (locality) or
	// the group (block shuffle).
	ResidentSegments int `json:"resident_segments"`
	// SegmentsPerBatch is the expected number of distinct segments among a batch's examples.
	SegmentsPerBatch float64 `json:"segments_per_batch"`
	// Spearman is the rank correlation of epoch position and t0 over epoch 0 (block shuffle
	// only; 0 would be a full permutation, 1 a scan in time order).
	Spearman float64 `json:"spearman_position_t0"`
}

// TensorPlan is one tensor of a batch in a Plan.
type TensorPlan struct {
	Name  string `json:"name"`
	DType string `json:"dtype"` // numpy's name
	Shape []int  `json:"shape"` // [batch.size, ...]
	Bytes int64  `json:"bytes"`
}

// SourcePlan is one configured source in a Plan.
type SourcePlan struct {
	Field    string `json:"field"` // "source[1]"
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Role     string `json:"role,omitempty"`
	Store    string `json:"store,omitempty"` // as opened (resolved against the data root)
	Variable string `json:"variable,omitempty"`
	// Dims are the data array's dimension names in store order, Shape its shape.
	Dims  []string `json:"dims,omitempty"`
	Shape []int    `json:"shape,omitempty"`
	// Axes maps the role's canonical axes to the store's dimensions ("time=time_utc
	// channel=channel y=y_geostationary x=x_geostationary"); Order is the direction of the
	// coordinates along y and x (crops keep it).
	Axes  string            `json:"axes,omitempty"`
	Order map[string]string `json:"coordinate_order,omitempty"`
	// WindowSteps is the number of time steps of one example's window.
	WindowSteps int `json:"window_steps,omitempty"`
	// From the store's listing (no chunk read): the chunk objects stored (chunks, or shards
	// of a sharded array), those the array has when complete, and the fraction missing,
	// which read as the fill value (or are refused with missing_chunks = "error").
	// ChunksListed is false when the store cannot list its keys.
	ChunksListed         bool     `json:"chunks_listed,omitempty"`
	ChunksStored         int      `json:"chunks_stored,omitempty"`
	ChunksTotal          int      `json:"chunks_total,omitempty"`
	MissingChunkFraction *float64 `json:"missing_chunk_fraction,omitempty"`
	MissingChunks        string   `json:"missing_chunks,omitempty"` // the policy: MissingFill or MissingError
}

// storeLister is implemented by arrays whose store can list its chunk keys.
type storeLister interface {
	storedChunks() (stored, total int, err error)
}

// Plan implements the dry run for every part of the set.
func (s *Set) Plan() Plan {
	p := Plan{Order: config.OrderStream}
	for _, t := range s.tensors {
		p.Tensors = append(p.Tensors, TensorPlan{Name: t.Name, DType: t.DType.String(), Shape: t.Shape, Bytes: t.NBytes()})
		p.BatchBytes += t.NBytes()
	}
	for _, part := range s.parts {
		switch v := part.(type) {
		case *Job:
			v.plan(&p)
		case *synthetic:
			p.Sources = append(p.Sources, SourcePlan{Field: v.field, Name: v.tensor.Name, Kind: "synthetic"})
		}
	}
	return p
}

// plan adds the job's sources and sampling to p.
func (j *Job) plan(p *Plan) {
	p.Mode, p.Candidates, p.AnchorTimes = j.mode, len(j.cands), j.times.len()
	p.Centres = j.ny * j.nx
	p.Locations, p.LocationsDropped = j.Locations(), j.LocationsDropped()
	p.SiteExclusions = j.SiteExclusions()
	p.View = j.View()
	p.Rejections = j.Rejections()
	p.SampleSpace = j.SampleSpace()
	p.DecodedBytes, p.CacheBytes = j.dataBytes, j.cache.Budget()
	if st := j.Stats(); st.Order == config.OrderEpochs {
		p.Order, p.Samples, p.EpochBatches = st.Order, st.Samples, st.EpochBatches
	}
	p.Why = j.why
	if m := j.planMixing(); m.Segments > 0 {
		p.Mixing = &m
	}
	tr := j.planTraffic(planBatches)
	p.Traffic = &tr
	for i, s := range j.srcs {
		sp, c := s.spec(), s.data()
		sp2 := SourcePlan{
			Field: sp.Field, Name: sp.Name, Kind: "zarr", Role: sp.Role, Store: j.stores[i], Variable: sp.Variable,
			Dims: c.arr.Dims(), Shape: c.arr.Shape(), Axes: c.axes, Order: c.orders, WindowSteps: windowSteps(s),
			MissingChunks: sp.MissingChunks,
		}
		planChunks(&sp2, c.arr)
		p.Sources = append(p.Sources, sp2)
	}
}

// planChunks fills in the stored chunks of a source from its store's listing; a store that
// cannot list (an HTTP store, for one) leaves them unknown.
func planChunks(sp *SourcePlan, arr Array) {
	l, ok := arr.(storeLister)
	if !ok {
		return
	}
	stored, total, err := l.storedChunks()
	if err != nil || total == 0 {
		return
	}
	sp.ChunksListed, sp.ChunksStored, sp.ChunksTotal = true, stored, total
	f := 1 - float64(min(stored, total))/float64(total)
	sp.MissingChunkFraction = &f
}

// planMixing describes the mixing of segments (zero without locality or the block shuffle).
func (j *Job) planMixing() MixingPlan {
	var sizes []uint64 // samples of each segment in one resident set or group, in turn
	var m MixingPlan
	switch {
	case j.epochs != nil && j.epochs.blocks != nil:
		b := j.epochs.blocks
		m = MixingPlan{Segments: len(b.lo), SegmentSteps: j.blockSteps, ResidentSegments: b.group, Spearman: b.spearman()}
		v := b.layout(0)
		var sum, weight float64
		for k := 0; k < b.groups(); k++ {
			sizes = sizes[:0]
			for i := k * b.group; i < min((k+1)*b.group, len(v.order)); i++ {
				sizes = append(sizes, b.n[v.order[i]])
			}
			from, to := b.groupPlaces(v, k)
			sum += float64(to-from) * distinctExpected(sizes, int(j.epochs.size)) // a concurrent batch is one sample
			weight += float64(to - from)
		}
		m.SegmentsPerBatch = sum / max(weight, 1)
	case j.loc != nil:
		l := j.loc
		m = MixingPlan{Segments: len(l.segs), SegmentSteps: l.steps, ResidentSegments: l.resident}
		for i := 0; i < l.resident; i++ { // the first resident set stands for all
			s := l.seq(uint64(i))
			sizes = append(sizes, l.size(s))
		}
		m.SegmentsPerBatch = distinctExpected(sizes, j.size)
	}
	return m
}

// distinctExpected is the expected number of distinct segments among size draws from segments
// of the given sizes, each draw of a sample uniform over all of them (with replacement: close
// to the permutation's draws when a group holds many batches).
func distinctExpected(sizes []uint64, size int) float64 {
	var total float64
	for _, n := range sizes {
		total += float64(n)
	}
	var d float64
	for _, n := range sizes {
		d += 1 - math.Pow(1-float64(n)/max(total, 1), float64(size))
	}
	return d
}

// planBatches is how many batches the plan's traffic model follows.
const planBatches = 256

// planTraffic runs the chunk keys of the first n batches of the rank's stream through a
// least-recently-used cache of the job's budget (TrafficPlan).
func (j *Job) planTraffic(n int) TrafficPlan {
	tr := TrafficPlan{Batches: n}
	var batchBytes int64
	for _, t := range j.tensors {
		batchBytes += t.NBytes()
	}
	for _, s := range j.srcs {
		tr.Remote = tr.Remote || s.data().remote
	}
	s := j.ahead.stream
	if j.epochs != nil {
		n = min(n, int(j.epochs.perRank)*2) // two epochs at most
		tr.Batches = n
	}
	rs := j.state()
	defer j.putState(rs)
	lru := list.New()
	at := map[uint64]*list.Element{}
	var held, missBytes int64
	missBy := make([]int64, len(j.srcs))
	var chunks, misses int
	for k := 0; k < n; k++ {
		keys := j.batchKeys(s.Global(uint64(k)), rs)
		chunks += len(keys)
		for _, key := range keys {
			if e, ok := at[key]; ok {
				lru.MoveToFront(e)
				continue
			}
			size := j.srcs[j.keyed(key)].data().chunkBytes()
			if k == 0 {
				tr.FirstBatchMisses++
			}
			if k >= n/2 {
				misses++
				missBytes += size
				missBy[j.keyed(key)] += size
			}
			at[key] = lru.PushFront(key)
			held += size
			for held > j.cache.Budget() && lru.Len() > 1 {
				old := lru.Remove(lru.Back()).(uint64)
				delete(at, old)
				held -= j.srcs[j.keyed(old)].data().chunkBytes()
			}
		}
	}
	if n > 0 {
		tr.ChunksPerBatch = float64(chunks) / float64(n)
		tr.ReadsPerBatch = tr.ChunksPerBatch
		half := float64(n - n/2)
		tr.MissesPerBatch = float64(misses) / half
		tr.DecodedPerDelivered = float64(missBytes) / half / float64(max(batchBytes, 1))
		for i, b := range missBy {
			tr.DecodeAmplification = append(tr.DecodeAmplification, float64(b)/half/float64(max(j.tensors[i].NBytes(), 1)))
		}
	}
	return tr
}

// SamplingText is the plan's sampling choice, mixing and traffic as indented lines for
// `shmloader plan`; "" without zarr sources.
func (p Plan) SamplingText() string {
	var b strings.Builder
	if p.Why != "" {
		fmt.Fprintf(&b, "  %s\n", p.Why)
	}
	if m := p.Mixing; m != nil {
		fmt.Fprintf(&b, "  mixing: %d segments of %d steps, %d at a time; %.1f segments per batch expected",
			m.Segments, m.SegmentSteps, m.ResidentSegments, m.SegmentsPerBatch)
		if p.Order == config.OrderEpochs {
			fmt.Fprintf(&b, ", Spearman(position, t0) %.3f over an epoch", m.Spearman)
		}
		b.WriteString("\n")
	}
	if t := p.Traffic; t != nil {
		// The same words for a store on disk and in object storage (where the bytes fetched
		// are the decoded bytes times the chunks' stored / decoded ratio).
		fmt.Fprintf(&b, "  traffic (first %d batches through the cache): %.1f chunks per batch, first batch %d reads, then %.1f misses per batch, %.2f decoded bytes per byte delivered\n",
			t.Batches, t.ChunksPerBatch, t.FirstBatchMisses, t.MissesPerBatch, t.DecodedPerDelivered)
		if len(t.DecodeAmplification) == len(p.Sources) && len(p.Sources) > 0 {
			parts := make([]string, len(p.Sources))
			for i, s := range p.Sources {
				parts[i] = fmt.Sprintf("%s %.2f", s.Name, t.DecodeAmplification[i])
			}
			fmt.Fprintf(&b, "  decode amplification (decoded bytes per byte delivered, by source): %s\n", strings.Join(parts, ", "))
		}
	}
	return b.String()
}
