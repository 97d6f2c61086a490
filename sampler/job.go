package sampler

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gobatch/gobatch/config"
)

// Options are the settings of a job that do not come from the configuration file.
type Options struct {
	// DataRoot is the directory store paths are relative to; default: the config file's folder.
	DataRoot string
	// Rank and WorldSize split the stream between data-parallel ranks: rank r produces the
	// global batches k*WorldSize + r. WorldSize 0 means 1.
	Rank, WorldSize int
	// CacheMB overrides the anchor's cache_mb when > 0.
	CacheMB int64
	// Open opens a store; default: the Zarr reader (OpenZarr).
	Open func(path string) (Dataset, error)
}

// Job produces the batches of one configuration.
type Job struct {
	file        string
	size        int
	seed        uint64
	rank, world uint64

	srcs   []source
	anchor *gridSource
	points []*pointSource

	cands          []int32 // anchor time indices where every window fits, ascending
	cy0, ny        int     // centre rows [cy0, cy0+ny)
	cx0, nx        int
	tensors        []config.Tensor
	cache          *Cache
	loc            *locality
	dataBytes      int64 // decoded size of every source's data array
	mode           string
	mu             sync.Mutex
	free           []*readerState
	decodes        decodeQueue // the prefetches in progress, lowest batch first (prefetch.go)
	maxK           int
	batches, exmpl uint64
	segSum         uint64
}

// fieldErr is a configuration problem found while opening the stores, as a config.FieldError
// naming the file, the field (and its line in a TOML file, found by tomlLine) and what was
// expected.
func fieldErr(file, field, format string, args ...any) error {
	return &config.FieldError{File: file, Line: tomlLine(file, field), Field: field, Msg: fmt.Sprintf(format, args...)}
}

// tomlLine finds the line of "source[i].key" (or "source[i]") in a TOML file: the key's line
// inside the i-th [[source]] table, else the table's header. 0 when unknown (not TOML, not
// readable, or another field).
func tomlLine(file, field string) int {
	var idx int
	var key string
	if _, err := fmt.Sscanf(field, "source[%d]", &idx); err != nil || strings.HasSuffix(file, ".json") {
		return 0
	}
	if i := strings.Index(field, "]."); i >= 0 {
		key = field[i+2:]
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, header := -1, 0
	for ln, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "[") {
			if strings.HasPrefix(l, "[[source]]") {
				n++
				if n == idx {
					header = ln + 1
				}
			} else if n == idx {
				break
			}
			if n > idx {
				break
			}
			continue
		}
		if n == idx && key != "" {
			if k, _, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == key {
				return ln + 1
			}
		}
	}
	return header
}

// NewJob opens the stores of cfg (metadata and coordinates only) and prepares the sampling.
func NewJob(cfg *config.Config, opt Options) (*Job, error) {
	if opt.WorldSize == 0 {
		opt.WorldSize = 1
	}
	if opt.WorldSize < 0 || opt.Rank < 0 || opt.Rank >= opt.WorldSize {
		return nil, fmt.Errorf("rank %d of world size %d: expected 0 <= rank < world_size", opt.Rank, opt.WorldSize)
	}
	if opt.DataRoot == "" {
		opt.DataRoot = filepath.Dir(cfg.File)
	}
	if opt.Open == nil {
		opt.Open = OpenZarr
	}
	j := &Job{file: cfg.File, size: cfg.Batch.Size, seed: cfg.Batch.Seed,
		rank: uint64(opt.Rank), world: uint64(opt.WorldSize)}
	if j.size < 1 {
		return nil, fieldErr(cfg.File, "batch.size", "%d; expected at least 1", j.size)
	}

	// Specs, and the anchor.
	var specs []*Spec
	var anchorSpec *Spec
	for i, s := range cfg.Sources {
		sp, ok := s.Spec.(*Spec)
		if !ok {
			return nil, fieldErr(cfg.File, fmt.Sprintf("source[%d].kind", i),
				"kind %q cannot be mixed with zarr sources; expected every source to have kind = \"zarr\"", s.Kind)
		}
		sp.Index, sp.Name = i, s.Name
		if sp.Anchor {
			if anchorSpec != nil {
				return nil, fieldErr(cfg.File, fmt.Sprintf("source[%d].anchor", i),
					"a second anchor (source[%d] is one already); expected exactly one anchor = true", anchorSpec.Index)
			}
			anchorSpec = sp
		}
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		return nil, fieldErr(cfg.File, "source", "no zarr sources")
	}
	if anchorSpec == nil {
		return nil, fieldErr(cfg.File, "source", "no anchor; expected anchor = true on the source (role = \"grid\") whose grid the locations are drawn from")
	}
	root := opt.DataRoot
	open := map[string]Dataset{}
	dataset := func(sp *Spec) (Dataset, error) {
		p := sp.Store
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		if d, ok := open[p]; ok {
			return d, nil
		}
		d, err := opt.Open(p)
		if err != nil {
			return nil, fieldErr(cfg.File, sp.Field+".store", "%v", err)
		}
		open[p] = d
		return d, nil
	}

	// The anchor first: the others are placed on its grid.
	anchorDS, err := dataset(anchorSpec)
	if err != nil {
		return nil, err
	}
	if j.anchor, err = openGrid(cfg.File, anchorSpec, anchorDS, nil); err != nil {
		return nil, err
	}
	for _, sp := range specs {
		if sp == anchorSpec {
			j.srcs = append(j.srcs, j.anchor)
			continue
		}
		ds, err := dataset(sp)
		if err != nil {
			return nil, err
		}
		var src source
		switch sp.Role {
		case RoleGrid:
			src, err = openGrid(cfg.File, sp, ds, j.anchor)
		case RoleNWP:
			src, err = openNWP(cfg.File, sp, ds, j.anchor)
		case RolePoints:
			var p *pointSource
			p, err = openPoints(cfg.File, sp, ds, j.anchor)
			if p != nil {
				j.points = append(j.points, p)
				j.maxK = max(j.maxK, p.s.NearestK)
				src = p
			}
		}
		if err != nil {
			return nil, err
		}
		j.srcs = append(j.srcs, src)
	}
	for _, s := range j.srcs {
		c := s.data()
		c.id = uint64(s.spec().Index)
		c.nanToZero = s.spec().NaNPolicy == NaNZero
		n := int64(1)
		for _, g := range c.grid {
			n *= int64(g)
		}
		j.dataBytes += n * c.chunkBytes()
	}

	// Locations: every anchor crop fits.
	a := anchorSpec
	H, W := len(j.anchor.ys), len(j.anchor.xs)
	j.cy0, j.ny = a.Height/2, H-2*(a.Height/2)
	j.cx0, j.nx = a.Width/2, W-2*(a.Width/2)
	if a.Height > H || j.ny < 1 {
		return nil, fieldErr(cfg.File, a.Field+".image_size_pixels_height", "%d does not fit the anchor grid of %d rows", a.Height, H)
	}
	if a.Width > W || j.nx < 1 {
		return nil, fieldErr(cfg.File, a.Field+".image_size_pixels_width", "%d does not fit the anchor grid of %d columns", a.Width, W)
	}

	// t0 candidates.
	rejects := make([]int, len(j.srcs))
	whys := make([]string, len(j.srcs))
	for i := 0; i < j.anchor.times.n; i++ {
		t0 := j.anchor.times.value(i)
		good := true
		for si, s := range j.srcs {
			if ok, why := s.fits(t0); !ok {
				rejects[si]++
				if whys[si] == "" {
					whys[si] = why
				}
				good = false
				break
			}
		}
		if good {
			j.cands = append(j.cands, int32(i))
		}
	}
	if len(j.cands) == 0 {
		var parts []string
		for si, n := range rejects {
			if n > 0 {
				sp := j.srcs[si].spec()
				parts = append(parts, fmt.Sprintf("%s (%s) rejects %d: %s", sp.Field, sp.Name, n, whys[si]))
			}
		}
		return nil, fieldErr(cfg.File, "source", "no valid t0: none of the %d anchor times (%s .. %s) has every source's window; %s",
			j.anchor.times.n, fmtTime(j.anchor.times.value(0)), fmtTime(j.anchor.times.value(j.anchor.times.n-1)),
			strings.Join(parts, "; "))
	}

	// Tensors: the data sources in config order, then t0, x, y, then the point ids.
	for _, s := range j.srcs {
		shape, dt := s.spec().Example()
		j.tensors = append(j.tensors, config.Tensor{Name: s.spec().Name, DType: dt, Shape: append([]int{j.size}, shape...)})
	}
	names := map[string]bool{}
	for _, t := range j.tensors {
		names[t.Name] = true
	}
	meta := []config.Tensor{
		{Name: "t0", DType: config.Int64, Shape: []int{j.size}},
		{Name: "x", DType: config.Float64, Shape: []int{j.size}},
		{Name: "y", DType: config.Float64, Shape: []int{j.size}},
	}
	for _, p := range j.points {
		meta = append(meta, config.Tensor{Name: p.s.idsTensor(), DType: config.Int64, Shape: []int{j.size, p.s.NearestK}})
	}
	for _, t := range meta {
		if names[t.Name] {
			return nil, fieldErr(cfg.File, "source", "tensor name %q is used by a source and by the sampler's metadata (t0, x, y and the point ids); expected another source name", t.Name)
		}
		names[t.Name] = true
		j.tensors = append(j.tensors, t)
	}
	if len(j.tensors) > config.MaxSources {
		return nil, fieldErr(cfg.File, "source", "%d tensors with the metadata; at most %d are supported", len(j.tensors), config.MaxSources)
	}

	// The cache and the sampling mode.
	mb := a.CacheMB
	if opt.CacheMB > 0 {
		mb = opt.CacheMB
	}
	j.cache = NewCache(mb << 20)
	j.mode = a.Sampling
	if j.mode == SampleAuto {
		j.mode = SampleRandom
		if j.dataBytes > j.cache.Budget()*9/10 {
			j.mode = SampleLocality
		}
	}
	if j.mode == SampleLocality {
		if j.loc, err = newLocality(j, a); err != nil {
			return nil, err
		}
	}
	return j, nil
}

func fmtTime(unix int64) string { return time.Unix(unix, 0).UTC().Format("2006-01-02T15:04") }

// Tensors lists the tensors of a batch, in slot order.
func (j *Job) Tensors() []config.Tensor { return j.tensors }

// Mode is the sampling mode in use (SampleRandom or SampleLocality).
func (j *Job) Mode() string { return j.mode }

// Candidates is the number of valid t0 (anchor time indices).
func (j *Job) Candidates() int { return len(j.cands) }

// DataBytes is the decoded (float32) size of every source's data array: what the cache would
// need to hold everything.
func (j *Job) DataBytes() int64 { return j.dataBytes }

// Cache is the job's chunk cache.
func (j *Job) Cache() *Cache { return j.cache }

// Close releases the cache's memory. No Fill may run afterwards.
func (j *Job) Close() { j.cache.Close() }

// Global maps the rank's stream index to the global batch index.
func (j *Job) Global(batch uint64) uint64 { return batch*j.world + j.rank }

// Draw returns where example e of rank-stream batch k comes from: t0 (unix seconds), the anchor
// time index and the centre pixel (cy, cx). Fill uses exactly these.
func (j *Job) Draw(batch uint64, e int) (t0 int64, ti, cy, cx int) {
	ex := example{cut: make([]int64, len(j.srcs))}
	j.draw(j.Global(batch), e, &ex, nil)
	return ex.t0, ex.ti, ex.cy, ex.cx
}

func (j *Job) draw(g uint64, e int, ex *example, rs *readerState) {
	ue := uint64(e)
	if j.loc != nil {
		ex.ti = j.loc.draw(g, ue, rs)
	} else {
		ex.ti = int(j.cands[uniform(hashKey(j.seed, drawT0, g, ue), len(j.cands))])
	}
	ex.t0 = j.anchor.times.value(ex.ti)
	ex.cy = j.cy0 + uniform(hashKey(j.seed, drawY, g, ue), j.ny)
	ex.cx = j.cx0 + uniform(hashKey(j.seed, drawX, g, ue), j.nx)
	for i, s := range j.srcs {
		sp := s.spec()
		ex.cut[i] = math.MaxInt64
		if sp.DropoutFraction > 0 {
			si := uint64(i)
			if unitFloat(hashKey(j.seed, drawDropout+2*si, g, ue)) < sp.DropoutFraction {
				d := sp.DropoutTimedeltasMinutes[uniform(hashKey(j.seed, drawDropout+2*si+1, g, ue), len(sp.DropoutTimedeltasMinutes))]
				ex.cut[i] = d * 60
			}
		}
	}
}

func (j *Job) state() *readerState {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.free); n > 0 {
		rs := j.free[n-1]
		j.free = j.free[:n-1]
		return rs
	}
	return &readerState{
		pins: pinSet{c: j.cache, limit: 64},
		sel:  make([]int32, j.maxK), dist: make([]float64, j.maxK),
		ex: example{cut: make([]int64, len(j.srcs))},
	}
}

func (j *Job) putState(rs *readerState) {
	j.mu.Lock()
	j.free = append(j.free, rs)
	j.mu.Unlock()
}

// Fill writes batch k of this rank's stream (global batch k*world_size + rank) into tensors,
// one byte slice per tensor of Tensors(), each exactly the tensor's size. Several goroutines
// may fill different batches at once.
func (j *Job) Fill(batch uint64, tensors [][]byte) error {
	if len(tensors) != len(j.tensors) {
		return fmt.Errorf("fill batch %d: %d tensors, expected %d", batch, len(tensors), len(j.tensors))
	}
	for i, t := range j.tensors {
		if int64(len(tensors[i])) != t.NBytes() {
			return fmt.Errorf("fill batch %d: tensor %s has %d bytes, expected %d", batch, t.Name, len(tensors[i]), t.NBytes())
		}
	}
	g := j.Global(batch)
	rs := j.state()
	defer j.putState(rs)
	ns := len(j.srcs)
	t0s := bytesAsInt64(tensors[ns])
	xs := bytesAsFloat64(tensors[ns+1])
	ys := bytesAsFloat64(tensors[ns+2])
	j.prefetch(g, rs)
	ex := &rs.ex
	rs.segs = rs.segs[:0]
	for e := 0; e < j.size; e++ {
		j.draw(g, e, ex, rs)
		for i, s := range j.srcs {
			per := int(j.tensors[i].NBytes()) / j.size
			out := bytesAsFloat32(tensors[i][e*per : (e+1)*per])
			if p, ok := s.(*pointSource); ok {
				if err := p.choose(rs, ex); err != nil {
					return fmt.Errorf("batch %d example %d: %w", batch, e, err)
				}
			}
			if err := s.fill(rs, ex, out); err != nil {
				return fmt.Errorf("batch %d example %d: %w", batch, e, err)
			}
			if p, ok := s.(*pointSource); ok {
				k := p.s.NearestK
				ids := bytesAsInt64(tensors[ns+3+j.pointIndex(p)])[e*k : (e+1)*k]
				for q, sys := range rs.sel[:k] {
					ids[q] = p.ids[sys]
				}
			}
		}
		t0s[e] = ex.t0
		xs[e] = j.anchor.xs[ex.cx]
		ys[e] = j.anchor.ys[ex.cy]
	}
	j.mu.Lock()
	j.batches++
	j.exmpl += uint64(j.size)
	j.segSum += uint64(len(rs.segs))
	j.mu.Unlock()
	return nil
}

func (j *Job) pointIndex(p *pointSource) int {
	for i, q := range j.points {
		if q == p {
			return i
		}
	}
	return -1
}

// Stats is a snapshot of a job's counters.
type Stats struct {
	Mode    string
	Batches uint64
	Cache   CacheStats
	// SegmentsPerBatch is the mean number of distinct time segments the examples of a batch
	// came from (locality mode; 0 in random mode): the randomness the locality costs.
	SegmentsPerBatch float64
	SegmentsSum      uint64 // the sum behind SegmentsPerBatch (over Batches batches)
	ResidentSegments int
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats {
	j.mu.Lock()
	s := Stats{Mode: j.mode, Batches: j.batches}
	if j.batches > 0 && j.loc != nil {
		s.SegmentsPerBatch = float64(j.segSum) / float64(j.batches)
		s.SegmentsSum = j.segSum
	}
	j.mu.Unlock()
	if j.loc != nil {
		s.ResidentSegments = j.loc.resident
	}
	s.Cache = j.cache.Stats()
	return s
}

// ---- opening the sources --------------------------------------------------------------------

func dimsOf(file string, sp *Spec, ds Dataset, arr Array, want int, names string) ([]string, error) {
	dims := arr.Dims()
	if len(arr.Shape()) != want || len(dims) != want {
		return nil, fieldErr(file, sp.Field+".variable", "%s/%s has dims %v (shape %v); expected %d dims %s for role %q",
			ds, sp.Variable, dims, arr.Shape(), want, names, sp.Role)
	}
	return dims, nil
}

func coordArray(file string, sp *Spec, ds Dataset, name string) (Array, error) {
	a, err := ds.Array(name)
	if err != nil {
		return nil, fieldErr(file, sp.Field+".store", "coordinate %q: %v", name, err)
	}
	return a, nil
}

func readTimeAxis(file string, sp *Spec, ds Dataset, name string) (axis, error) {
	a, err := coordArray(file, sp, ds, name)
	if err != nil {
		return axis{}, err
	}
	ts, err := a.Times()
	if err != nil {
		return axis{}, fieldErr(file, sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	ax, err := regularAxis(ts)
	if err != nil {
		return axis{}, fieldErr(file, sp.Field+".store", "%s/%s: %v; expected a regular time coordinate", ds, name, err)
	}
	if sp.TimeResolutionMinutes*60%ax.step != 0 {
		return axis{}, fieldErr(file, sp.Field+".time_resolution_minutes", "%d is not a multiple of the store's time step (%d min)",
			sp.TimeResolutionMinutes, ax.step/60)
	}
	return ax, nil
}

func readFloats(file string, sp *Spec, ds Dataset, name string, n int) ([]float64, error) {
	a, err := coordArray(file, sp, ds, name)
	if err != nil {
		return nil, err
	}
	v, err := a.Float64s()
	if err != nil {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	if len(v) != n {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d values; expected %d", ds, name, len(v), n)
	}
	return v, nil
}

func selectChannels(file string, sp *Spec, ds Dataset, name string, n int) ([]int, error) {
	a, err := coordArray(file, sp, ds, name)
	if err != nil {
		return nil, err
	}
	all, err := a.Strings()
	if err != nil {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	if len(all) != n {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d names; expected %d", ds, name, len(all), n)
	}
	out := make([]int, len(sp.Channels))
	for i, c := range sp.Channels {
		k := -1
		for q, s := range all {
			if s == c {
				k = q
				break
			}
		}
		if k < 0 {
			return nil, fieldErr(file, sp.Field+".channels", "%q is not a %s of %s/%s; expected one of %s", c, name, ds, sp.Variable, quoteList(all))
		}
		out[i] = k
	}
	return out, nil
}

// cropTables computes, for every anchor pixel, the start of a crop of size n centred on the
// nearest coordinate of coords (ties to the lower index), clamped into the grid.
func cropTables(anchorCoords, coords []float64, n int) []int {
	out := make([]int, len(anchorCoords))
	for i, v := range anchorCoords {
		out[i] = cropStart(nearestIndex(coords, v), n, len(coords))
	}
	return out
}

func openData(file string, sp *Spec, ds Dataset) (Array, *chunked, error) {
	arr, err := ds.Array(sp.Variable)
	if err != nil {
		return nil, nil, fieldErr(file, sp.Field+".variable", "%v", err)
	}
	c, err := newChunked(sp.Index, fmt.Sprintf("%s (%s/%s)", sp.Field, ds, sp.Variable), arr)
	if err != nil {
		return nil, nil, fieldErr(file, sp.Field+".variable", "%v", err)
	}
	return arr, c, nil
}

func openGrid(file string, sp *Spec, ds Dataset, anchor *gridSource) (*gridSource, error) {
	arr, c, err := openData(file, sp, ds)
	if err != nil {
		return nil, err
	}
	dims, err := dimsOf(file, sp, ds, arr, 4, "(time, channel, y, x)")
	if err != nil {
		return nil, err
	}
	shape := arr.Shape()
	g := &gridSource{s: sp, c: c, win: sp.window()}
	if g.times, err = readTimeAxis(file, sp, ds, dims[0]); err != nil {
		return nil, err
	}
	if g.times.n != shape[0] {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d times; the data has %d", ds, dims[0], g.times.n, shape[0])
	}
	if g.chans, err = selectChannels(file, sp, ds, dims[1], shape[1]); err != nil {
		return nil, err
	}
	if g.ys, err = readFloats(file, sp, ds, dims[2], shape[2]); err != nil {
		return nil, err
	}
	if g.xs, err = readFloats(file, sp, ds, dims[3], shape[3]); err != nil {
		return nil, err
	}
	if anchor != nil {
		if sp.Height > shape[2] || sp.Width > shape[3] {
			return nil, fieldErr(file, sp.Field+".image_size_pixels_height", "a %d x %d crop does not fit the %d x %d grid", sp.Height, sp.Width, shape[2], shape[3])
		}
		g.yStart = cropTables(anchor.ys, g.ys, sp.Height)
		g.xStart = cropTables(anchor.xs, g.xs, sp.Width)
	}
	c.setNormalisation(1, g.chans, sp.NormaliseMean, sp.NormaliseStd)
	return g, nil
}

func openNWP(file string, sp *Spec, ds Dataset, anchor *gridSource) (*nwpSource, error) {
	arr, c, err := openData(file, sp, ds)
	if err != nil {
		return nil, err
	}
	dims, err := dimsOf(file, sp, ds, arr, 5, "(init_time, step, channel, y, x)")
	if err != nil {
		return nil, err
	}
	shape := arr.Shape()
	n := &nwpSource{s: sp, c: c}
	ia, err := coordArray(file, sp, ds, dims[0])
	if err != nil {
		return nil, err
	}
	if n.inits, err = ia.Times(); err != nil {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s: %v", ds, dims[0], err)
	}
	if len(n.inits) != shape[0] {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d values; the data has %d runs", ds, dims[0], len(n.inits), shape[0])
	}
	if !sort.SliceIsSorted(n.inits, func(a, b int) bool { return n.inits[a] < n.inits[b] }) {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s is not ascending", ds, dims[0])
	}
	sa, err := coordArray(file, sp, ds, dims[1])
	if err != nil {
		return nil, err
	}
	steps, err := sa.Durations()
	if err != nil {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s: %v", ds, dims[1], err)
	}
	if n.steps, err = regularAxis(steps); err != nil {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s: %v; expected regular lead steps", ds, dims[1], err)
	}
	if n.steps.n != shape[1] {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d steps; the data has %d", ds, dims[1], n.steps.n, shape[1])
	}
	if sp.TimeResolutionMinutes*60%n.steps.step != 0 {
		return nil, fieldErr(file, sp.Field+".time_resolution_minutes", "%d is not a multiple of the store's step spacing (%d min)",
			sp.TimeResolutionMinutes, n.steps.step/60)
	}
	n.rule = nwpRule{minStale: sp.MinStalenessMinutes * 60, maxStale: sp.MaxStalenessMinutes * 60, window: sp.window()}
	if n.chans, err = selectChannels(file, sp, ds, dims[2], shape[2]); err != nil {
		return nil, err
	}
	ys, err := readFloats(file, sp, ds, dims[3], shape[3])
	if err != nil {
		return nil, err
	}
	xs, err := readFloats(file, sp, ds, dims[4], shape[4])
	if err != nil {
		return nil, err
	}
	if sp.Height > shape[3] {
		return nil, fieldErr(file, sp.Field+".image_size_pixels_height", "%d does not fit the NWP grid of %d rows", sp.Height, shape[3])
	}
	if sp.Width > shape[4] {
		return nil, fieldErr(file, sp.Field+".image_size_pixels_width", "%d does not fit the NWP grid of %d columns", sp.Width, shape[4])
	}
	n.yStart = cropTables(anchor.ys, ys, sp.Height)
	n.xStart = cropTables(anchor.xs, xs, sp.Width)
	c.setNormalisation(2, n.chans, sp.NormaliseMean, sp.NormaliseStd)
	return n, nil
}

func openPoints(file string, sp *Spec, ds Dataset, anchor *gridSource) (*pointSource, error) {
	arr, c, err := openData(file, sp, ds)
	if err != nil {
		return nil, err
	}
	dims, err := dimsOf(file, sp, ds, arr, 2, "(time, system)")
	if err != nil {
		return nil, err
	}
	shape := arr.Shape()
	p := &pointSource{s: sp, c: c, win: sp.window(), anchor: anchor}
	if p.times, err = readTimeAxis(file, sp, ds, dims[0]); err != nil {
		return nil, err
	}
	if p.times.n != shape[0] {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d times; the data has %d", ds, dims[0], p.times.n, shape[0])
	}
	ida, err := coordArray(file, sp, ds, dims[1])
	if err != nil {
		return nil, err
	}
	if p.ids, err = ida.Int64s(); err != nil {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s: %v", ds, dims[1], err)
	}
	if len(p.ids) != shape[1] {
		return nil, fieldErr(file, sp.Field+".store", "%s/%s has %d ids; the data has %d systems", ds, dims[1], len(p.ids), shape[1])
	}
	xName, yName := "x", "y"
	if f := strings.Fields(arr.Attr("coordinates")); len(f) == 2 {
		xName, yName = f[0], f[1] // CF "coordinates": the auxiliary x and y of each system
	}
	if p.xs, err = readFloats(file, sp, ds, xName, shape[1]); err != nil {
		return nil, err
	}
	if p.ys, err = readFloats(file, sp, ds, yName, shape[1]); err != nil {
		return nil, err
	}
	if shape[1] < sp.NearestK {
		return nil, fieldErr(file, sp.Field+".nearest_k", "%d; the store has only %d systems", sp.NearestK, shape[1])
	}
	p.setOrder()
	c.setNormalisation(-1, nil, sp.NormaliseMean, sp.NormaliseStd)
	return p, nil
}
