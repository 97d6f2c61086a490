package sampler

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler/rules"
)

// Roles of a zarr source.
const (
	RoleGrid   = "grid"   // (time, channel, y, x): satellite-like imagery
	RoleNWP    = "nwp"    // (init_time, step, channel, y, x): forecast runs
	RolePoints = "points" // (time, system) with x, y per system: PV readings
)

// NaN policies.
const (
	NaNKeep = "keep" // NaN stays NaN (the default)
	NaNZero = "zero" // NaN becomes 0 (after normalisation)
)

// Missing-chunk policies (key missing_chunks).
const (
	MissingFill  = "fill"  // a chunk that is not stored reads as the fill value (the default)
	MissingError = "error" // it is refused, naming the source, the store and the chunk key
)

// DefaultChunkDeadlineS is the default of chunk_deadline_s: the longest a chunk read may take
// before the source fails naming the chunk (a hung mount, a file that never delivers).
const DefaultChunkDeadlineS = 60

// DefaultFetchBufferMB is the default of fetch_buffer_mb: the memory a source's chunk reads in
// flight may hold (each holds a compressed and a decoded chunk), which caps fetch_depth for
// large chunks.
const DefaultFetchBufferMB = 256

// DefaultFetchAheadBatches is the default of fetch_ahead_batches when a store is in object
// storage (ahead.go); with local stores only, the default is 0.
const DefaultFetchAheadBatches = 4

// The rule set (anchor source, key "rules") the whole job follows where rule sets differ: the
// name of one registered with package rules (rules.Gobatch, the default, or one a program's
// imports register).

// Sampling modes (anchor source, key "sampling").
const (
	SampleAuto     = "auto"     // random if the decoded data fits in the cache, else locality
	SampleRandom   = "random"   // every example drawn from all t0 candidates
	SampleLocality = "locality" // examples drawn from a rotating resident set of time segments
)

// Spec is a [[source]] table with kind = "zarr", decoded and checked as far as possible
// without opening the store. The keys follow the vocabulary of PV forecasting configurations.
type Spec struct {
	Index int    // position among the sources (set by the job)
	Name  string // tensor name (set by the job)
	Field string // "source[2]", for messages
	// Label is the name a rule set's view presents the source under (key label; "": Name),
	// for a name the tensor cannot carry (longer than a tensor name may be, with the suffixes
	// of its time tensors).
	Label string

	Store  string   // path relative to the data root (the first of Stores)
	Stores []string // the store, or several read as one along time (concat.go)
	// VariablesAsChannels: the store holds one data array per channel, read as one array
	// with a channel dimension (stacked.go; GFS's layout); variable is then not given.
	VariablesAsChannels bool
	Variable            string // the data array in the store
	Role                string // RoleGrid, RoleNWP or RolePoints
	Anchor              bool   // the locations are drawn from this source's grid (RoleGrid)
	// Dims maps a canonical axis (time, channel, y, x, init_time, step, id) to the store's
	// dimension name, for names the accepted spellings do not cover (key dims).
	Dims map[string]string

	TimeResolutionMinutes int64
	IntervalStartMinutes  int64
	IntervalEndMinutes    int64

	Height, Width int      // image_size_pixels_height/_width (grid, nwp)
	Channels      []string // selection by name (grid, nwp); nil: the store has no channel axis

	MinStalenessMinutes int64 // nwp: the run's init time is at least this much older than t0
	MaxStalenessMinutes int64 // nwp: and at most this much older (0 = no limit)
	// MaxStalenessSet: max_staleness_minutes is given (a rule set's per-target window may read
	// 0 as a limit and take its own default without the key: nwptargets.go).
	MaxStalenessSet bool
	// AccumChannels (nwp, a per-target window): the channels that are accumulated over the
	// run; they are differenced along the steps before the normalisation (nwptargets.go).
	AccumChannels []string

	// Features (points, the anchor's locations only): the site features (sitefeatures.go).
	Features SiteFeatures

	// Capacity (points): the name of the points source whose values divide this one's
	// (capacity.go).
	Capacity string

	NearestK  int    // points: systems per example
	IDsTensor string // points: name of the int64 [k] tensor of system ids (default <name>_system)

	NaNPolicy     string
	MissingChunks string    // MissingFill or MissingError
	ChunkDeadline float64   // seconds a chunk read may take (0: no deadline)
	FetchDepth    int       // bound on chunk reads in flight (0: DefaultRemoteDepth remote, adapted below it; GOMAXPROCS local)
	FetchBufferMB int64     // bound on the bytes those reads hold (compressed and decoded)
	NormaliseMean []float64 // per channel (or one value for points); empty = none
	NormaliseStd  []float64
	// ClipMin, ClipMax: per channel as NormaliseMean, the bounds values are clipped to before
	// they are normalised (±Inf: none); nil: no clip.
	ClipMin, ClipMax []float64
	// NaNFill: NaN becomes NaNFillValue after the normalisation (nan_fill, or nan_policy "zero").
	NaNFill      bool
	NaNFillValue float64

	DropoutTimedeltasMinutes []int64 // each <= 0
	DropoutFraction          float64 // the probability of a dropout (the sum of DropoutFractions when a list is given)
	// DropoutFractions: dropout_fraction as a list, the probability of each timedelta; nil
	// when dropout_fraction is one number (split evenly across the timedeltas).
	DropoutFractions []float64

	// Alignment on the anchor's grid (align.go). AnchorCoords names two arrays of the anchor's
	// store (x then y, over the anchor's y and x) that give each anchor pixel's position in
	// this source's coordinates; CRS is the source's coordinate reference system (anything
	// PROJ reads: "EPSG:27700", a PROJ string, WKT). Neither: the source shares the anchor's
	// coordinates.
	AnchorCoords []string
	CRS          string
	// Locations (anchor only): the name of a points source whose systems are the examples'
	// centres (sites.go); empty: centres are drawn from the whole grid.
	Locations string

	// Anchor only: the rules, the cache and the sampling mode of the whole job.
	Rules              string // the rule set's name (package rules)
	CacheMB            int64
	Sampling           string
	ResidentSegments   int // locality: segments resident at once (0 = from the cache budget)
	SegmentSteps       int // locality: anchor time steps per segment (0 = automatic)
	RotateEveryBatches int // locality: batches between two segment replacements
	FetchAheadBatches  int // batches ahead whose chunks are prefetched (-1: the default, ahead.go)

	rules rules.Rules // the job's rule set (set by NewJob from the anchor)
}

// Steps is the number of time steps in the window.
func (s *Spec) Steps() int {
	return int((s.IntervalEndMinutes-s.IntervalStartMinutes)/s.TimeResolutionMinutes) + 1
}

func (s *Spec) window() timeWindow {
	return timeWindow{
		first: s.IntervalStartMinutes / s.TimeResolutionMinutes,
		n:     s.Steps(),
		res:   s.TimeResolutionMinutes * 60,
		align: s.rules,
	}
}

// Example implements config.Spec: the shape of one example of the source's data tensor.
func (s *Spec) Example() ([]int, ring.DType) {
	if s.Role == RolePoints {
		return []int{s.Steps(), s.NearestK}, ring.Float32
	}
	return []int{s.Steps(), s.nChannels(), s.Height, s.Width}, ring.Float32
}

// nChannels is the channels of an example: one when the store has no channel axis.
func (s *Spec) nChannels() int { return max(len(s.Channels), 1) }

// The cache budget in MiB: the default when the anchor sets no cache_mb, and the range that
// cache_mb and an override (Options.CacheMB, shmloader's --cache-mb) must be in.
const (
	DefaultCacheMB = 1024
	MinCacheMB     = 16
	MaxCacheMB     = 1 << 24
)

// CheckCacheMB checks an override of the cache budget in MiB (0: no override).
func CheckCacheMB(mb int64) error {
	if mb == 0 || (mb >= MinCacheMB && mb <= MaxCacheMB) {
		return nil
	}
	return fmt.Errorf("%d MiB is out of range; expected %d to %d", mb, MinCacheMB, MaxCacheMB)
}

// Bounds on sizes that keep index arithmetic far from overflow.
const (
	maxMinutes = 100 * 366 * 24 * 60
	maxPixels  = 1 << 16
	maxK       = 1 << 16
	maxSteps   = 1 << 16
)

func init() {
	registerKind("zarr", decodeSpec, func(cfg *config.Config, opt Options) ([]Source, error) {
		j, err := NewJob(cfg, opt) // every zarr source: they share each example's t0 and place
		if err != nil {
			return nil, err
		}
		return []Source{j}, nil
	})
}

func decodeSpec(t *config.Table) config.Spec {
	d := &specDecoder{t: t, s: &Spec{Field: t.Path()}, ok: true}
	d.storeAndRole()
	d.dims()
	d.timeWindow()
	d.crop()
	d.staleness()
	d.points()
	d.siteFeatures()
	d.normalisation()
	d.clip()
	d.chunkReads()
	d.dropout()
	d.alignment()
	d.anchorKeys()
	if !d.ok {
		return nil
	}
	return d.s
}

// specDecoder reads the keys of one zarr source table into s, one group of keys per method.
// Every problem is recorded in the table (so the whole file's problems are reported at once);
// ok turns false when one makes the source unusable.
type specDecoder struct {
	t  *config.Table
	s  *Spec
	ok bool
}

// bad records a problem with key.
func (d *specDecoder) bad(key, format string, args ...any) {
	d.t.Errorf(key, format, args...)
	d.ok = false
}

// mustString reads a required non-empty string; what says what it should hold.
func (d *specDecoder) mustString(key, what string) string {
	v, good := d.t.MustString(key)
	switch {
	case !good:
		d.ok = false
	case v == "":
		d.bad(key, "empty; expected %s", what)
	}
	return v
}

// stores reads the key store: a path, or a list of paths read as one store along time
// (concat.go), each non-empty and none twice.
func (d *specDecoder) stores() []string {
	const what = "a path to a Zarr store, relative to the data root, or a list of them"
	if v, ok := d.t.Raw("store"); ok {
		if _, list := v.([]any); list {
			paths := d.t.Strings("store")
			switch {
			case len(paths) == 0:
				d.bad("store", "an empty list; expected %s", what)
			case len(paths) != len(v.([]any)):
				d.ok = false // an element that is not a string, recorded
			}
			for i, p := range paths {
				if p == "" {
					d.bad("store", "element %d is empty; expected %s", i, what)
				} else if slices.Contains(paths[:i], p) {
					d.bad("store", "%q is listed twice", p)
				}
			}
			return paths
		}
	}
	if p := d.mustString("store", what); p != "" {
		return []string{p}
	}
	return nil
}

func (d *specDecoder) mustInt(key string, min, max int64) int64 {
	v, good := d.t.MustInt(key, min, max)
	if !good {
		d.ok = false
	}
	return v
}

// storeAndRole reads where the data is and what role it plays.
func (d *specDecoder) storeAndRole() {
	s, t := d.s, d.t
	s.Stores = d.stores()
	if len(s.Stores) > 0 {
		s.Store = s.Stores[0]
	}
	s.Label = t.String("label", "")
	s.Variable = t.String("variable", "") // "": the store's only data array (stores.go)
	s.VariablesAsChannels = t.Bool("variables_as_channels", false)
	if s.VariablesAsChannels && s.Variable != "" {
		d.bad("variables_as_channels", "true with variable = %q; expected no variable (every data array is a channel)", s.Variable)
	}
	s.Role = t.String("role", RoleGrid)
	switch s.Role {
	case RoleGrid, RoleNWP, RolePoints:
	default:
		d.bad("role", "unknown role %q; expected one of %s, %s, %s", s.Role, RoleGrid, RoleNWP, RolePoints)
	}
	s.Anchor = t.Bool("anchor", false)
	if s.Anchor && s.Role == RoleNWP {
		d.bad("anchor", "an NWP source cannot be the anchor; expected anchor = true on a grid source (examples centred on its pixels) or a points source (examples centred on its systems)")
	}
}

// dims reads the optional table that maps the role's canonical axes to store dimension names.
func (d *specDecoder) dims() {
	axes, ok := roleAxes[d.s.Role]
	if !ok {
		return
	}
	sub := d.t.Sub("dims")
	if sub == nil {
		if d.t.Has("dims") {
			d.ok = false // not a table (recorded by Sub)
		}
		return
	}
	defer sub.Done() // unknown keys: not an axis of this role
	seen := map[string]string{}
	for _, ax := range axes {
		if !sub.Has(ax) {
			continue
		}
		v := sub.String(ax, "")
		switch {
		case v == "":
			d.bad("dims."+ax, "empty; expected the store's dimension name for axis %s", ax)
		case seen[v] != "":
			d.bad("dims."+ax, "%q is mapped to dims.%s already; expected one axis per dimension", v, seen[v])
		default:
			seen[v] = ax
			if d.s.Dims == nil {
				d.s.Dims = map[string]string{}
			}
			d.s.Dims[ax] = v
		}
	}
}

// timeWindow reads the resolution and the window around t0, both in minutes.
func (d *specDecoder) timeWindow() {
	s, t := d.s, d.t
	res, okR := t.MustInt("time_resolution_minutes", 1, maxMinutes)
	start, okS := t.MustInt("interval_start_minutes", -maxMinutes, maxMinutes)
	end, okE := t.MustInt("interval_end_minutes", -maxMinutes, maxMinutes)
	s.TimeResolutionMinutes, s.IntervalStartMinutes, s.IntervalEndMinutes = res, start, end
	if !okR || !okS || !okE {
		d.ok = false
		return
	}
	switch {
	case start%res != 0:
		d.bad("interval_start_minutes", "%d is not a multiple of time_resolution_minutes (%d)", start, res)
	case end%res != 0:
		d.bad("interval_end_minutes", "%d is not a multiple of time_resolution_minutes (%d)", end, res)
	case end < start:
		d.bad("interval_end_minutes", "%d is before interval_start_minutes (%d); expected an end >= the start", end, start)
	case (end-start)/res+1 > maxSteps:
		d.bad("interval_end_minutes", "the window has %d steps; expected at most %d", (end-start)/res+1, maxSteps)
	}
}

// crop reads the image size and the channels of a grid or NWP source.
func (d *specDecoder) crop() {
	s, t := d.s, d.t
	if s.Role != RoleGrid && s.Role != RoleNWP {
		return
	}
	s.Height = int(d.mustInt("image_size_pixels_height", 1, maxPixels))
	s.Width = int(d.mustInt("image_size_pixels_width", 1, maxPixels))
	if !t.Has("channels") {
		return // required when the store has a channel axis (checked when it is opened)
	}
	s.Channels = t.Strings("channels")
	seen := map[string]bool{}
	for _, c := range s.Channels {
		if seen[c] {
			d.bad("channels", "channel %q is listed twice", c)
		}
		seen[c] = true
	}
	if len(s.Channels) == 0 {
		d.bad("channels", "empty; expected at least one channel name")
	}
	if s.Role == RoleNWP && t.Has("accum_channels") {
		s.AccumChannels = t.Strings("accum_channels")
		for _, c := range s.AccumChannels {
			if !seen[c] {
				d.bad("accum_channels", "%q is not among the channels; expected a subset of channels", c)
			}
		}
	}
}

// staleness reads how old an NWP run may be at t0.
func (d *specDecoder) staleness() {
	s, t := d.s, d.t
	if s.Role != RoleNWP {
		return
	}
	s.MinStalenessMinutes = t.Int("min_staleness_minutes", 0, 0, maxMinutes)
	s.MaxStalenessMinutes = t.Int("max_staleness_minutes", 0, 0, maxMinutes)
	s.MaxStalenessSet = t.Has("max_staleness_minutes")
	if s.MaxStalenessMinutes > 0 && s.MaxStalenessMinutes < s.MinStalenessMinutes {
		d.bad("max_staleness_minutes", "%d is below min_staleness_minutes (%d); expected 0 (no limit) or at least the minimum",
			s.MaxStalenessMinutes, s.MinStalenessMinutes)
	}
}

// points reads how many systems a points source gives per example, and their ids' tensor.
func (d *specDecoder) points() {
	s, t := d.s, d.t
	if s.Role != RolePoints {
		return
	}
	s.NearestK = int(d.mustInt("nearest_k", 1, maxK))
	s.IDsTensor = t.String("ids_tensor", "")
	s.Capacity = t.String("capacity", "")
}

// normalisation reads the NaN policy and the optional per-channel mean and std.
func (d *specDecoder) normalisation() {
	s, t := d.s, d.t
	s.NaNPolicy = t.String("nan_policy", NaNKeep)
	if s.NaNPolicy != NaNKeep && s.NaNPolicy != NaNZero {
		d.bad("nan_policy", "unknown policy %q; expected %q or %q", s.NaNPolicy, NaNKeep, NaNZero)
	}
	if t.Has("nan_fill") {
		s.NaNFill, s.NaNFillValue = true, t.Float("nan_fill", 0)
		if s.NaNPolicy == NaNZero {
			d.bad("nan_fill", "set together with nan_policy = %q; expected one of them", NaNZero)
		}
		if v := s.NaNFillValue; math.IsNaN(v) || math.IsInf(float64(float32(v)), 0) {
			d.bad("nan_fill", "%v; expected a finite float32 number", v)
		}
	}
	s.NormaliseMean = t.Floats("normalise_mean")
	s.NormaliseStd = t.Floats("normalise_std")
	if t.Has("normalise_mean") && s.NormaliseMean == nil || t.Has("normalise_std") && s.NormaliseStd == nil {
		d.ok = false // not an array of numbers (recorded by Floats)
		return
	}
	switch {
	case (s.NormaliseMean == nil) != (s.NormaliseStd == nil):
		if s.NormaliseMean == nil {
			d.bad("normalise_mean", "missing; normalise_std is set, expected both or neither")
		} else {
			d.bad("normalise_std", "missing; normalise_mean is set, expected both or neither")
		}
		return
	case s.NormaliseMean == nil:
		return
	}
	want, what := len(s.Channels), "one value per channel"
	if s.Role == RolePoints {
		want, what = 1, "one value"
	}
	for _, k := range []string{"normalise_mean", "normalise_std"} {
		v := s.NormaliseMean
		if k == "normalise_std" {
			v = s.NormaliseStd
		}
		if len(v) != want && want > 0 {
			d.bad(k, "%d values; expected %d (%s)", len(v), want, what)
		}
	}
	for i, v := range s.NormaliseStd {
		if !(v > 0) || math.IsInf(v, 0) {
			d.bad("normalise_std", "element %d is %v; expected a positive finite number", i, v)
		}
	}
	for i, v := range s.NormaliseMean {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			d.bad("normalise_mean", "element %d is %v; expected a finite number", i, v)
		}
	}
}

// clip reads the optional per-channel clip bounds, applied before the normalisation
// (clip_min and clip_max): both or neither, one per channel, ±inf for a
// missing bound, each min below its max.
func (d *specDecoder) clip() {
	s, t := d.s, d.t
	if !t.Has("normalise_clip_min") && !t.Has("normalise_clip_max") {
		return
	}
	s.ClipMin, s.ClipMax = t.Floats("normalise_clip_min"), t.Floats("normalise_clip_max")
	switch {
	case s.ClipMin == nil:
		d.bad("normalise_clip_min", "missing or not an array of numbers; expected both normalise_clip_min and normalise_clip_max")
	case s.ClipMax == nil:
		d.bad("normalise_clip_max", "missing or not an array of numbers; expected both normalise_clip_min and normalise_clip_max")
	case s.NormaliseMean == nil:
		d.bad("normalise_clip_min", "set without normalise_mean; the clip belongs to the normalisation")
	case len(s.ClipMin) != len(s.NormaliseMean) || len(s.ClipMax) != len(s.NormaliseMean):
		d.bad("normalise_clip_min", "%d and %d values; expected one per normalise_mean value (%d)", len(s.ClipMin), len(s.ClipMax), len(s.NormaliseMean))
	default:
		for i := range s.ClipMin {
			if !(s.ClipMin[i] < s.ClipMax[i]) { // NaN fails too
				d.bad("normalise_clip_min", "element %d (%v) is not below normalise_clip_max's (%v)", i, s.ClipMin[i], s.ClipMax[i])
			}
		}
	}
}

// nanFill is what NaN becomes after the normalisation: ok false when it stays NaN.
func (s *Spec) nanFill() (ok bool, v float32) {
	switch {
	case s.NaNFill:
		return true, float32(s.NaNFillValue)
	case s.NaNPolicy == NaNZero:
		return true, 0
	}
	return false, 0
}

// chunkReads reads what a chunk that is missing or slow to read does, and how many chunk reads
// may be in flight.
func (d *specDecoder) chunkReads() {
	s, t := d.s, d.t
	s.MissingChunks = t.String("missing_chunks", MissingFill)
	if s.MissingChunks != MissingFill && s.MissingChunks != MissingError {
		d.bad("missing_chunks", "unknown policy %q; expected %q or %q", s.MissingChunks, MissingFill, MissingError)
	}
	s.ChunkDeadline = t.Float("chunk_deadline_s", DefaultChunkDeadlineS)
	if !(s.ChunkDeadline >= 0 && s.ChunkDeadline <= 1e6) {
		d.bad("chunk_deadline_s", "%v is out of range; expected seconds in [0, 1e6] (0: no deadline)", s.ChunkDeadline)
	}
	s.FetchDepth = int(t.Int("fetch_depth", 0, 0, 4096))
	s.FetchBufferMB = t.Int("fetch_buffer_mb", DefaultFetchBufferMB, 1, 1<<20)
}

// dropout reads the optional dropout of the latest steps.
func (d *specDecoder) dropout() {
	s, t := d.s, d.t
	if t.Has("dropout_timedeltas_minutes") {
		if v, good := t.MustInts("dropout_timedeltas_minutes", -maxMinutes, 0, 1024); good {
			s.DropoutTimedeltasMinutes = v
		} else {
			d.ok = false
		}
	}
	if raw, _ := t.Raw("dropout_fraction"); isList(raw) {
		d.dropoutList()
	} else {
		s.DropoutFraction = t.Float("dropout_fraction", 0)
	}
	switch {
	case !(s.DropoutFraction >= 0 && s.DropoutFraction <= 1):
		d.bad("dropout_fraction", "%v is out of range; expected a number in [0, 1]", s.DropoutFraction)
	case s.DropoutFraction > 0 && len(s.DropoutTimedeltasMinutes) == 0:
		d.bad("dropout_timedeltas_minutes", "missing or empty while dropout_fraction is %v; expected e.g. [-30, -15]", s.DropoutFraction)
	}
}

// dropoutList reads dropout_fraction given as a list: one probability per timedelta, their
// sum in [0, 1] (the probability of a dropout).
func (d *specDecoder) dropoutList() {
	s := d.s
	s.DropoutFractions = d.t.Floats("dropout_fraction")
	if s.DropoutFractions == nil {
		d.ok = false // not numbers (recorded by Floats)
		return
	}
	if len(s.DropoutFractions) != len(s.DropoutTimedeltasMinutes) {
		d.bad("dropout_fraction", "%d probabilities for %d dropout_timedeltas_minutes; expected one per timedelta",
			len(s.DropoutFractions), len(s.DropoutTimedeltasMinutes))
	}
	for i, f := range s.DropoutFractions {
		if !(f >= 0 && f <= 1) {
			d.bad("dropout_fraction", "element %d is %v; expected a probability in [0, 1]", i, f)
		}
		s.DropoutFraction += f
	}
	if s.DropoutFraction > 1+1e-9 {
		d.bad("dropout_fraction", "the probabilities add up to %v; expected at most 1", s.DropoutFraction)
	}
	s.DropoutFraction = min(s.DropoutFraction, 1)
}

func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

// anchorKeys reads the keys only the anchor has: the cache and the sampling mode of the job.
func (d *specDecoder) anchorKeys() {
	s, t := d.s, d.t
	if !s.Anchor {
		return
	}
	s.Rules = t.String("rules", rules.GobatchName)
	if _, err := rules.Lookup(s.Rules); err != nil {
		d.bad("rules", "%v", err)
	}
	s.CacheMB = t.Int("cache_mb", DefaultCacheMB, MinCacheMB, MaxCacheMB)
	s.Sampling = t.String("sampling", SampleAuto)
	switch s.Sampling {
	case SampleAuto, SampleRandom, SampleLocality:
	default:
		d.bad("sampling", "unknown mode %q; expected %q, %q or %q", s.Sampling, SampleAuto, SampleRandom, SampleLocality)
	}
	s.ResidentSegments = int(t.Int("resident_segments", 0, 0, 1<<16))
	s.SegmentSteps = int(t.Int("segment_steps", 0, 0, 1<<24))
	s.RotateEveryBatches = int(t.Int("rotate_every_batches", 8, 1, 1<<24))
	s.FetchAheadBatches = int(t.Int("fetch_ahead_batches", -1, 0, 1<<16))
	s.Locations = t.String("locations", "")
}

// alignment reads how the source is placed on the anchor's grid: anchor_coords or crs.
func (d *specDecoder) alignment() {
	s, t := d.s, d.t
	s.CRS = t.String("crs", "")
	if t.Has("crs") && s.CRS == "" {
		d.bad("crs", "empty; expected a coordinate reference system PROJ knows, e.g. \"EPSG:27700\"")
	}
	if !t.Has("anchor_coords") {
		return
	}
	s.AnchorCoords = t.Strings("anchor_coords")
	switch {
	case s.Anchor:
		d.bad("anchor_coords", "set on the anchor; expected it on a source placed on the anchor's grid")
	case len(s.AnchorCoords) != 2 || s.AnchorCoords[0] == "" || s.AnchorCoords[1] == "":
		d.bad("anchor_coords", "%d names; expected two arrays of the anchor's store, x then y, e.g. [\"x_osgb\", \"y_osgb\"]", len(s.AnchorCoords))
	case s.CRS != "":
		d.bad("anchor_coords", "set together with crs; expected one of them (anchor_coords already give positions in this source's coordinates)")
	}
}

// idsTensor is the name of a points source's id tensor.
func (s *Spec) idsTensor() string {
	if s.IDsTensor != "" {
		return s.IDsTensor
	}
	return s.Name + "_system"
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ", ")
}
