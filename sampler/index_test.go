package sampler

import (
	"math"
	"sort"
	"testing"
)

func TestFloorDiv(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{7, 3, 2}, {6, 3, 2}, {-1, 3, -1}, {-3, 3, -1}, {-4, 3, -2}, {0, 5, 0},
	} {
		if got := floorDiv(c.a, c.b); got != c.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestRegularAxis(t *testing.T) {
	a, err := regularAxis([]int64{100, 400, 700, 1000})
	if err != nil || a.start != 100 || a.step != 300 || a.n != 4 {
		t.Fatalf("got %+v, %v", a, err)
	}
	for _, v := range []struct {
		t  int64
		i  int
		ok bool
	}{{100, 0, true}, {1000, 3, true}, {1300, 0, false}, {99, 0, false}, {250, 0, false}} {
		i, ok := a.index(v.t)
		if ok != v.ok || (ok && i != v.i) {
			t.Errorf("index(%d) = %d, %v; want %d, %v", v.t, i, ok, v.i, v.ok)
		}
	}
	if _, err := regularAxis([]int64{0, 5, 10, 16}); err == nil {
		t.Error("irregular axis accepted")
	}
	if _, err := regularAxis([]int64{10, 5}); err == nil {
		t.Error("decreasing axis accepted")
	}
}

func TestSeriesIndices(t *testing.T) {
	a := axis{start: 0, step: 300, n: 100} // 5-minute steps
	w := timeWindow{first: -6, n: 19, res: 300}
	// The workload's rule: i >= 6 and i + 12 < len.
	for i := 0; i < a.n; i++ {
		first, stride, ok := seriesIndices(a, w, a.value(i))
		want := i >= 6 && i+12 < a.n
		if ok != want {
			t.Fatalf("t0 index %d: ok = %v, want %v", i, ok, want)
		}
		if ok && (first != i-6 || stride != 1) {
			t.Fatalf("t0 index %d: first %d stride %d", i, first, stride)
		}
	}
	// A 15-minute resolution on a 5-minute axis strides by 3.
	first, stride, ok := seriesIndices(a, timeWindow{first: -2, n: 5, res: 900}, a.value(50))
	if !ok || first != 44 || stride != 3 {
		t.Fatalf("15-minute window: %d %d %v", first, stride, ok)
	}
}

func TestLatestAtOrBefore(t *testing.T) {
	s := []int64{0, 180, 360, 540}
	for _, c := range []struct {
		t    int64
		want int
	}{{-1, -1}, {0, 0}, {179, 0}, {180, 1}, {539, 2}, {540, 3}, {10000, 3}} {
		if got := latestAtOrBefore(s, c.t); got != c.want {
			t.Errorf("latestAtOrBefore(%d) = %d, want %d", c.t, got, c.want)
		}
	}
	if latestAtOrBefore(nil, 5) != -1 {
		t.Error("empty")
	}
}

func TestNWPRule(t *testing.T) {
	const min = 60
	inits := []int64{0, 180 * min, 360 * min, 540 * min}
	steps := regularTimes(axis{start: 0, step: 60 * min, n: 16})
	r := nwpRule{minStale: 60 * min, window: timeWindow{first: -1, n: 4, res: 60 * min}}
	// docs/WORKLOAD.md step 4, computed independently: run = latest init <= t0 - 60 min,
	// s = floor((t0 - 60 min - init) / 60 min).
	for t0m := int64(0); t0m < 800; t0m += 5 {
		t0 := t0m * min
		got, ok := r.choose(inits, steps, t0, nil)
		run := -1
		for i, v := range inits {
			if v <= t0-60*min {
				run = i
			}
		}
		if run < 0 {
			if ok {
				t.Fatalf("t0 %d min: chose run %d, want none", t0m, got.run)
			}
			continue
		}
		s := (t0 - 60*min - inits[run]) / (60 * min)
		if !ok || got.run != run || got.steps.first != int(s) || got.steps.stride != 1 {
			t.Fatalf("t0 %d min: got %+v %v, want run %d step %d", t0m, got, ok, run, s)
		}
	}
	// max staleness: a run older than 120 min is refused.
	r.maxStale = 120 * min
	if _, ok := r.choose(inits, steps, 301*min, nil); ok { // 121 min old
		t.Error("max_staleness not applied")
	}
	if _, ok := r.choose(inits, steps, 300*min, nil); !ok {
		t.Error("run exactly max_staleness old refused")
	}
	// Lead steps beyond the run's last step are refused.
	short := regularTimes(axis{start: 0, step: 60 * min, n: 4})
	r.maxStale = 0
	if _, ok := r.choose(inits, short, 360*min, nil); ok { // run 180 min, s = 2 -> steps 2..5 > 3
		t.Error("steps past the end accepted")
	}
	if c, ok := r.choose(inits, short, 240*min, nil); !ok || c.steps.first != 0 { // run 180 min, s = 0
		t.Errorf("steps 0..3 of a 4-step run refused: %+v %v", c, ok)
	}
}

func TestNearestIndexTiesAndDescending(t *testing.T) {
	// Descending coordinate, like y.
	c := []float64{900, 892, 884, 876}
	if got := nearestIndex(c, 888); got != 1 { // tie between 892 (1) and 884 (2): lower index
		t.Errorf("tie: got %d, want 1", got)
	}
	if got := nearestIndex(c, 885); got != 2 {
		t.Errorf("got %d, want 2", got)
	}
	if got := nearestIndex(c, 2000); got != 0 {
		t.Errorf("outside: got %d", got)
	}
	if got := nearestIndex([]float64{0, 8, 16}, 4); got != 0 { // ascending tie
		t.Errorf("ascending tie: got %d", got)
	}
	if got := nearestIndex([]float64{math.NaN(), 5}, 0); got != 1 {
		t.Errorf("NaN chosen: %d", got)
	}
}

func TestCropStartClamps(t *testing.T) {
	for _, c := range []struct{ near, n, length, want int }{
		{10, 8, 64, 6}, {0, 8, 64, 0}, {3, 8, 64, 0}, {63, 8, 64, 56}, {60, 8, 64, 56}, {4, 8, 8, 0},
	} {
		if got := cropStart(c.near, c.n, c.length); got != c.want {
			t.Errorf("cropStart(%d, %d, %d) = %d, want %d", c.near, c.n, c.length, got, c.want)
		}
	}
}

func TestNearestK(t *testing.T) {
	xs := []float64{0, 10, 3, -3, 0, 5, math.NaN(), 1}
	ys := []float64{0, 0, 4, 4, 5, 0, 0, 0}
	out := make([]int32, 4)
	dist := make([]float64, 4)
	if !nearestK(xs, ys, nil, 0, 0, 0, out, dist) {
		t.Fatal("not found")
	}
	// distances: 0:0, 1:10, 2:5, 3:5, 4:5, 5:5, 6:NaN, 7:1 -> 0, 7, then the ties 2, 3 (lower
	// indices of the four at distance 5), ascending index order.
	want := []int32{0, 2, 3, 7}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("got %v, want %v", out, want)
		}
	}
	// Against a brute force (stable sort by distance) on scattered points.
	n := 300
	xs, ys = make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = float64((i * 7919) % 101)
		ys[i] = float64((i * 104729) % 97)
	}
	for q := 0; q < 50; q++ {
		x, y := float64(q*2), float64(q*3%97)
		k := 16
		out, dist := make([]int32, k), make([]float64, k)
		nearestK(xs, ys, nil, x, y, 0, out, dist)
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		d := func(i int) float64 { return (xs[i]-x)*(xs[i]-x) + (ys[i]-y)*(ys[i]-y) }
		sort.SliceStable(idx, func(a, b int) bool { return d(idx[a]) < d(idx[b]) })
		want := append([]int(nil), idx[:k]...)
		sort.Ints(want)
		for i := range want {
			if int(out[i]) != want[i] {
				t.Fatalf("query %d: got %v, want %v", q, out, want)
			}
		}
	}
	if nearestK([]float64{1}, []float64{1}, nil, 0, 0, 0, make([]int32, 2), make([]float64, 2)) {
		t.Error("k > points accepted")
	}
}

func TestUniformRange(t *testing.T) {
	counts := make([]int, 7)
	for i := uint64(0); i < 70000; i++ {
		counts[uniform(hashKey(1, 2, i), 7)]++
	}
	for v, c := range counts {
		if c < 9500 || c > 10500 {
			t.Errorf("value %d drawn %d times of 70000", v, c)
		}
	}
	if hashKey(1, 2, 3) == hashKey(1, 3, 2) || hashKey(1, 2) == hashKey(1, 2, 0) {
		t.Error("hash collisions on permuted or extended counters")
	}
}
