package ocf

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/internal/ocfref"
	"github.com/gobatch/gobatch/sampler/rules"
)

// Each rule of ocf's rule set by itself (the job-level tests are sampler's and
// python/tests/test_ocf_*.py's, against ocf-data-sampler itself).

// The crop index rule of ocf-data-sampler 1.0.24's select_spatial_slice_pixels, written out by
// hand for small axes (the Python tests compare whole samples with ocf-data-sampler itself).
func TestCropStart(t *testing.T) {
	asc := []float64{0, 10, 20, 30, 40, 50, 60, 70}
	desc := []float64{70, 60, 50, 40, 30, 20, 10, 0}
	cases := []struct {
		name  string
		c     []float64
		v     float64
		size  int
		start int    // store index; -1: refused
		why   string // part of the reason when refused
	}{
		{"centre", asc, 31, 4, 1, ""},                    // nearest index 3: [1, 5)
		{"tie takes the first index", asc, 35, 4, 1, ""}, // 30 and 40 tie: index 3
		{"just above a tie", asc, 35.5, 4, 2, ""},
		{"the last centre that fits", asc, 49, 4, 3, ""},  // index 5: [3, 7)
		{"c + size/2 == n fits", asc, 59, 4, 4, ""},       // index 6: [4, 8)
		{"left edge", asc, 12, 4, -1, "leaves the grid"},  // index 1: [-1, 3)
		{"right edge", asc, 69, 4, -1, "leaves the grid"}, // index 7: [5, 9)
		{"on the first coordinate", asc, 0, 2, -1, "strictly inside"},
		{"on the last coordinate", asc, 70, 2, -1, "strictly inside"},
		{"outside", asc, -5, 2, -1, "strictly inside"},
		{"NaN", asc, math.NaN(), 2, -1, "strictly inside"},
		// Descending store: ocf sees 0..70 increasing; increasing indices [1, 5) are store
		// indices [3, 7).
		{"descending centre", desc, 31, 4, 3, ""},
		{"descending tie", desc, 35, 4, 3, ""},
		{"descending right edge", desc, 69, 4, -1, "leaves the grid"},
		{"descending c + size/2 == n", desc, 59, 4, 0, ""},
	}
	for _, c := range cases {
		start, why := CropStart(c.c, c.v, c.size)
		if start != c.start || c.start < 0 && !strings.Contains(why, c.why) {
			t.Errorf("%s: cropStart(%v, %d) = %d (%q), want %d (%q)", c.name, c.v, c.size, start, why, c.start, c.why)
		}
	}
}

func TestPickRunsExamples(t *testing.T) {
	const h = 3600
	day := int64(1_700_000_000) / 86400 * 86400
	inits := []int64{day, day + 3*h, day + 6*h, day + 9*h, day + 12*h, day + 15*h}
	steps := make([]int64, 9) // 0 .. 8 h
	for i := range steps {
		steps[i] = int64(i) * h
	}
	o := nwpTargets{first: -1, res: h}
	const n = 5 // -60 .. 120 min, + 1 step for an accumulated channel
	cases := []struct {
		name      string
		t0, avail int64
		runs      []int64 // hours after day
		leads     []int64 // hours
	}{
		// on an init hour: 11:00 from the 09:00 run, the rest from 12:00 (notes §4)
		{"mixed", day + 12*h, day + 12*h, []int64{9, 12, 12, 12, 12}, []int64{2, 0, 1, 2, 3}},
		// dropout -180: t0_available 09:00, one run
		{"dropout", day + 12*h, day + 9*h, []int64{9, 9, 9, 9, 9}, []int64{2, 3, 4, 5, 6}},
		// a half-hour t0 shifts the targets forward: 12:00 .. 16:00
		{"ceil", day + 12*h + 1800, day + 12*h + 1800, []int64{12, 12, 12, 12, 12}, []int64{0, 1, 2, 3, 4}},
		{"between", day + 13*h, day + 13*h, []int64{12, 12, 12, 12, 12}, []int64{0, 1, 2, 3, 4}},
	}
	run, step := make([]int, n), make([]int, n)
	for _, c := range cases {
		if k := o.Pick(inits, steps, o.Start(c.t0), c.avail, n, run, step); k >= 0 {
			t.Fatalf("%s: target %d has no run", c.name, k)
		}
		for k := range n {
			if inits[run[k]] != day+c.runs[k]*h || steps[step[k]] != c.leads[k]*h {
				t.Errorf("%s: target %d from run %+dh step %dh; want run %+dh step %dh", c.name, k,
					(inits[run[k]]-day)/h, steps[step[k]]/h, c.runs[k], c.leads[k])
			}
		}
	}
	// at the first init the first target (an hour before) has no run
	if k := o.Pick(inits, steps, o.Start(day), day, n, nil, nil); k != 0 {
		t.Errorf("t0 at the first init: missing = %d, want 0 (23:00 has no run)", k)
	}
}

func TestPickRunsAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	const m = 60
	found, mixed, refused := 0, 0, 0
	for trial := range 300 {
		// init times every 1-6 h with gaps, steps of 1 h or 30 min up to some horizon, some
		// missing
		var inits []int64
		v := int64(rng.Intn(24)) * 30 * m
		for range 6 + rng.Intn(10) {
			v += int64(1+rng.Intn(6)) * 60 * m
			if rng.Intn(5) > 0 {
				inits = append(inits, v)
			}
		}
		if len(inits) == 0 {
			continue
		}
		stepRes := int64(60 * m)
		if rng.Intn(3) == 0 {
			stepRes = 30 * m
		}
		var steps []int64
		for s := int64(0); s <= int64(4+rng.Intn(10))*60*m; s += stepRes {
			if s == 0 || rng.Intn(8) > 0 {
				steps = append(steps, s)
			}
		}
		res := int64(60 * m)
		if rng.Intn(3) == 0 {
			res = 30 * m
		}
		o := nwpTargets{first: int64(-rng.Intn(3)), res: res}
		n := 1 + rng.Intn(5)
		run, step := make([]int, n), make([]int, n)
		for range 40 {
			t0 := inits[0] + int64(rng.Intn(40)-8)*15*m
			avail := t0 - int64(rng.Intn(3))*90*m
			start := o.Start(t0)
			wantRuns, wantLeads, ok := ocfref.BrutePick(inits, steps, start, o.res, n, avail)
			k := o.Pick(inits, steps, start, avail, n, run, step)
			if (k < 0) != ok {
				t.Fatalf("trial %d t0 %d avail %d: missing %d, brute force ok %v (inits %v steps %v window %+v)",
					trial, t0, avail, k, ok, inits, steps, o)
			}
			switch {
			case !ok:
				refused++
			case wantRuns[0] != wantRuns[n-1]:
				mixed++
			default:
				found++
			}
			for q := 0; ok && q < n; q++ {
				if inits[run[q]] != wantRuns[q] || steps[step[q]] != wantLeads[q] {
					t.Fatalf("trial %d t0 %d target %d: run %d step %d, want %d %d", trial, t0, q,
						inits[run[q]], steps[step[q]], wantRuns[q], wantLeads[q])
				}
			}
		}
	}
}

func TestCeilTo(t *testing.T) {
	for _, c := range []struct{ t, res, want int64 }{
		{0, 3600, 0}, {1, 3600, 3600}, {3600, 3600, 3600}, {5400, 3600, 7200}, {-1800, 3600, 0}, {-3600, 3600, -3600},
	} {
		if got := CeilTo(c.t, c.res); got != c.want {
			t.Errorf("ceilTo(%d, %d) = %d, want %d", c.t, c.res, got, c.want)
		}
	}
}

// TestDropoutFills: gobatch fills every step after t0 + cut; ocf only those in (t0 + cut, t0].
func TestDropoutFills(t *testing.T) {
	w := rules.Window{First: -4, N: 7, Res: 1800} // -120 .. 60 min
	for _, c := range []struct {
		cut      int64
		ocf      bool
		from, to int
	}{
		{rules.NoDropout, true, 7, 7}, {rules.NoDropout, false, 7, 7},
		{-3600, false, 3, 7}, {-3600, true, 3, 5}, // -60: -30 and 0 filled, 30 and 60 kept
		{0, true, 5, 5}, {-7200, true, 1, 5}, {-9000, true, 0, 5},
	} {
		r := rules.Gobatch
		if c.ocf {
			r = Rules
		}
		from, to := r.DropoutFills(w, c.cut)
		if from != c.from || to != c.to {
			t.Errorf("cut %d ocf %v: [%d, %d), want [%d, %d)", c.cut, c.ocf, from, to, c.from, c.to)
		}
	}
}

// WindowT0 is select_time_slice's ceil of t0 onto the source's resolution: a 5-minute t0
// beside a 15-minute satellite takes the next quarter hour; times before 1970 too.
func TestWindowT0CeilsOntoTheGrid(t *testing.T) {
	for _, c := range []struct{ t0, res, want int64 }{
		{1609459200, 900, 1609459200}, {1609459200 + 300, 900, 1609459200 + 900}, {1609459200 + 600, 900, 1609459200 + 900},
		{-300, 900, 0}, {-900, 900, -900}, {-1200, 900, -900}, {1800, 1800, 1800},
	} {
		if got := Rules.WindowT0(c.t0, c.res); got != c.want {
			t.Errorf("WindowT0(%d, %d) = %d, want %d", c.t0, c.res, got, c.want)
		}
	}
}

// Steps finer than the window's resolution: the NWP's window rule says how ocf-data-sampler's
// window then differs (a warning naming the source); steps at the resolution say nothing.
func TestFinerStepsNote(t *testing.T) {
	hourly := make([]int64, 13)
	for i := range hourly {
		hourly[i] = int64(i) * 3600
	}
	for _, c := range []struct {
		res  int64
		want string
	}{{3600, ""}, {3 * 3600, "source[1]: the store's steps are 60 min apart, finer than time_resolution_minutes 180"}} {
		w := rules.Window{First: -1, N: 4, Res: c.res}
		r, err := ocfRules{}.NWPTargets(rules.NWP{Field: "source[1]", Window: w, Targets: 4, Steps: hourly, IntervalEnd: 2 * c.res})
		if err != nil {
			t.Fatal(err)
		}
		if note := r.Note(); (c.want == "") != (note == "") || !strings.Contains(note, c.want) {
			t.Errorf("resolution %d s: note %q, want %q", c.res, note, c.want)
		}
	}
}
