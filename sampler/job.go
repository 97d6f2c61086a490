package sampler

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler/chunks"
	"github.com/gobatch/gobatch/sampler/internal/rowconv"
	"github.com/gobatch/gobatch/sampler/rules"
)

// Options are the settings of a job that do not come from the configuration file.
type Options struct {
	// DataRoot is the directory (or the URL, readers/objstore) store paths are relative to;
	// default: the config file's folder.
	DataRoot string
	// CacheMB overrides the anchor's cache_mb when > 0. Any size is accepted here (tests use
	// tiny caches); shmloader holds its --cache-mb to cache_mb's range with CheckCacheMB.
	CacheMB int64
	// Open opens a store; default: the Zarr reader (OpenZarr). NewJob calls it once per
	// distinct store, for all of them at once (concurrently).
	Open func(path string) (Dataset, error)
	// Shared, when set, is the cache the job uses instead of one of its own (CacheMB and the
	// anchor's cache_mb are then ignored): the jobs of one node loader (shared.go).
	Shared *SharedCache
	// Stream is the rank the job fills batches for. Batches are global whatever it is, but
	// with order = "epochs" the epoch length is rounded down to a multiple of the world size
	// (Stream.Epoch); the zero value is world size 1.
	Stream Stream
}

// withDefaults fills the defaults in.
func (o Options) withDefaults(cfg *config.Config) Options {
	if o.DataRoot == "" {
		o.DataRoot = cfg.BaseDir
	}
	if o.DataRoot == "" { // a Config made without Parse
		o.DataRoot = filepath.Dir(cfg.File)
	}
	if o.Open == nil {
		o.Open = OpenZarr
	}
	return o
}

// Job is the zarr nowcast source: it joins the zarr sources of a configuration into examples
// around a drawn t0 and location, and fills whole batches of them (the data tensors, then t0,
// x, y and the point ids). It implements Source.
type Job struct {
	cfg  *config.Config
	size int
	seed uint64
	// rules is the rule set the job follows where rule sets differ (the anchor's key rules),
	// chosen once here; the job asks it and never which one it is.
	rules  rules.Rules
	layout rules.Layout // rules.Layout()

	srcs   []dataSource
	stores []string         // the store each source reads, as opened
	joined []*concatDataset // sources' lists of stores read as one (their warnings)
	nt     bool             // the gather writes a batch with non-temporal stores (its size: rowconv.UseNT)
	// The anchor: a grid (examples centred on its pixels, or on sites placed on its pixels) or a
	// points source (examples centred on its own systems, every gridded source cropped around
	// them in its own system: sitecrop.go). Exactly one of anchor and anchorPts is set.
	anchor    *gridSource
	anchorPts *pointSource
	times     *timeAxis // the anchor's times: the t0 candidates are among them
	timeChunk int       // the anchor's time chunk length (locality's segments are whole chunks)
	ownCrops  bool      // an anchor grid whose sites every source crops around in its own system
	points    []*pointSource
	sites     *sites           // site-anchored (the anchor's locations key): the examples' centres; nil: drawn pixels
	lidAt     int              // the index of the location_id tensor when site-anchored
	feat      *siteFeatureFill // the site features (sitefeatures.go); nil: none
	capDiv    *capacityDiv     // a points source divided by its capacity (capacity.go); nil: none
	// crops in every source's own system: the locations each source cannot crop (sitecrop.go);
	// and the window tensors (xylayout.go)
	siteExclusions []SiteExclusion
	windowT        *windowTensors

	cands          []int32         // anchor time indices where every window fits, ascending
	pairTimes      []int32         // a rule set's pairs in time segments: anchor times where every window fits (segmentTimes)
	space          rules.PairSpace // site-anchored: the rule set's own (t0, location) pairs, if any (pairs.go)
	drawSites      []int           // the locations examples are drawn from when the rule set's are not all; nil: all
	rejections     []Rejection
	cy0, ny        int // centre rows [cy0, cy0+ny)
	cx0, nx        int
	tensors        []config.Tensor
	cache          *chunks.Cache
	shared         *SharedCache // Options.Shared: the cache is its (Close leaves it open), keyed by decoding identity
	keySrc         []int        // a chunk key's high bits -> its source's index in srcs (keyed)
	paced          *paceMember  // a shared cache's job that walks a block shuffle: its place (pace.go)
	loc            *locality
	epochs         *epochs     // order = "epochs"; nil: the endless stream of independent draws
	conc           *concurrent // [batch] concurrent: one t0 per batch, every location (concurrent.go); nil: not
	dataBytes      int64       // decoded size of every source's data array
	mode           string
	mu             sync.Mutex
	free           []*readerState
	decodes        decodeQueue   // the prefetches in progress, lowest batch first (prefetch.go)
	ahead          *aheadFetcher // the background prefetch of batches ahead (ahead.go)
	maxK           int
	batches, exmpl uint64
	segSum         uint64
	gatherNS       uint64 // the time fills spent copying examples into slots, summed (Stats.GatherNS)
	readers        int    // the most fills that ran at once (reader states made)
	why            string // how the sampling was chosen (Why)
	blockSteps     int    // epochs' block shuffle: segment length and decoded bytes
	blockBytes     int64
}

// NewJob opens the stores of cfg (metadata and coordinates only) and prepares the sampling:
// the sources, the centres the anchor's crops allow, the t0 candidates every window fits, the
// batch's tensors, then the cache and the sampling mode.
func NewJob(cfg *config.Config, opt Options) (*Job, error) {
	opt = opt.withDefaults(cfg)
	j := &Job{cfg: cfg, size: cfg.Batch.Size, seed: cfg.Batch.Seed, shared: opt.Shared}
	if j.size < 1 && !cfg.Batch.Concurrent { // concurrent: the locations, once known (concurrent.go)
		return nil, cfg.Errorf("batch.size", "%d; expected at least 1", j.size)
	}
	specs, anchor, err := zarrSpecs(cfg)
	if err != nil {
		return nil, err
	}
	if j.rules, err = chooseRules(cfg, specs, anchor); err != nil {
		return nil, err
	}
	j.layout = j.rules.Layout()
	o := &opener{cfg: cfg, opt: opt, open: map[string]Dataset{}}
	o.openAll(specs)
	if err := j.openSources(specs, anchor, o); err != nil {
		return nil, err
	}
	j.joined = o.joined
	if err := j.promoteQuotients(); err != nil { // before the cache's sizes are taken
		return nil, err
	}
	if err := j.measureData(); err != nil {
		return nil, err
	}
	j.shareDecodes()
	if err := j.placeCentres(anchor); err != nil {
		return nil, err
	}
	if err := j.checkCoverage(); err != nil {
		return nil, err
	}
	if err := j.findSampleSpace(); err != nil {
		return nil, err
	}
	if err := j.groupByT0(); err != nil {
		return nil, err
	}
	if err := j.layTensors(); err != nil {
		return nil, err
	}
	if err := j.chooseMode(anchor, opt.CacheMB); err != nil {
		return nil, err
	}
	if err := j.chooseOrder(anchor, opt.Stream); err != nil {
		return nil, err
	}
	j.ahead = newAheadFetcher(j.aheadBatches(anchor), opt.Stream)
	if j.shared != nil && j.epochs != nil && j.epochs.blocks != nil {
		j.paced = j.shared.pace.join(j.epochs.blocks.paceKey(), j.paceLag())
	}
	return j, nil
}

// zarrSpecs returns the decoded source tables of cfg and the anchor among them.
func zarrSpecs(cfg *config.Config) (specs []*Spec, anchor *Spec, err error) {
	for i, s := range cfg.Sources {
		sp, ok := s.Spec.(*Spec)
		if !ok {
			return nil, nil, cfg.Errorf(fmt.Sprintf("source[%d].kind", i),
				"kind %q cannot be mixed with zarr sources; expected every source to have kind = \"zarr\"", s.Kind)
		}
		sp.Index, sp.Name = i, s.Name
		if sp.Anchor {
			if anchor != nil {
				return nil, nil, cfg.Errorf(fmt.Sprintf("source[%d].anchor", i),
					"a second anchor (source[%d] is one already); expected exactly one anchor = true", anchor.Index)
			}
			anchor = sp
		}
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		return nil, nil, cfg.Errorf("source", "no zarr sources")
	}
	if anchor == nil {
		return nil, nil, cfg.Errorf("source", "no anchor; expected anchor = true on the source (role = \"grid\") whose grid the locations are drawn from, or on the points source whose systems the examples are centred on")
	}
	if anchor.Role == RolePoints { // its own systems are the locations
		if anchor.Locations != "" && anchor.Locations != anchor.Name {
			return nil, nil, cfg.Errorf(anchor.Field+".locations", "%q on a points anchor; expected none (the examples are centred on this source's own systems, %s)", anchor.Locations, anchor.Name)
		}
		anchor.Locations = anchor.Name
	}
	return specs, anchor, nil
}

// chooseRules is the anchor's rule set, given to every source, once it accepts every source's
// keys.
func chooseRules(cfg *config.Config, specs []*Spec, anchor *Spec) (rules.Rules, error) {
	r, err := rules.Lookup(anchor.Rules)
	if err != nil {
		return nil, cfg.Errorf(anchor.Field+".rules", "%v", err)
	}
	for _, sp := range specs {
		sp.rules = r
		keys := rules.SourceKeys{Role: sp.Role, DropoutFraction: sp.DropoutFraction, AccumChannels: sp.AccumChannels}
		if key, why := r.Check(keys); key != "" {
			return nil, cfg.Errorf(sp.Field+"."+key, "%s; expected rules = %s on the anchor (%s)", why, rules.Accepting(keys), anchor.Field)
		}
	}
	return r, nil
}

// opener opens each store once, however many sources read it.
type opener struct {
	cfg    *config.Config
	opt    Options
	open   map[string]Dataset // by resolved path
	errs   map[string]error   // stores that failed to open, by resolved path
	joined []*concatDataset   // the lists of stores read as one
}

// openAll opens every store the sources name, all at once: opening a store in object
// storage reads its metadata (and OpenZarr its coordinates), requests whose latency would
// otherwise add up store by store before the first batch. The errors are reported by dataset,
// source by source, in the order the job asks for them.
func (o *opener) openAll(specs []*Spec) {
	var paths []string
	for _, sp := range specs {
		for _, st := range sp.Stores {
			if p := objstore.Join(o.opt.DataRoot, st); !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	ds, errs := make([]Dataset, len(paths)), make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { ds[i], errs[i] = o.opt.Open(p) })
	}
	wg.Wait()
	o.errs = map[string]error{}
	for i, p := range paths {
		o.open[p], o.errs[p] = ds[i], errs[i]
	}
}

// dataset is the source's store, or its stores read as one along its time axis (concat.go).
func (o *opener) dataset(sp *Spec) (Dataset, error) {
	parts := make([]Dataset, len(sp.Stores))
	for i, st := range sp.Stores {
		p := objstore.Join(o.opt.DataRoot, st)
		d, ok := o.open[p]
		err := o.errs[p]
		if !ok { // not among openAll's specs
			d, err = o.opt.Open(p)
			o.open[p] = d
		}
		if err != nil {
			return nil, o.cfg.Errorf(sp.Field+".store", "%v", err)
		}
		if sp.VariablesAsChannels {
			if d, err = stackVariables(d); err != nil {
				return nil, o.cfg.Errorf(sp.Field+".variables_as_channels", "%v", err)
			}
		}
		parts[i] = d
	}
	if sp.VariablesAsChannels {
		sp.Variable = stackedName
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	dim, err := timeDimension(o.cfg, sp, parts[0])
	if err != nil {
		return nil, err
	}
	d, err := concatenate(parts, dim)
	if err != nil {
		return nil, o.cfg.Errorf(sp.Field+".store", "%v", err)
	}
	o.joined = append(o.joined, d)
	return d, nil
}

// timeDimension is the name in the store ds of the source's time axis (an NWP's init_time),
// along which a list of stores is read as one.
func timeDimension(cfg *config.Config, sp *Spec, ds Dataset) (string, error) {
	name := sp.Variable
	if name == "" {
		var err error
		if name, err = onlyDataArray(ds); err != nil {
			return "", cfg.Errorf(sp.Field+".variable", "missing, and %v", err)
		}
	}
	arr, err := ds.Array(name)
	if err != nil {
		return "", cfg.Errorf(sp.Field+".variable", "%v", err)
	}
	m, err := mapStoreDims(cfg, sp, ds, arr)
	if err != nil {
		return "", err
	}
	ax := axisTime
	if sp.Role == RoleNWP {
		ax = axisInit
	}
	p := m.perm[m.axis(ax)]
	if p < 0 {
		return "", cfg.Errorf(sp.Field+".store", "%s/%s has no %s dimension to read its %d stores along", ds, name, ax, len(sp.Stores))
	}
	return arr.Dims()[p], nil
}

// openSources opens the anchor first (the others are placed on its grid, or around its
// systems), then every source in configuration order.
func (j *Job) openSources(specs []*Spec, anchor *Spec, o *opener) error {
	ads, err := o.dataset(anchor)
	if err != nil {
		return err
	}
	var first dataSource
	if anchor.Role == RolePoints {
		if j.anchorPts, err = openPoints(j.cfg, anchor, ads); err != nil {
			return err
		}
		p := j.anchorPts
		p.at = &positions{w: len(p.xs), xs: p.xs, ys: p.ys} // its own systems, one row of "pixels"
		j.times, j.timeChunk, first = &p.times, p.c.chunks[0], p
	} else {
		// Crops around each site in every source's own system (sitecrop.go): no source is
		// placed on the anchor's grid but the points sources, whose positions over it may have
		// gaps (a geostationary grid's pixels off the Earth's disk) that no site may use.
		j.ownCrops = anchor.Locations != "" && j.rules.SiteCrop() != nil
		if j.anchor, err = openGrid(j.cfg, anchor, ads, nil); err != nil {
			return err
		}
		j.times, j.timeChunk, first = &j.anchor.times, j.anchor.c.chunks[0], j.anchor
	}
	for _, sp := range specs {
		src, ds := first, ads
		if sp != anchor {
			if ds, err = o.dataset(sp); err != nil {
				return err
			}
			if src, err = j.openSource(sp, ds); err != nil {
				return err
			}
		}
		if p, ok := src.(*pointSource); ok {
			j.points = append(j.points, p)
			j.maxK = max(j.maxK, p.s.NearestK)
		}
		src.data().from = o.storesOf(sp) + "\x00" + ds.String()
		j.srcs, j.stores = append(j.srcs, src), append(j.stores, j.cfg.Redact(ds.String()))
	}
	return nil
}

// openSource opens a source that is not the anchor, placed on the anchor's grid or systems.
func (j *Job) openSource(sp *Spec, ds Dataset) (dataSource, error) {
	if j.anchorPts != nil && len(sp.AnchorCoords) > 0 {
		return nil, j.cfg.Errorf(sp.Field+".anchor_coords", "set, but the anchor (%s) is a points source, with no grid to give positions over; expected crs instead", j.anchorPts.s.Field)
	}
	grid := j.anchor // the grid the source's crop table is placed on; nil: crops around each site
	if j.ownCrops {
		grid = nil
	}
	switch sp.Role {
	case RoleGrid:
		return openGrid(j.cfg, sp, ds, grid)
	case RoleNWP:
		return openNWP(j.cfg, sp, ds, grid)
	}
	p, err := openPoints(j.cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	switch {
	case j.anchorPts != nil:
		p.at, err = placeOnSystems(j.cfg, sp, j.anchorPts, p.xName, p.yName)
	case j.ownCrops:
		p.at, err = findPositions(j.cfg, sp, j.anchor, p.xName, p.yName) // gaps checked at the sites (checkSitePositions)
	default:
		p.at, err = placeOnAnchor(j.cfg, sp, j.anchor, p.xName, p.yName)
	}
	return p, err
}

// measureData numbers the sources' chunks for the cache, makes their converters and adds up
// their size in the cache.
func (j *Job) measureData() error {
	for _, s := range j.srcs {
		c := s.data()
		c.id = uint64(s.spec().Index)
		c.nanFill, c.fill = s.spec().nanFill()
		if s.spec().Capacity != "" {
			c.nanFill = false // filled after the division (capacity.go)
		}
		if n, ok := s.(*nwpSource); ok && n.targets != nil && n.targets.fill {
			c.nanFill = false // filled after the difference of the accumulated channels (nwptargets.go)
		}
		c.refuseMissing = s.spec().MissingChunks == MissingError
		c.deadline = time.Duration(s.spec().ChunkDeadline * float64(time.Second))
		n := int64(1)
		for _, g := range c.grid {
			n *= int64(g)
		}
		j.dataBytes += n * c.chunkBytes()
		if err := c.prepareConvs(); err != nil {
			return err
		}
	}
	return nil
}

// placeCentres finds the centre pixels whose anchor crop fits the grid, and when the job is
// site-anchored the locations among them. A points anchor's locations are its own systems.
func (j *Job) placeCentres(a *Spec) error {
	if j.anchor == nil {
		return j.placeSites(a)
	}
	H, W := len(j.anchor.ys), len(j.anchor.xs)
	j.cy0, j.ny = a.Height/2, centres(H, a.Height)
	j.cx0, j.nx = a.Width/2, centres(W, a.Width)
	if a.Height > H || j.ny < 1 {
		return j.cfg.Errorf(a.Field+".image_size_pixels_height", "%d does not fit the anchor grid of %d rows", a.Height, H)
	}
	if a.Width > W || j.nx < 1 {
		return j.cfg.Errorf(a.Field+".image_size_pixels_width", "%d does not fit the anchor grid of %d columns", a.Width, W)
	}
	if a.Locations != "" {
		return j.placeSites(a) // the centres are the systems of a points source (sites.go)
	}
	return nil
}

// centres is the number of centre pixels along an axis of n pixels for a crop of size pixels:
// the crop starts size/2 before its centre, and a margin of size/2 is kept on both sides (with
// an even size the last start, n - size, is left out so that the centres stay symmetric),
// except that a crop as large as the axis has its one centre, starting at 0.
func centres(n, size int) int {
	if size == n {
		return 1
	}
	return n - 2*(size/2)
}

// Rejection is how many anchor times one source rules out as t0 (its window lacks a step
// there), or that [batch] t0_start / t0_end leave out, why the first of them was, and how many
// each cause rejects (most first): the cause that rejects almost every time is the one to fix.
type Rejection struct {
	Field  string  `json:"field"`            // "source[1]"; "batch" for the t0_start / t0_end range
	Name   string  `json:"name"`             // the source's name; "" for the range
	Count  int     `json:"count"`            // anchor times rejected (a time several sources reject counts for each)
	First  string  `json:"first"`            // the first rejected time and why: "at t0 2021-01-01T00:10: ..."; "" when Count is 0
	Causes []Cause `json:"causes,omitempty"` // a source's rejections by cause, most first
}

// Cause is how many anchor times a source rejects for one reason, and the first of them.
type Cause struct {
	Cause string `json:"cause"` // "the time coordinate has a gap where the window needs a step", ...
	Count int    `json:"count"`
	First string `json:"first"` // the first such time and its detail
}

// add counts source s's rejection of t0 under its cause; the first time of each cause is
// described in full (the detail is asked for then only).
func (r *Rejection) add(t0 int64, s dataSource) {
	cause := s.whyNot(t0, false).cause
	for i := range r.Causes {
		if r.Causes[i].Cause == cause {
			r.Causes[i].Count++
			r.Count++
			return
		}
	}
	at := fmt.Sprintf("at t0 %s: %s", fmtTime(t0), s.whyNot(t0, true).detail)
	if r.Count == 0 {
		r.First = at
	}
	r.Count++
	r.Causes = append(r.Causes, Cause{Cause: cause, Count: 1, First: at})
}

func (r Rejection) String() string {
	who := r.Field
	if r.Name != "" {
		who = fmt.Sprintf("%s (%s)", r.Field, r.Name)
	}
	if r.Count == 0 {
		return who + " rejects none"
	}
	if len(r.Causes) < 2 {
		return fmt.Sprintf("%s rejects %d: %s", who, r.Count, r.First)
	}
	parts := make([]string, len(r.Causes))
	for i, c := range r.Causes {
		parts[i] = fmt.Sprintf("%d because %s (the first %s)", c.Count, c.Cause, c.First)
	}
	return fmt.Sprintf("%s rejects %d: %s", who, r.Count, strings.Join(parts, "; "))
}

// t0Ranges are the anchor index ranges [lo, hi) inside the t0 periods ([batch] time_periods,
// or t0_start .. t0_end), ascending and apart; the whole axis without periods.
func (j *Job) t0Ranges() [][2]int {
	ts := j.times.vals
	ps := j.t0Periods()
	if ps == nil {
		return [][2]int{{0, len(ts)}}
	}
	var out [][2]int
	for _, p := range ps {
		lo := sort.Search(len(ts), func(i int) bool { return ts[i] >= p[0] })
		hi := sort.Search(len(ts), func(i int) bool { return ts[i] > p[1] })
		if lo < hi {
			out = append(out, [2]int{lo, hi})
		}
	}
	return out
}

// findSampleSpace finds what examples are drawn from: a site-anchored job's rule set may have
// (t0, location) pairs of its own (pairs.go); else gobatch's t0 candidates.
func (j *Job) findSampleSpace() error {
	if j.sites != nil {
		return j.findPairs()
	}
	return j.findCandidates()
}

// findCandidates keeps the anchor times inside [batch] t0_start .. t0_end at which every
// source has every step of its window, and records what each source rejects (Rejections);
// when no time is left, the error says which source rejected how many and why.
func (j *Job) findCandidates() error {
	ranges := j.t0Ranges()
	j.rejections = make([]Rejection, len(j.srcs))
	for si, s := range j.srcs {
		j.rejections[si] = Rejection{Field: s.spec().Field, Name: s.spec().Name}
	}
	n, in := j.times.len(), 0
	for _, r := range ranges {
		in += r[1] - r[0]
	}
	if in < n {
		r := Rejection{Field: "batch", Count: n - in, First: fmt.Sprintf("at t0 %s: outside %s", fmtTime(j.times.value(j.firstOutside(ranges))), j.periodsName())}
		j.rejections = append(j.rejections, r)
	}
	if in == 0 {
		return j.cfg.Errorf(j.periodsKey(), "no anchor time is %s; the anchor's times are %s .. %s",
			strings.TrimPrefix(j.rangeNote(), " "), fmtTime(j.times.value(0)), fmtTime(j.times.last()))
	}
	for _, r := range ranges {
		for i := r[0]; i < r[1]; i++ {
			t0 := j.times.value(i)
			good := true
			for si, s := range j.srcs {
				if s.fits(t0) {
					continue
				}
				good = false
				j.rejections[si].add(t0, s)
			}
			if good {
				j.cands = append(j.cands, int32(i))
			}
		}
	}
	j.sortCauses()
	if len(j.cands) > 0 {
		return nil
	}
	var parts []string
	for _, r := range j.rejections[:len(j.srcs)] {
		if r.Count > 0 {
			parts = append(parts, r.String())
		}
	}
	within, of := "", ""
	if in < n {
		within, of = j.rangeNote(), fmt.Sprintf("; the anchor has %d", n)
	}
	lo, hi := ranges[0][0], ranges[len(ranges)-1][1]
	return j.cfg.Errorf("source", "no valid t0: none of the %d anchor times%s (%s .. %s%s) has every source's window; %s",
		in, within, fmtTime(j.times.value(lo)), fmtTime(j.times.value(hi-1)), of,
		strings.Join(parts, "; "))
}

// sortCauses orders each source's rejections by cause, most frequent first: the cause that
// rejects almost every t0 is the one to fix.
func (j *Job) sortCauses() {
	for si := range j.rejections {
		cs := j.rejections[si].Causes
		sort.SliceStable(cs, func(a, b int) bool { return cs[a].Count > cs[b].Count })
	}
}

// firstOutside is the first anchor index outside ranges (some is).
func (j *Job) firstOutside(ranges [][2]int) int {
	i := 0
	for _, r := range ranges {
		if i < r[0] {
			return i
		}
		i = r[1]
	}
	return i
}

// Rejections lists, for every source in configuration order, the anchor times it rules out
// as t0 and why the first was; then, when [batch] t0_start or t0_end leaves times out, an
// entry for the range (Field "batch"). For start-up logs and shmloader plan.
func (j *Job) Rejections() []Rejection { return append([]Rejection(nil), j.rejections...) }

func fmtBound(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(t.Unix())
}

// t0Periods are the t0 periods as whole seconds, both ends included (open ends at the int64
// limits), sorted and merged where they overlap or touch; nil without periods.
func (j *Job) t0Periods() [][2]int64 {
	ps := j.cfg.Batch.Periods
	if len(ps) == 0 {
		return nil
	}
	out := make([][2]int64, 0, len(ps))
	for _, p := range ps {
		r := [2]int64{math.MinInt64, math.MaxInt64}
		if s := p.Start; s != nil {
			r[0] = s.Unix()
			if s.Nanosecond() > 0 {
				r[0]++ // t0 are whole seconds: the first one at or after s
			}
		}
		if e := p.End; e != nil {
			r[1] = e.Unix() // whole seconds at or before e
		}
		if r[0] <= r[1] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if r[0] <= last[1] || last[1] < math.MaxInt64 && r[0] == last[1]+1 { // overlapping or adjacent
				last[1] = max(last[1], r[1])
				continue
			}
		}
		merged = append(merged, r)
	}
	return merged
}

// periodsName names the t0 periods as the configuration gives them.
func (j *Job) periodsName() string {
	if j.cfg.Batch.PeriodsKey == "time_periods" {
		return "time_periods"
	}
	return "t0_start .. t0_end"
}

// periodsKey is the configuration key of the t0 periods, for errors.
func (j *Job) periodsKey() string { return "batch." + j.cfg.Batch.PeriodsKey }

// rangeNote names the t0 periods when there are: " within t0_start .. t0_end (a .. b)" or
// " within time_periods (a .. b, c .. d)".
func (j *Job) rangeNote() string {
	ps := j.cfg.Batch.Periods
	if len(ps) == 0 {
		return ""
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmtBound(p.Start) + " .. " + fmtBound(p.End)
	}
	return fmt.Sprintf(" within %s (%s)", j.periodsName(), strings.Join(parts, ", "))
}

// layTensors lists the batch's tensors: the data sources in configuration order, then t0, x,
// y, then the point ids, location_id and the site features.
func (j *Job) layTensors() error {
	names := map[string]bool{}
	for _, s := range j.srcs {
		shape, dt := s.spec().Example()
		shape[0] = windowSteps(s) // an NWP's finer steps when one run covers each window (nwptargets.go)
		if s.data().f64 {
			dt = ring.Float64 // a float64 quotient's values (capacity.go)
		}
		shape = layoutShape(j.layout, s.spec(), shape) // xylayout.go
		j.tensors = append(j.tensors, config.Tensor{Name: s.spec().Name, DType: dt, Shape: append([]int{j.size}, shape...)})
		names[s.spec().Name] = true
	}
	t0Type := ring.Int64
	if j.layout.T0Float {
		t0Type = ring.Float64 // Unix seconds
	}
	meta := []config.Tensor{
		{Name: "t0", DType: t0Type, Shape: []int{j.size}},
		{Name: "x", DType: ring.Float64, Shape: []int{j.size}},
		{Name: "y", DType: ring.Float64, Shape: []int{j.size}},
	}
	for _, p := range j.points {
		meta = append(meta, config.Tensor{Name: p.s.idsTensor(), DType: ring.Int64, Shape: []int{j.size, p.s.NearestK}})
	}
	if j.sites != nil {
		j.lidAt = len(j.tensors) + len(meta)
		meta = append(meta, config.Tensor{Name: LocationIDTensor, DType: ring.Int64, Shape: []int{j.size}})
	}
	feats, err := j.siteFeatureTensors(len(j.tensors) + len(meta))
	if err != nil {
		return err
	}
	meta = append(meta, feats...)
	capT, err := j.capacityTensors(len(j.tensors) + len(meta))
	if err != nil {
		return err
	}
	meta = append(meta, capT...)
	nwpT, err := j.nwpTimeTensors(len(j.tensors) + len(meta))
	if err != nil {
		return err
	}
	meta = append(meta, nwpT...)
	winT, err := j.windowTensorList(len(j.tensors) + len(meta))
	if err != nil {
		return err
	}
	meta = append(meta, winT...)
	for _, t := range meta {
		if names[t.Name] {
			return j.cfg.Errorf("source", "tensor name %q is used by a source and by the sampler's metadata (t0, x, y, the point ids, location_id, the site features, capacity_mwp, the NWP and window times and coordinates); expected another source name", t.Name)
		}
		names[t.Name] = true
		j.tensors = append(j.tensors, t)
	}
	if len(j.tensors) > config.MaxSources {
		return j.cfg.Errorf("source", "%d tensors with the metadata; at most %d are supported", len(j.tensors), config.MaxSources)
	}
	var bytes int64
	for _, t := range j.tensors {
		bytes += t.NBytes()
	}
	j.nt = rowconv.UseNT(bytes)
	return nil
}

// chooseMode makes the cache (the anchor's cache_mb unless cacheMB overrides it) and picks the
// sampling mode: random when the decoded data fits in the cache, else locality. Sampling
// "auto" never refuses a cache that random sampling can run with: when locality sampling does
// not fit either, it draws at random and lets the cache evict (j.why says so, with the
// cache_mb that would make it faster). With epochs, locality is the block shuffle (chooseOrder).
func (j *Job) chooseMode(a *Spec, cacheMB int64) error {
	mb := a.CacheMB
	if cacheMB > 0 {
		mb = cacheMB
	}
	if j.shared != nil {
		if err := j.useShared(); err != nil {
			return err
		}
	} else {
		j.cache = chunks.NewCache(mb << 20)
	}
	j.indexKeys()
	if j.conc != nil { // a batch reads one t0's chunks for all its locations (concurrent.go)
		j.mode, j.why = SampleRandom, j.concurrentWhy()
		return nil
	}
	j.mode = a.Sampling
	fits := j.dataFits()
	need := j.dataBytes*10/9>>20 + 1 // cache_mb that holds everything, with 10% headroom
	if j.mode == SampleAuto {
		j.mode = SampleLocality // why: below, once locality is known to fit
		if fits {
			j.mode = SampleRandom
			j.why = fmt.Sprintf("auto chose random: the %.0f MB of decoded data fit in cache_mb %d", float64(j.dataBytes)/(1<<20), mb)
		}
	}
	if j.drawsPairs() && j.mode == SampleLocality && j.pairsInSegments() == nil {
		// Locality sampling and the block shuffle cut the anchor's time axis into segments; a
		// rule set's own pairs (each location with its own t0s, t0s off the anchor's times) are
		// drawn in them when the rule set numbers them in time-ordered runs (pairblocks.go),
		// and at random otherwise (the cache evicts).
		j.mode = SampleRandom
		j.why = fmt.Sprintf("rules = %q: the pairs are drawn at random with evictions (the rule set does not number its pairs in time order); the %.0f MB of decoded data exceed cache_mb %d",
			j.rules.Name(), float64(j.dataBytes)/(1<<20), mb)
	}
	if j.mode != SampleLocality || j.cfg.Batch.Order == config.OrderEpochs {
		return nil
	}
	var err error
	j.loc, err = newLocality(j, a)
	if err != nil && a.Sampling == SampleAuto {
		// Too small even for locality: random draws with evictions still run, each batch
		// mostly from chunks it decodes itself.
		j.mode, j.loc = SampleRandom, nil
		j.why = fmt.Sprintf("auto chose random with evictions: cache_mb %d holds %.0f%% of the %.0f MB of decoded data, too little for locality sampling (two time segments); cache_mb >= %d would allow locality sampling, >= %d would hold everything",
			mb, 100*float64(j.cache.Budget())/float64(max(j.dataBytes, 1)), float64(j.dataBytes)/(1<<20), j.localityNeedMB(a), need)
		return nil
	}
	if err == nil && a.Sampling == SampleAuto {
		j.why = fmt.Sprintf("auto chose locality: the %.0f MB of decoded data exceed cache_mb %d (%d segments of %d steps resident); cache_mb >= %d would hold everything and sample at random",
			float64(j.dataBytes)/(1<<20), mb, j.loc.resident, j.loc.steps, need)
	}
	return err
}

// cacheRoom is what the cache holds for sampling decisions: its budget less 10% headroom.
func (j *Job) cacheRoom() int64 { return j.cache.Budget() * 9 / 10 }

// dataFits says whether every source's decoded data fit in the cache (cacheRoom).
func (j *Job) dataFits() bool { return j.dataBytes <= j.cacheRoom() }

// localityNeedMB is the smallest cache_mb that locality sampling accepts (two segments of the
// shortest length, with 10% headroom).
func (j *Job) localityNeedMB(a *Spec) int64 {
	steps := a.SegmentSteps
	if steps <= 0 {
		steps = j.timeChunk
	}
	return 2*segmentsOf(j, a, steps).segBytes*10/9>>20 + 1
}

// chooseOrder sets up epochs when [batch] order asks for them. With the data in the cache an
// epoch is one permutation of the sample space; with locality sampling (data larger than the
// cache) it is the block shuffle (epochs.go), which keeps chunk locality.
func (j *Job) chooseOrder(a *Spec, s Stream) error {
	if j.cfg.Batch.Order != config.OrderEpochs {
		return nil
	}
	var err error
	if j.conc != nil { // one t0 per batch (concurrent.go)
		return j.concurrentEpochs(a, s)
	}
	if j.drawsPairs() { // one sample per pair (fill.go maps it to its t0 and location)
		n := j.space.N()
		if _, perRank := s.Epoch(n / uint64(j.size)); perRank == 0 && !j.cfg.Batch.KeepLast {
			return j.cfg.Errorf("batch.size", "%d with order = %q: the sample space of rules %q has %d (t0, location) pairs, fewer than one batch for each of %d ranks; expected batch.size * world_size <= %d",
				j.size, config.OrderEpochs, j.rules.Name(), n, max(s.WorldSize, 1), n)
		}
		j.epochs, err = newEpochs(j.cfg, n, 1, j.size, s)
		if err != nil || j.mode != SampleLocality {
			return err
		}
		ts := j.pairsInSegments()
		j.why = j.blockWhy(j.blockShuffle(a, func(l *locality, group int) *blocks {
			return pairBlocks(ts, segmentStarts(l), group, j.seed)
		}))
		return nil
	}
	locations := uint64(1) // a drawn centre per t0
	if j.sites != nil {
		locations = uint64(j.sampledSites())
	}
	j.epochs, err = newEpochs(j.cfg, uint64(len(j.cands)), locations, j.size, s)
	if err != nil || j.mode != SampleLocality {
		return err
	}
	j.why = j.blockWhy(j.blockShuffle(a, func(l *locality, group int) *blocks { return newBlocks(l, locations, group, j.seed) }))
	return nil
}

// blockShuffle lays the epochs' block shuffle (epochs.go) over segments of the anchor's time
// axis, in groups of resident_segments or of as many as the cache holds twice over; made
// makes the blocks of the samples in them. It returns the segments and what the plan says of
// them.
func (j *Job) blockShuffle(a *Spec, made func(l *locality, group int) *blocks) (*locality, string) {
	fit := func(segBytes int64) int { // this group and the next fit
		return int(j.cacheRoom()/max(segBytes, 1)) / 2
	}
	l := pickSegments(j, a, fit, groupMix)
	group := a.ResidentSegments
	if group <= 0 {
		group = fit(l.segBytes)
	}
	b := made(l, group)
	j.epochs.blocks = b
	j.blockSteps, j.blockBytes = l.steps, l.segBytes
	short := ""
	if fit(l.segBytes) < 1 {
		short = fmt.Sprintf(" (the cache holds less than two segments of %.0f MB: a group's chunks are decoded again within it; cache_mb >= %d holds two)",
			float64(l.segBytes)/(1<<20), 2*l.segBytes*10/9>>20+1)
	}
	return l, fmt.Sprintf("epochs over %.0f MB of decoded data with cache_mb %d: block shuffle of %d segments of %d steps, %d per group%s",
		float64(j.dataBytes)/(1<<20), j.cache.Budget()>>20, len(b.lo), l.steps, b.group, short)
}

// blockWhy is the plan's account of a block shuffle of examples: the segments, the mixing it
// costs and the cache that would hold everything.
func (j *Job) blockWhy(l *locality, segments string) string {
	return fmt.Sprintf("%s; %s; cache_mb >= %d would hold everything (and with sampling auto permute the whole epoch)",
		segments, j.mixingTrade(l, j.epochs.blocks.group), j.dataBytes*10/9>>20+1)
}

// mixingTrade says what the block shuffle's groups cost in mixing: the distinct t0s a batch
// holds, about, against a uniform shuffle of the epoch, and the setting that trades decoding
// again for more (a group of group segments; a uniform draw of B among G t0s holds
// G(1 - (1 - 1/G)^B) of them).
func (j *Job) mixingTrade(l *locality, group int) string {
	distinct := func(g float64) float64 {
		if g < 1 {
			return g
		}
		return g * (1 - math.Pow(1-1/g, float64(j.size)))
	}
	perSeg := float64(len(l.times)) / float64(max(len(l.segs), 1))
	inGroup := distinct(perSeg * float64(min(group, len(l.segs))))
	uniform := distinct(float64(len(l.times)))
	return fmt.Sprintf("a batch mixes about %.1f t0s where a uniform shuffle of the epoch mixes %.1f; %s above %d mixes more t0s at the cost of decoding chunks again (the cache holds two groups)",
		inGroup, uniform, config.Spell("resident_segments"), group)
}

// groupMix is the number of segments per group the block shuffle prefers: shorter segments
// than locality sampling's when needed, so that a batch mixes several.
const groupMix = 4

// Why says how the sampling was chosen (for the start-up log and the plan); "" when the
// configuration named it.
func (j *Job) Why() string { return j.why }

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
func (j *Job) Cache() *chunks.Cache { return j.cache }

// Close stops fetching ahead and releases the cache's memory. No Fill may run afterwards.
func (j *Job) Close() {
	if j.paced != nil {
		j.shared.pace.leave(j.paced)
	}
	j.closeAhead()
	if j.shared == nil {
		j.cache.Close()
	}
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats {
	j.mu.Lock()
	s := Stats{Mode: j.mode, Why: j.why, Batches: j.batches, Candidates: len(j.cands), DataBytes: j.dataBytes, Order: config.OrderStream,
		Locations: j.Locations(), LocationsDropped: j.LocationsDropped()}
	if j.epochs != nil {
		s.Order, s.Samples, s.EpochBatches = config.OrderEpochs, j.epochs.samples, j.epochs.perRank
		if j.conc != nil { // an epoch's samples are its t0s times the locations
			s.Samples *= uint64(len(j.conc.locs))
		}
	}
	if j.space != nil {
		s.Pairs = j.space.N()
	}
	if j.batches > 0 && (j.loc != nil || j.epochs != nil && j.epochs.blocks != nil) {
		s.SegmentsPerBatch = float64(j.segSum) / float64(j.batches)
		s.SegmentsSum = j.segSum
	}
	j.mu.Unlock()
	if j.loc != nil {
		s.ResidentSegments = j.loc.resident
	}
	if j.epochs != nil && j.epochs.blocks != nil {
		s.ResidentSegments = j.epochs.blocks.group
	}
	s.Cache = j.cache.Stats()
	s.DecodeSlots = runtime.GOMAXPROCS(0)
	j.mu.Lock()
	s.GatherNS, s.GatherSlots = j.gatherNS, j.readers
	j.mu.Unlock()
	for _, src := range j.srcs {
		c := src.data()
		s.ReadNS += c.readNS.Load()
		s.DecodeNS += c.decodeNS.Load()
		s.ReadSlots = max(s.ReadSlots, cap(c.reads))
		i := src.spec().Index
		s.ChunksDecoded[i], s.ChunksMissing[i] = c.chunkCounts()
		s.DecodedBytes[i] = s.ChunksDecoded[i] * uint64(c.chunkBytes())
		s.DeliveredBytes[i] = s.Batches * uint64(j.tensors[i].NBytes())
	}
	return s
}
