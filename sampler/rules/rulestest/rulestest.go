// Package rulestest is one test suite for every rule set (rules.Rules): what the generic job
// relies on whatever the rule set, checked on generated windows, coordinates, runs and series.
// Each rule set's package runs it on its own (gobatch's in package rules, ocf-data-sampler's
// in package ocf), as bbolt and iceoryx2 run one suite per implementation. Tests only.
package rulestest

import (
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/gobatch/gobatch/sampler/rules"
)

// Run runs the suite on r.
func Run(t *testing.T, r rules.Rules) {
	t.Run("Registered", func(t *testing.T) { registered(t, r) })
	t.Run("DropoutFills", func(t *testing.T) { dropoutFills(t, r) })
	t.Run("WindowT0", func(t *testing.T) { windowT0(t, r) })
	t.Run("FillQuotient", func(t *testing.T) { fillQuotient(t, r) })
	t.Run("View", func(t *testing.T) { view(t, r) })
	t.Run("SiteCrop", func(t *testing.T) { siteCrop(t, r) })
	t.Run("NWPTargets", func(t *testing.T) { nwpTargets(t, r) })
	t.Run("Pairs", func(t *testing.T) { pairs(t, r) })
}

// A rule set is found by its name.
func registered(t *testing.T, r rules.Rules) {
	got, err := rules.Lookup(r.Name())
	if err != nil || got != r {
		t.Fatalf("Lookup(%q) = %v, %v; want the rule set itself", r.Name(), got, err)
	}
	for _, k := range []rules.SourceKeys{{Role: "grid"}, {Role: "points", DropoutFraction: 0.5}} {
		if key, why := r.Check(k); key != "" {
			t.Errorf("Check(%+v) refuses %s (%s); every rule set accepts grid and points dropout", k, key, why)
		}
	}
}

// The steps a dropout fills are a range of the window, none without a dropout, and a later
// cut-off never fills a step an earlier one keeps.
func dropoutFills(t *testing.T, r rules.Rules) {
	rng := rand.New(rand.NewSource(1))
	for range 2000 {
		w := rules.Window{First: int64(-rng.Intn(12)), N: 1 + rng.Intn(16), Res: int64(300 * (1 + rng.Intn(6)))}
		if from, to := r.DropoutFills(w, rules.NoDropout); from != to {
			t.Fatalf("%+v without dropout fills [%d, %d)", w, from, to)
		}
		cut := -int64(rng.Intn(5000))
		from, to := r.DropoutFills(w, cut)
		if from < 0 || from > to || to > w.N {
			t.Fatalf("%+v cut %d: [%d, %d) is not a range of the window", w, cut, from, to)
		}
		if from != w.StepsUpTo(cut) {
			t.Fatalf("%+v cut %d: fills from step %d, but %d steps are at or before the cut-off", w, cut, from, w.StepsUpTo(cut))
		}
		if later, _ := r.DropoutFills(w, cut+w.Res); later < from {
			t.Fatalf("%+v: cut %d fills from %d, the later cut %d from %d", w, cut, from, cut+w.Res, later)
		}
	}
}

// A filled row has no NaN left and its finite values unchanged.
func fillQuotient(t *testing.T, r rules.Rules) {
	inf := float32(math.Inf(1))
	row := []float32{1, float32(math.NaN()), -2.5, inf, -inf, 0, float32(math.NaN())}
	r.FillQuotient(row, 7)
	for i, v := range row {
		if v != v {
			t.Fatalf("element %d is NaN after the fill: %v", i, row)
		}
	}
	if row[0] != 1 || row[1] != 7 || row[2] != -2.5 || row[5] != 0 || row[6] != 7 {
		t.Fatalf("fill 7: %v", row)
	}
	row64 := []float64{1, math.NaN(), -2.5, math.Inf(1), -math.Inf(1), 0, math.NaN()}
	r.FillQuotient64(row64, 7)
	for i, v := range row64 {
		if v != v {
			t.Fatalf("float64 element %d is NaN after the fill: %v", i, row64)
		}
	}
	if row64[0] != 1 || row64[1] != 7 || row64[2] != -2.5 || row64[5] != 0 || row64[6] != 7 {
		t.Fatalf("float64 fill 7: %v", row64)
	}
}

// A view names only tensors of the batch, has keys of 1 to 8 non-empty parts, none a prefix of
// another, and places each tensor once.
func view(t *testing.T, r rules.Rules) {
	loc := rules.Window{First: -4, N: 7, Res: 1800}
	for _, b := range []rules.Batch{
		{Anchor: "sat"},
		{Anchor: "sat", NWP: []rules.NWPTensor{{Name: "ukv", Channels: []string{"t", "dswrf"}, Times: true}, {Name: "ecmwf", Channels: []string{"t2m"}}}, Locations: &loc},
	} {
		tensors := map[string]bool{b.Anchor: true}
		for _, n := range b.NWP {
			tensors[n.Name] = true
			if n.Times {
				tensors[n.Name+rules.InitSuffix], tensors[n.Name+rules.StepSuffix], tensors[n.Name+rules.TargetSuffix] = true, true, true
			}
		}
		var keys [][]string
		placed := map[string]bool{}
		for i, it := range r.View(b) {
			if len(it.Key) < 1 || len(it.Key) > 8 || slices.Contains(it.Key, "") {
				t.Fatalf("view[%d].key %q", i, it.Key)
			}
			for _, k := range keys {
				if n := min(len(k), len(it.Key)); slices.Equal(k[:n], it.Key[:n]) {
					t.Fatalf("view[%d].key %q is, holds or lies under %q", i, it.Key, k)
				}
			}
			keys = append(keys, it.Key)
			switch {
			case it.Tensor != "" && (!tensors[it.Tensor] || placed[it.Tensor]):
				t.Fatalf("view[%d] places tensor %q, not a tensor of the batch or placed twice", i, it.Tensor)
			case it.Tensor == "" && !it.HasStrings && it.Int == nil:
				t.Fatalf("view[%d] places nothing", i)
			}
			placed[it.Tensor] = true
		}
	}
}

// A site crop rule's crop lies inside the axis and holds the position; where it has none it
// says why.
func siteCrop(t *testing.T, r rules.Rules) {
	crop := r.SiteCrop()
	if crop == nil {
		return // crops on the anchor pixel nearest each site: the job's own rule
	}
	rng := rand.New(rand.NewSource(2))
	for range 3000 {
		n, size := 2+rng.Intn(40), 2*(1+rng.Intn(6))
		c := make([]float64, n)
		x := rng.Float64() * 100
		for i := range c {
			x += 0.5 + rng.Float64()*3
			c[i] = x
		}
		if rng.Intn(2) == 0 {
			slices.Reverse(c)
		}
		lo, hi := min(c[0], c[n-1]), max(c[0], c[n-1])
		v := lo - 5 + rng.Float64()*(hi-lo+10)
		start, why := crop(c, v, size)
		if start < 0 {
			if why == "" {
				t.Fatalf("coords %v v %v size %d: no crop and no reason", c, v, size)
			}
			continue
		}
		if start+size > n {
			t.Fatalf("coords %v v %v size %d: crop [%d, %d) leaves the axis", c, v, size, start, start+size)
		}
		cmin, cmax := min(c[start], c[start+size-1]), max(c[start], c[start+size-1])
		if v < cmin-3.5 || v > cmax+3.5 { // within a pixel of the crop
			t.Fatalf("coords %v v %v size %d: crop [%d, %d) spans %v .. %v", c, v, size, start, start+size, cmin, cmax)
		}
	}
}

// A per-target window takes each target time from a run at or before t0_available, at the
// lead that reaches it, and says which target lacks one otherwise.
func nwpTargets(t *testing.T, r rules.Rules) {
	const h = 3600
	steps := make([]int64, 13)
	for i := range steps {
		steps[i] = int64(i) * h
	}
	w := rules.Window{First: -1, N: 4, Res: h}
	tg, err := r.NWPTargets(rules.NWP{Field: "source[1]", Window: w, Targets: w.N, Steps: steps, IntervalEnd: 2 * h})
	if err != nil || tg == nil {
		if err != nil {
			t.Fatalf("NWPTargets: %v", err)
		}
		return // one run per example: the job's own rule
	}
	if tg.MaxStaleness() < 0 {
		t.Fatalf("MaxStaleness %d", tg.MaxStaleness())
	}
	inits := []int64{0, 6 * h, 12 * h, 18 * h, 24 * h}
	run, step := make([]int, w.N), make([]int, w.N)
	rng := rand.New(rand.NewSource(3))
	picked := 0
	for range 500 {
		t0 := int64(rng.Intn(30*4)) * 900
		avail := t0 - int64(rng.Intn(3))*3*h
		start := tg.Start(t0)
		missing := tg.Pick(inits, steps, start, avail, w.N, run, step)
		if missing >= w.N {
			t.Fatalf("t0 %d: missing %d of %d targets", t0, missing, w.N)
		}
		if missing >= 0 {
			continue
		}
		picked++
		for k := range w.N {
			if got := inits[run[k]] + steps[step[k]]; got != start+int64(k)*w.Res || inits[run[k]] > avail {
				t.Fatalf("t0 %d avail %d target %d: run %d + step %d = %d, want %d from a run at or before %d",
					t0, avail, k, inits[run[k]], steps[step[k]], got, start+int64(k)*w.Res, avail)
			}
		}
	}
	if picked == 0 {
		t.Fatal("no t0 had a window: the suite proves nothing")
	}
}

// A rule set's own pairs are distinct, at valid locations, and when it says every location
// shares the same t0s they are exactly those t0s times the locations; with an anchor grid and
// with the locations as the anchor (no grid).
func pairs(t *testing.T, r rules.Rules) {
	for _, grid := range []bool{true, false} {
		pairsOf(t, r, grid)
	}
}

func pairsOf(t *testing.T, r rules.Rules, grid bool) {
	const res = 1800
	times := make([]int64, 200)
	for i := range times {
		times[i] = int64(i) * res
	}
	w := rules.Window{First: -4, N: 5, Res: res}
	ids := []int64{3, 5, 9}
	in := &rules.SpaceInput{
		Locations: rules.LocationSeries{Series: rules.Series{Field: "source[2]", Name: "pv", Times: times, Window: w},
			IDs: ids, Sites: []int32{0, 1, 2}, ResMin: res / 60,
			Scan: func(valid func(int, int64), nan func(int)) error {
				for _, ts := range times {
					for s := range ids {
						if s == 1 && ts > 100*res {
							nan(s)
						} else {
							valid(s, ts)
						}
					}
				}
				return nil
			}},
	}
	if grid {
		in.Anchor = &rules.Series{Field: "source[0]", Name: "sat", Times: times, Window: w}
	}
	space, err := r.Pairs(in)
	if err != nil || space == nil {
		if err != nil {
			t.Fatalf("Pairs: %v", err)
		}
		return // every location with every t0 candidate: the job's own sample space
	}
	seen := map[[2]int64]bool{}
	for i := range space.N() {
		t0, loc := space.Pair(i)
		if loc < 0 || loc >= len(in.Locations.Sites) || seen[[2]int64{t0, int64(loc)}] {
			t.Fatalf("pair %d = (%d, %d): not a location or a repeat", i, t0, loc)
		}
		seen[[2]int64{t0, int64(loc)}] = true
	}
	if info := space.Info(); info.Pairs != space.N() || info.Rules != r.Name() {
		t.Fatalf("Info %+v, want %d pairs of rules %q", info, space.N(), r.Name())
	}
	if ts, ok := space.(rules.TimeOrdered); ok {
		timeOrdered(t, space, ts)
	}
	if t0s, locs := space.Grid(); t0s != nil {
		if uint64(len(t0s)*len(locs)) != space.N() {
			t.Fatalf("a grid of %d t0s times %d locations, but %d pairs", len(t0s), len(locs), space.N())
		}
		for i := range space.N() {
			t0, loc := space.Pair(i)
			if !slices.Contains(t0s, t0) || !slices.Contains(locs, loc) {
				t.Fatalf("pair %d = (%d, %d) is not on the grid of t0s and locations", i, t0, loc)
			}
		}
	}
}

// timeOrdered: the runs of a TimeOrdered space tile its pairs in order, each run's t0s
// ascend, and Before(k, t) is run k's first pair at or after t.
func timeOrdered(t *testing.T, space rules.PairSpace, ts rules.TimeOrdered) {
	next := uint64(0)
	for k := range ts.Runs() {
		lo, hi := ts.Before(k, math.MinInt64), ts.Before(k, math.MaxInt64)
		if lo != next || hi < lo {
			t.Fatalf("run %d is pairs [%d, %d); want it to start at %d", k, lo, hi, next)
		}
		for i := lo; i < hi; i++ {
			t0, _ := space.Pair(i)
			if i > lo {
				if prev, _ := space.Pair(i - 1); prev >= t0 {
					t.Fatalf("run %d: pair %d at t0 %d after pair %d at %d; want ascending t0s", k, i, t0, i-1, prev)
				}
			}
			for _, at := range []int64{t0, t0 + 1, t0 - 1} {
				want := lo + uint64(sort.Search(int(hi-lo), func(j int) bool { w, _ := space.Pair(lo + uint64(j)); return w >= at }))
				if got := ts.Before(k, at); got != want {
					t.Fatalf("run %d: Before(%d) = %d, want %d", k, at, got, want)
				}
			}
		}
		next = hi
	}
	if next != space.N() {
		t.Fatalf("the runs hold %d of the %d pairs", next, space.N())
	}
}

// windowT0: a t0 on a source's grid lays its window from itself; one off the grid from itself
// (no window) or from a time of the grid at most one step later, never earlier.
func windowT0(t *testing.T, r rules.Rules) {
	const res = 900
	for _, t0 := range []int64{0, 900, -900, 1609459200, 1609459200 + 300, 1609459200 + 899, -300, 7} {
		got := r.WindowT0(t0, res)
		switch {
		case t0%res == 0 && got != t0:
			t.Errorf("WindowT0(%d, %d) = %d: a t0 on the grid must stay", t0, res, got)
		case got != t0 && (got < t0 || got-t0 >= res || got%res != 0):
			t.Errorf("WindowT0(%d, %d) = %d: want t0, or the grid's next time after it", t0, res, got)
		}
	}
}
