package sampler

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/gobatch/gobatch/config"
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

// Sampling modes (anchor source, key "sampling").
const (
	SampleAuto     = "auto"     // random if the decoded data fits in the cache, else locality
	SampleRandom   = "random"   // every example drawn from all t0 candidates
	SampleLocality = "locality" // examples drawn from a rotating resident set of time segments
)

// Spec is a [[source]] table with kind = "zarr", decoded and checked as far as possible
// without opening the store. The keys follow ocf-data-sampler's vocabulary.
type Spec struct {
	Index int    // position among the sources (set by the job)
	Name  string // tensor name (set by the job)
	Field string // "source[2]", for messages

	Store    string // path relative to the data root
	Variable string // the data array in the store
	Role     string // RoleGrid, RoleNWP or RolePoints
	Anchor   bool   // the locations are drawn from this source's grid (RoleGrid)

	TimeResolutionMinutes int64
	IntervalStartMinutes  int64
	IntervalEndMinutes    int64

	Height, Width int      // image_size_pixels_height/_width (grid, nwp)
	Channels      []string // selection by name (grid, nwp)

	MinStalenessMinutes int64 // nwp: the run's init time is at least this much older than t0
	MaxStalenessMinutes int64 // nwp: and at most this much older (0 = no limit)

	NearestK  int    // points: systems per example
	IDsTensor string // points: name of the int64 [k] tensor of system ids (default <name>_system)

	NaNPolicy     string
	NormaliseMean []float64 // per channel (or one value for points); empty = none
	NormaliseStd  []float64

	DropoutTimedeltasMinutes []int64 // each <= 0
	DropoutFraction          float64

	// Anchor only: the cache and the sampling mode of the whole job.
	CacheMB            int64
	Sampling           string
	ResidentSegments   int // locality: segments resident at once (0 = from the cache budget)
	SegmentSteps       int // locality: anchor time steps per segment (0 = automatic)
	RotateEveryBatches int // locality: batches between two segment replacements
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
	}
}

// Example implements config.Spec: the shape of one example of the source's data tensor.
func (s *Spec) Example() ([]int, config.DType) {
	if s.Role == RolePoints {
		return []int{s.Steps(), s.NearestK}, config.Float32
	}
	return []int{s.Steps(), len(s.Channels), s.Height, s.Width}, config.Float32
}

// DefaultCacheMB is the cache budget when the anchor sets none.
const DefaultCacheMB = 1024

// Bounds on sizes that keep index arithmetic far from overflow.
const (
	maxMinutes = 100 * 366 * 24 * 60
	maxPixels  = 1 << 16
	maxK       = 1 << 16
	maxSteps   = 1 << 16
)

func init() { config.RegisterKind("zarr", decodeSpec) }

func decodeSpec(t *config.Table) config.Spec {
	s := &Spec{Field: t.Path()}
	ok := true
	bad := func(key, format string, args ...any) {
		t.Errorf(key, format, args...)
		ok = false
	}
	var good bool
	if s.Store, good = t.MustString("store"); !good {
		ok = false
	} else if s.Store == "" {
		bad("store", "empty; expected a path to a Zarr store, relative to the data root")
	}
	if s.Variable, good = t.MustString("variable"); !good {
		ok = false
	} else if s.Variable == "" {
		bad("variable", "empty; expected the name of the data array in the store")
	}
	s.Role = t.String("role", RoleGrid)
	switch s.Role {
	case RoleGrid, RoleNWP, RolePoints:
	default:
		bad("role", "unknown role %q; expected one of %s, %s, %s", s.Role, RoleGrid, RoleNWP, RolePoints)
	}
	s.Anchor = t.Bool("anchor", false)
	if s.Anchor && s.Role != RoleGrid {
		bad("anchor", "only a source with role = %q can be the anchor (this one has role %q)", RoleGrid, s.Role)
	}

	var res int64
	if res, good = t.MustInt("time_resolution_minutes", 1, maxMinutes); good {
		s.TimeResolutionMinutes = res
	} else {
		ok = false
	}
	start, okS := t.MustInt("interval_start_minutes", -maxMinutes, maxMinutes)
	end, okE := t.MustInt("interval_end_minutes", -maxMinutes, maxMinutes)
	s.IntervalStartMinutes, s.IntervalEndMinutes = start, end
	if !okS || !okE {
		ok = false
	} else if res > 0 {
		switch {
		case start%res != 0:
			bad("interval_start_minutes", "%d is not a multiple of time_resolution_minutes (%d)", start, res)
		case end%res != 0:
			bad("interval_end_minutes", "%d is not a multiple of time_resolution_minutes (%d)", end, res)
		case end < start:
			bad("interval_end_minutes", "%d is before interval_start_minutes (%d); expected an end >= the start", end, start)
		case (end-start)/res+1 > maxSteps:
			bad("interval_end_minutes", "the window has %d steps; expected at most %d", (end-start)/res+1, maxSteps)
		}
	}

	if s.Role == RoleGrid || s.Role == RoleNWP {
		if h, good := t.MustInt("image_size_pixels_height", 1, maxPixels); good {
			s.Height = int(h)
		} else {
			ok = false
		}
		if w, good := t.MustInt("image_size_pixels_width", 1, maxPixels); good {
			s.Width = int(w)
		} else {
			ok = false
		}
		if !t.Has("channels") {
			bad("channels", "missing required key; expected an array of channel names, e.g. channels = [\"IR_108\"]")
		} else {
			s.Channels = t.Strings("channels")
			seen := map[string]bool{}
			for _, c := range s.Channels {
				if seen[c] {
					bad("channels", "channel %q is listed twice", c)
				}
				seen[c] = true
			}
			if len(s.Channels) == 0 {
				bad("channels", "empty; expected at least one channel name")
			}
		}
	}
	if s.Role == RoleNWP {
		s.MinStalenessMinutes = t.Int("min_staleness_minutes", 0, 0, maxMinutes)
		s.MaxStalenessMinutes = t.Int("max_staleness_minutes", 0, 0, maxMinutes)
		if s.MaxStalenessMinutes > 0 && s.MaxStalenessMinutes < s.MinStalenessMinutes {
			bad("max_staleness_minutes", "%d is below min_staleness_minutes (%d); expected 0 (no limit) or at least the minimum",
				s.MaxStalenessMinutes, s.MinStalenessMinutes)
		}
	}
	if s.Role == RolePoints {
		if k, good := t.MustInt("nearest_k", 1, maxK); good {
			s.NearestK = int(k)
		} else {
			ok = false
		}
		s.IDsTensor = t.String("ids_tensor", "")
	}

	s.NaNPolicy = t.String("nan_policy", NaNKeep)
	if s.NaNPolicy != NaNKeep && s.NaNPolicy != NaNZero {
		bad("nan_policy", "unknown policy %q; expected %q or %q", s.NaNPolicy, NaNKeep, NaNZero)
	}
	wantNorm := len(s.Channels)
	if s.Role == RolePoints {
		wantNorm = 1
	}
	s.NormaliseMean = floats(t, "normalise_mean", &ok)
	s.NormaliseStd = floats(t, "normalise_std", &ok)
	switch {
	case (s.NormaliseMean == nil) != (s.NormaliseStd == nil):
		if s.NormaliseMean == nil {
			bad("normalise_mean", "missing; normalise_std is set, expected both or neither")
		} else {
			bad("normalise_std", "missing; normalise_mean is set, expected both or neither")
		}
	case s.NormaliseMean != nil:
		for _, k := range []string{"normalise_mean", "normalise_std"} {
			v := s.NormaliseMean
			if k == "normalise_std" {
				v = s.NormaliseStd
			}
			if len(v) != wantNorm && wantNorm > 0 {
				what := "one value per channel"
				if s.Role == RolePoints {
					what = "one value"
				}
				bad(k, "%d values; expected %d (%s)", len(v), wantNorm, what)
			}
		}
		for i, v := range s.NormaliseStd {
			if !(v > 0) || math.IsInf(v, 0) {
				bad("normalise_std", "element %d is %v; expected a positive finite number", i, v)
			}
		}
		for i, v := range s.NormaliseMean {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				bad("normalise_mean", "element %d is %v; expected a finite number", i, v)
			}
		}
	}

	if t.Has("dropout_timedeltas_minutes") {
		if v, good := t.MustInts("dropout_timedeltas_minutes", -maxMinutes, 0, 1024); good {
			s.DropoutTimedeltasMinutes = v
		} else {
			ok = false
		}
	}
	s.DropoutFraction = t.Float("dropout_fraction", 0)
	switch {
	case !(s.DropoutFraction >= 0 && s.DropoutFraction <= 1):
		bad("dropout_fraction", "%v is out of range; expected a number in [0, 1]", s.DropoutFraction)
	case s.DropoutFraction > 0 && len(s.DropoutTimedeltasMinutes) == 0:
		bad("dropout_timedeltas_minutes", "missing or empty while dropout_fraction is %v; expected e.g. [-30, -15]", s.DropoutFraction)
	case s.DropoutFraction > 0 && s.Role == RoleNWP:
		bad("dropout_fraction", "dropout of NWP runs is not supported; expected it on a grid or points source")
	}

	if s.Anchor {
		s.CacheMB = t.Int("cache_mb", DefaultCacheMB, 16, 1<<24)
		s.Sampling = t.String("sampling", SampleAuto)
		switch s.Sampling {
		case SampleAuto, SampleRandom, SampleLocality:
		default:
			bad("sampling", "unknown mode %q; expected %q, %q or %q", s.Sampling, SampleAuto, SampleRandom, SampleLocality)
		}
		s.ResidentSegments = int(t.Int("resident_segments", 0, 0, 1<<16))
		s.SegmentSteps = int(t.Int("segment_steps", 0, 0, 1<<24))
		s.RotateEveryBatches = int(t.Int("rotate_every_batches", 8, 1, 1<<24))
	}
	if !ok {
		return nil
	}
	return s
}

// floats reads an optional array of numbers.
func floats(t *config.Table, key string, ok *bool) []float64 {
	v, present := t.Raw(key)
	if !present {
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		t.Errorf(key, "expected an array of numbers")
		*ok = false
		return nil
	}
	out := make([]float64, len(arr))
	for i, e := range arr {
		switch x := e.(type) {
		case float64:
			out[i] = x
		case int64:
			out[i] = float64(x)
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				t.Errorf(key, "element %d: expected a number, got %s", i, x)
				*ok = false
			}
			out[i] = f
		default:
			t.Errorf(key, "element %d: expected a number", i)
			*ok = false
		}
	}
	return out
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
