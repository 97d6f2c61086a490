package rules

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Rules is a rule set: the choices the generic job leaves to it. Implementations are values
// without state of their own (a rule set answers the same way for every job).
type Rules interface {
	// Name is the rule set's name, as the anchor's key rules spells it.
	Name() string
	// Check says whether the rule set gives a source's keys a meaning: "" when it does, else
	// the key at fault and why (the job refuses the configuration naming the source's key).
	Check(s SourceKeys) (key, why string)
	// DropoutFills is the steps [from, to) of window w that a dropout with cut-off cut (seconds
	// relative to t0, <= 0; NoDropout for none) fills.
	DropoutFills(w Window, cut int64) (from, to int)
	// WindowT0 is the time a time series' window is laid from for t0, on a source of time
	// step res (seconds): t0 itself, so that a t0 off the source's time grid has no window;
	// or t0 rounded onto the grid by the rule set's rule.
	WindowT0(t0, res int64) int64
	// SiteCrop is how a site-anchored job places its crops: nil on the anchor pixel nearest
	// each site (the other sources where that pixel falls); else every gridded source's crop
	// is cut around the site itself in the source's own coordinates, each axis's first index
	// chosen by the rule, nothing clamped, and a site some source cannot crop is left out.
	SiteCrop() AxisCrop
	// NWPTargets is an NWP source's window rule: nil for one run per example (the latest old
	// enough that has every step of the window), else a rule that takes each target time of
	// the window from a run of its own choosing. A configuration the rule refuses is a
	// *KeyError naming the configuration field at fault.
	NWPTargets(n NWP) (Targets, error)
	// Pairs is the sample space of a site-anchored job: nil for every location with every t0
	// candidate (an anchor time at which every source has its window), else the rule set's
	// own (t0, location) pairs, found from the sources' times. A sample space the rule set
	// refuses is a *KeyError naming the configuration field at fault.
	Pairs(in *SpaceInput) (PairSpace, error)
	// FillQuotient fills an example's row of a quotient (a points source divided by its
	// capacity) that has a NaN: fill is the source's NaN fill value.
	FillQuotient(row []float32, fill float32)
	// FillQuotient64 is FillQuotient for a float64 quotient (a store of float64 values).
	FillQuotient64(row []float64, fill float64)
	// Layout is the axis order and the extra tensors of the job's batches.
	Layout() Layout
	// View is how the trainer sees a batch (nested keys, constants); nil: flat.
	View(b Batch) View
}

// NoDropout is the cut-off of an example without dropout.
const NoDropout = math.MaxInt64

// SourceKeys are the keys of a source's configuration that a rule set may give no meaning.
type SourceKeys struct {
	Role            string // "grid", "nwp" or "points"
	DropoutFraction float64
	AccumChannels   []string
}

// Window is a time window relative to t0: N steps Res seconds apart, the first First steps
// from t0 (First may be negative).
type Window struct {
	First int64
	N     int
	Res   int64
}

// StepsUpTo is the number of leading steps at or before t0 + off (off in seconds).
func (w Window) StepsUpTo(off int64) int {
	if off == NoDropout {
		return w.N
	}
	n := FloorDiv(off, w.Res) - w.First + 1
	return int(max(0, min(n, int64(w.N))))
}

// FloorDiv is a / b rounded toward minus infinity.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// LatestAtOrBefore returns the largest i with sorted[i] <= t, or -1 (sorted ascending).
func LatestAtOrBefore(sorted []int64, t int64) int {
	lo, hi := 0, len(sorted) // invariant: sorted[:lo] <= t < sorted[hi:]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if sorted[m] <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// AxisCrop is the first index along one axis of a crop of size pixels around position v, in
// the order of coords (the source's coordinate along that axis, in store order: ascending or
// descending); -1 and why when the rule has no crop there.
type AxisCrop func(coords []float64, v float64, size int) (start int, why string)

// NWP is what an NWP source's window rule is made from.
type NWP struct {
	Field   string  // "source[1]", for errors
	Window  Window  // the configured window
	Targets int     // target times gathered: Window.N, + 1 with accumulated channels
	Steps   []int64 // the store's lead times, seconds, ascending
	// IntervalEnd is the window's end relative to t0, seconds; MaxStaleness the configured
	// max_staleness_minutes in seconds when MaxStalenessSet.
	IntervalEnd     int64
	MaxStaleness    int64
	MaxStalenessSet bool
}

// Targets is a window rule that takes each target time of an NWP window from a run of its own
// choosing (Rules.NWPTargets).
type Targets interface {
	// Start is the first target time of the window at t0; the others follow Window.Res apart.
	Start(t0 int64) int64
	// Pick chooses, for each of the n target times start + k*res, the run (an index of inits,
	// ascending init times) and the step (an index of steps) it is read from, among the runs
	// with init time at or before avail (t0, or t0 moved by the example's dropout); missing is
	// -1 when every target has both, else the first k that lacks one. With run and step nil it
	// only checks.
	Pick(inits, steps []int64, start, avail int64, n int, run, step []int) (missing int)
	// MaxStaleness is how much older than t0 a run may be, seconds.
	MaxStaleness() int64
	// OldestRun is the earliest init time a window starting at start may use.
	OldestRun(steps []int64, start int64) int64
	// Note is what a user should know about this window before the first batch, where the
	// rule set follows its reference only in part (a sentence, shown once); "" for nothing.
	Note() string
	// Finer is the rule for the same window laid on the store's steps where they are finer
	// than the resolution, as the rule set's reference lays a window that one run covers: the
	// same first target, then a target every spacing seconds. nil, 0 when the rule set keeps
	// the resolution's steps. The job lays its windows so only when every t0 of its sample
	// space is covered by one run (a batch has one shape).
	Finer() (fine Targets, spacing int64)
}

// KeyError is a configuration a rule refuses: the configuration field at fault
// ("source[1].max_staleness_minutes") and why.
type KeyError struct{ Field, Msg string }

func (e *KeyError) Error() string { return e.Field + ": " + e.Msg }

// SpaceInput is what a rule set's sample space is found from (Rules.Pairs): the times of the
// anchor, of every NWP source and of the locations source, and the range of t0s allowed. Times
// are Unix seconds, ascending.
type SpaceInput struct {
	Anchor        *Series // the anchor grid; nil when the anchor is the locations source itself
	NWP           []NWPSeries
	Locations     LocationSeries
	T0Periods     [][2]int64 // the t0 periods ([batch] time_periods or t0_start .. t0_end), both ends included, ascending and apart; nil: none
	T0PeriodsNote string     // " within time_periods (...)" for messages; "" without periods
	// Valid says whether every source's window, under the rule set's own window rules, can be
	// laid at t0: a t0 the rule set's reference accepts but then cannot give a sample of the
	// batch's shape for (an NWP window whose last target no run reaches) is left out of the
	// pairs. nil: every t0.
	Valid func(t0 int64) bool
}

// Series is one source's time coordinate and window.
type Series struct {
	Field, Name string // "source[0]", the source's name
	Times       []int64
	Window      Window
}

// NWPSeries is an NWP source's runs: its init times, its window's start relative to t0 and
// first lead time (seconds), the staleness limit of its window rule (Targets.MaxStaleness) and
// its dropout timedeltas (minutes, <= 0).
type NWPSeries struct {
	Field, Name      string
	Inits            []int64
	IntervalStart    int64
	FirstStep        int64
	MaxStaleness     int64
	DropoutTimedelta []int64
}

// LocationSeries is the locations source: its times and window, each system's id, the
// system of each of the job's locations, and Scan, which calls valid for every time a system
// has a value (in ascending time for each system) and nan(sys) for every missing one.
type LocationSeries struct {
	Series
	IDs    []int64 // per system
	Sites  []int32 // the system of each location
	Scan   func(valid func(sys int, t int64), nan func(sys int)) error
	ResMin int64 // the resolution in minutes, for messages
}

// PairSpace is a rule set's (t0, location) pairs, numbered 0 .. N()-1.
type PairSpace interface {
	N() uint64
	// Pair is pair i: its t0 and its location (an index of SpaceInput.Locations.Sites).
	Pair(i uint64) (t0 int64, loc int)
	// Grid is the t0s and the locations (indices of SpaceInput.Locations.Sites, ascending) of
	// a sample space that is exactly those t0s times those locations (every location but
	// those without pairs at every t0); nil, nil otherwise. Concurrent batches need it.
	Grid() (t0s []int64, locs []int)
	// Info describes the pairs for the plan.
	Info() SpaceInfo
}

// TimeOrdered is implemented by a PairSpace whose pairs are numbered in runs, each run's pairs
// in ascending t0 (ocf's per-location pairs: a location's own t0s, location by location). The
// pairs of a span of time are then one index range of each run, so the epochs' block shuffle
// and locality sampling can draw them by time segments without a table of them.
type TimeOrdered interface {
	// Runs is the number of runs; run k's pairs are [Before(k, MinInt64), Before(k, MaxInt64)).
	Runs() int
	// Before is the index of run k's first pair whose t0 is at or after t (unix seconds), or
	// the end of run k when it has none.
	Before(k int, t int64) uint64
}

// SpaceInfo describes a sample space: its mode (the rule set's word), pairs, the filled
// periods they come from, the locations that take part, and the t0s every location shares (0
// when they do not share them).
type SpaceInfo struct {
	Rules     string `json:"rules"`
	Mode      string `json:"mode"`
	Pairs     uint64 `json:"pairs"`
	Periods   int    `json:"periods"`
	Locations int    `json:"locations"`
	T0s       uint64 `json:"t0s,omitempty"`
}

// Layout is how a rule set lays a batch out, beyond the sources' data in configuration order.
type Layout struct {
	// XYIncreasing: the examples of gridded sources (grid, nwp) are (time, channel, x, y) with
	// both coordinates increasing; else (time, channel, y, x), each axis in the store's order.
	XYIncreasing bool
	// OneSystemFlat: a points source of one system per example is (time,), not (time, 1).
	OneSystemFlat bool
	// T0Float: the t0 tensor is float64 Unix seconds; else int64.
	T0Float bool
	// WindowTensors: a site-anchored batch also has the anchor grid's window times and crop
	// coordinates (none with a points anchor) and the locations' window times and longitude
	// and latitude.
	WindowTensors bool
}

// Batch is what a rule set's view may refer to: the tensor of the anchor, the NWP sources
// (their tensor names and channels, and whether they have init, step and target time tensors,
// <name>_init_time_utc, <name>_step, <name>_target_time_utc), and the locations source's window
// when site-anchored.
type Batch struct {
	Anchor    string // the anchor grid's tensor; "" when the anchor is a points source
	NWP       []NWPTensor
	Locations *Window // nil: not site-anchored
}

// NWPTensor is one NWP source of a Batch.
type NWPTensor struct {
	Name     string // the tensor
	Label    string // what the view calls it: the source's label, else its name
	Channels []string
	Times    bool
}

// The suffixes of an NWP source's time tensors (Batch.NWP[i].Times).
const (
	InitSuffix   = "_init_time_utc"   // float64 (B, T): nanoseconds since the epoch
	StepSuffix   = "_step"            // int64 (B, T): whole hours, truncated toward zero
	TargetSuffix = "_target_time_utc" // float64 (B, T): nanoseconds since the epoch
)

var (
	mu  sync.Mutex
	all = map[string]Rules{}
)

// Register makes a rule set known by its name. It panics when the name is taken (a programming
// error: rule sets register from init functions).
func Register(r Rules) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := all[r.Name()]; dup {
		panic("rules: " + r.Name() + " registered twice")
	}
	all[r.Name()] = r
}

// Lookup is the rule set named name, or an error naming those this program knows.
func Lookup(name string) (Rules, error) {
	mu.Lock()
	defer mu.Unlock()
	if r, ok := all[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("unknown rules %q; expected %s (the rule sets this program knows)", name, quoted(names()))
}

// Accepting lists the names of the rule sets that give keys s a meaning, quoted, for messages.
func Accepting(s SourceKeys) string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, n := range names() {
		if k, _ := all[n].Check(s); k == "" {
			out = append(out, n)
		}
	}
	return quoted(out)
}

func names() []string {
	out := make([]string, 0, len(all))
	for n := range all {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// quoted writes names as alternatives: "a", "a" or "b", "a", "b" or "c"; "none" for none.
func quoted(ns []string) string {
	if len(ns) == 0 {
		return "none"
	}
	q := make([]string, len(ns))
	for i, n := range ns {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
