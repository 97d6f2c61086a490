package ocf

import (
	"math"
	"reflect"
	"testing"

	"github.com/gobatch/gobatch/sampler/rules"
)

const min5 = 300 // five minutes, in seconds

// steps returns n times from t spaced by d seconds.
func steps(t, d int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = t + int64(i)*d
	}
	return out
}

func TestContiguousT0PeriodsSplitsAtGapsAndKeepsRunsLongerThanTheWindow(t *testing.T) {
	// Window -30..0 min at 5 min: 7 steps. Runs: 0..55 min (12 times), a gap, 120..150 (7
	// times: exactly one window, dropped), a gap, 240..280 (9 times).
	times := append(append(steps(0, min5, 12), steps(120*60, min5, 7)...), steps(240*60, min5, 9)...)
	got := contiguousT0Periods(times, min5, -30*60, 0)
	want := []period{{30 * 60, 55 * 60}, {270 * 60, 280 * 60}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("periods %v, want %v", got, want)
	}
	// A window reaching into the future trims the end too: -30..+10 min (9 steps) drops the
	// 9-time run and gives the first [30, 45].
	got = contiguousT0Periods(times, min5, -30*60, 10*60)
	if want := []period{{30 * 60, 45 * 60}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("periods %v, want %v", got, want)
	}
	// A step of exactly the resolution is no gap; a step of more is one, however small.
	if got := contiguousT0Periods([]int64{0, 300, 600, 901, 1200}, min5, -300, 0); !reflect.DeepEqual(got, []period{{300, 600}}) {
		t.Fatalf("periods %v, want [{300 600}]", got)
	}
}

func TestNWPT0PeriodsBreakWhenARunGoesStaleBeforeTheNextServes(t *testing.T) {
	h := int64(3600)
	inits := steps(0, 3*h, 4) // 00, 03, 06, 09
	// Steps 0..8 h, window -60..120 min: staleness 8 h - 2 h = 6 h. Without dropout the buffer is
	// max(0 + 1 h, 0) = 1 h and the periods never break: [01:00, 15:00].
	stale := int64(6 * h)
	got := nwpT0Periods(inits, -h, stale, 0, 0)
	if want := []period{{h, 9*h + 6*h}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("no dropout: %v, want %v", got, want)
	}
	// An accumulated channel loses the last step: 5 h. Dropout -180 min: buffer 3 h; each run
	// serves init+3 h .. init+5 h and the next starts at init+3 h+3 h: a break every cycle.
	stale = 5 * h
	got = nwpT0Periods(inits, -h, stale, 3*h, 0)
	want := []period{{3 * h, 5 * h}, {6 * h, 8 * h}, {9 * h, 11 * h}, {12 * h, 14 * h}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("dropout -180: %v, want %v", got, want)
	}
	// A missing run (09 absent) breaks the period when the 06 run goes stale first.
	got = nwpT0Periods([]int64{0, 3 * h, 6 * h, 12 * h}, -h, 5*h, 0, 0)
	if want := []period{{h, 11 * h}, {13 * h, 17 * h}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("missing run: %v, want %v", got, want)
	}
	// A first step after init delays each period's start and its take-over.
	got = nwpT0Periods([]int64{0, 3 * h}, -h, 4*h, 0, h)
	if want := []period{{2 * h, 7 * h}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first step 1 h: %v, want %v", got, want)
	}
}

func TestIntersectPeriods(t *testing.T) {
	a := []period{{0, 10}, {20, 30}, {40, 50}}
	b := []period{{5, 25}, {30, 45}, {60, 70}}
	// Closed ranges: [20,30] and [30,45] share 30.
	want := []period{{5, 10}, {20, 25}, {30, 30}, {40, 45}}
	if got := intersectPeriods(a, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("a ∩ b = %v, want %v", got, want)
	}
	if got := intersectPeriods(b, a); !reflect.DeepEqual(got, want) {
		t.Fatalf("b ∩ a = %v, want %v", got, want)
	}
	if got := intersectPeriods(a, nil); len(got) != 0 {
		t.Fatalf("a ∩ {} = %v", got)
	}
}

func TestFillPeriodsOnTheGrid(t *testing.T) {
	// 30-minute grid: [00:10, 01:30] holds 00:30, 01:00, 01:30; [02:05, 02:20] holds none;
	// [-00:40, -00:30] (before the epoch) holds -00:30.
	ps := []period{{-40 * 60, -30 * 60}, {10 * 60, 90 * 60}, {125 * 60, 140 * 60}}
	g := fillPeriods(ps, 1800)
	if g.n() != 4 || g.periods() != 2 {
		t.Fatalf("n %d periods %d, want 4 and 2", g.n(), g.periods())
	}
	var got []int64
	for i := uint64(0); i < g.n(); i++ {
		got = append(got, g.at(i))
	}
	if want := []int64{-1800, 1800, 3600, 5400}; !reflect.DeepEqual(got, want) {
		t.Fatalf("t0s %v, want %v", got, want)
	}
}

func TestPairSpaceOrders(t *testing.T) {
	common := []period{{0, 7200}}
	// Complete: 3 locations x t0s 0, 1800, .. 5400 (the generation's period ends at 5400);
	// pair i is location i / 4 at t0 i % 4, as ocf's __getitem__.
	s := newPairSpace(common, 1800, []int{0, 1, 2}, []period{{-3600, 5400}}, nil)
	if s.mode != SpaceComplete || s.n() != 12 {
		t.Fatalf("mode %s n %d, want complete 12", s.mode, s.n())
	}
	if t0, loc := s.pair(5); t0 != 1800 || loc != 1 {
		t.Fatalf("pair 5 = (%d, %d), want (1800, 1)", t0, loc)
	}
	// A location left out (ocf's location 0) has no pair; the others keep their indices.
	s = newPairSpace(common, 1800, []int{1, 2}, []period{{-3600, 5400}}, nil)
	if t0, loc := s.pair(4); s.n() != 8 || t0 != 0 || loc != 2 {
		t.Fatalf("n %d, pair 4 = (%d, %d); want 8 and (0, 2)", s.n(), t0, loc)
	}
	// Per location: location 0 has [0, 1800], location 1 none, location 2 [3600, 9000] (cut to
	// 7200 by the common period): ordered by location, then t0.
	s = newPairSpace(common, 1800, []int{0, 1, 2}, nil, [][]period{{{0, 1800}}, nil, {{3600, 9000}}})
	var got [][2]int64
	for i := uint64(0); i < s.n(); i++ {
		t0, loc := s.pair(i)
		got = append(got, [2]int64{t0, int64(loc)})
	}
	want := [][2]int64{{0, 0}, {1800, 0}, {3600, 2}, {5400, 2}, {7200, 2}}
	if s.mode != SpacePerLocation || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s pairs %v, want %v", s.mode, got, want)
	}
}

func TestKeptLocationsDropLocationZeroOnlyWithOthers(t *testing.T) {
	if got := keptLocations([]int64{0, 1, 2}); !reflect.DeepEqual(got, []bool{false, true, true}) {
		t.Fatalf("%v", got)
	}
	if got := keptLocations([]int64{0}); !reflect.DeepEqual(got, []bool{true}) {
		t.Fatalf("%v", got)
	}
	if got := keptLocations([]int64{3, 4}); !reflect.DeepEqual(got, []bool{true, true}) {
		t.Fatalf("%v", got)
	}
}

// TestPairSpaceIsTimeOrdered: Before(k, t) is run k's first pair at or after t, counted
// against every pair, for t0s on the grid, between them, before and after all; in both modes.
func TestPairSpaceIsTimeOrdered(t *testing.T) {
	common := []period{{0, 20000}}
	for _, s := range []*pairSpace{
		newPairSpace(common, 1800, []int{0, 2, 3}, []period{{-3600, 14400}}, nil),
		newPairSpace(common, 1800, []int{0, 1, 2, 3}, nil, [][]period{{{0, 1800}, {5400, 9000}}, nil, {{3600, 30000}}, {{100, 1700}}}),
	} {
		var ts rules.TimeOrdered = s
		for k := range ts.Runs() {
			loc := s.locs[k]
			for _, at := range []int64{math.MinInt64, -1, 0, 1, 1799, 1800, 1801, 5400, 7000, 9000, 9001, 19800, 20000, math.MaxInt64} {
				want := uint64(0)
				for i := uint64(0); i < s.n(); i++ {
					if t0, l := s.pair(i); l == loc && t0 >= at {
						want = i
						break
					} else if l == loc || (l < loc) {
						want = i + 1
					}
				}
				if got := ts.Before(k, at); got != want {
					t.Fatalf("%s: Before(%d, %d) = %d, want %d", s.mode, k, at, got, want)
				}
			}
		}
	}
}
