package sampler

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gobatch/gobatch/config"
)

// Time axes with gaps and changes of step, windows at exact timestamps, the NWP run fallback,
// [batch] t0_start / t0_end and the rejection report. Every expectation is computed here by
// brute force over the timestamps (sets and linear scans), never with the sampler's index code.

// regularTimes is the timeAxis of a regular axis (for tests written against axis).
func regularTimes(a axis) *timeAxis {
	vals := make([]int64, a.n)
	for i := range vals {
		vals[i] = a.value(i)
	}
	t, err := newTimeAxis(vals, func(v int64) string { return fmt.Sprint(v) })
	if err != nil {
		panic(err)
	}
	return &t
}

func mustTimes(t *testing.T, vals []int64) *timeAxis {
	t.Helper()
	a, err := newTimeAxis(vals, func(v int64) string { return fmt.Sprint(v) })
	if err != nil {
		t.Fatal(err)
	}
	return &a
}

// bruteSteps is the reference for timeAxis.steps: the index of each time by linear scan, or
// the first k that has none.
func bruteSteps(vals []int64, start, res int64, n int) ([]int, int) {
	out := make([]int, n)
	for k := range out {
		out[k] = -1
		for i, v := range vals {
			if v == start+int64(k)*res {
				out[k] = i
			}
		}
		if out[k] < 0 {
			return nil, k
		}
	}
	return out, -1
}

func checkSteps(t *testing.T, a *timeAxis, start, res int64, n int) {
	t.Helper()
	want, wantMissing := bruteSteps(a.vals, start, res, n)
	at := make([]int, n)
	sp, missing := a.steps(start, res, n, at)
	if missing != wantMissing {
		t.Fatalf("steps(%d, %d, %d): missing %d, want %d", start, res, n, missing, wantMissing)
	}
	if _, m := a.steps(start, res, n, nil); m != wantMissing {
		t.Fatalf("steps(%d, %d, %d) without scratch: missing %d, want %d", start, res, n, m, wantMissing)
	}
	for k := range want {
		if sp.index(k) != want[k] {
			t.Fatalf("steps(%d, %d, %d): step %d at %d, want %d (span %+v)", start, res, n, k, sp.index(k), want[k], sp)
		}
	}
}

func TestTimeAxisRefusesNonAscending(t *testing.T) {
	for _, c := range []struct {
		vals []int64
		want string
	}{
		{[]int64{0, 300, 300, 900}, "index 2"},
		{[]int64{0, 300, 600, 500}, "index 3"},
		{nil, "empty"},
	} {
		_, err := newTimeAxis(c.vals, func(v int64) string { return fmt.Sprintf("v%d", v) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.vals, err, c.want)
		}
	}
	a := mustTimes(t, []int64{0, 300, 600, 1200})
	if a.regular || a.minStep != 300 {
		t.Errorf("gappy axis: regular %v, minStep %d", a.regular, a.minStep)
	}
	if !mustTimes(t, []int64{0, 300, 600}).regular || !mustTimes(t, []int64{7}).regular {
		t.Error("regular axes not recognised")
	}
}

func TestTimeAxisStepsAgainstBruteForce(t *testing.T) {
	const m = 60
	regular := make([]int64, 120)
	for i := range regular {
		regular[i] = 1000 + int64(i)*5*m
	}
	// Gaps: two steps missing after index 40, one after 70, a lone value far out.
	var gappy []int64
	for i, v := range regular {
		if i == 41 || i == 42 || i == 71 {
			continue
		}
		gappy = append(gappy, v)
	}
	gappy = append(gappy, regular[119]+100*m)
	// A change of step: 5 minutes, then 15 (a window of 15 minutes across it is unevenly spaced).
	var changing []int64
	for i := 0; i < 60; i++ {
		changing = append(changing, int64(i)*5*m)
	}
	for i := 1; i < 40; i++ {
		changing = append(changing, changing[59]+int64(i)*15*m)
	}
	for name, vals := range map[string][]int64{"regular": regular, "gappy": gappy, "changing": changing} {
		a := mustTimes(t, vals)
		if (name == "regular") != a.regular {
			t.Fatalf("%s: regular = %v", name, a.regular)
		}
		lo, hi := vals[0]-30*m, vals[len(vals)-1]+30*m
		for start := lo; start <= hi; start += 5 * m {
			for _, w := range []struct {
				res int64
				n   int
			}{{5 * m, 19}, {15 * m, 7}, {10 * m, 4}, {5 * m, 1}, {30 * m, 3}} {
				checkSteps(t, a, start, w.res, w.n)
			}
		}
	}
	// The uneven case really produces an index list.
	a := mustTimes(t, changing)
	sp, missing := a.steps(changing[53], 15*m, 4, make([]int, 4)) // 53, 56, 59, 60
	if missing >= 0 || sp.at == nil || sp.index(0) != 53 || sp.index(1) != 56 || sp.index(3) != 60 {
		t.Fatalf("across the change of step: %+v, missing %d", sp, missing)
	}
}

// bruteNWP is the reference NWP rule: runs from the newest down; a run qualifies when its init
// is at or before t0 - minStale, not more than maxStale older than t0 (when set) and every lead
// floor((t0 + first*res - init) / res)*res + k*res is a step. It returns the run and the step
// indices, or run -1.
func bruteNWP(inits, steps []int64, minStale, maxStale int64, w timeWindow, t0 int64) (int, []int) {
	order := make([]int, len(inits))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return inits[order[a]] > inits[order[b]] })
	for _, run := range order {
		init := inits[run]
		if init > t0-minStale || (maxStale > 0 && t0-init > maxStale) {
			continue
		}
		lead := int64(math.Floor(float64(t0+w.first*w.res-init)/float64(w.res))) * w.res
		idx, missing := bruteSteps(steps, lead, w.res, w.n)
		if missing < 0 {
			return run, idx
		}
	}
	return -1, nil
}

func TestNWPFallbackAgainstBruteForce(t *testing.T) {
	const m = 60
	// Runs every 3 hours with the 09:00 run missing; the step axis lacks the 2 h lead and
	// turns 3-hourly after 12 h (as long-range NWP does).
	inits := []int64{0, 180 * m, 360 * m, 720 * m, 900 * m, 1080 * m}
	var steps []int64
	for h := int64(0); h <= 12; h++ {
		if h != 2 {
			steps = append(steps, h*60*m)
		}
	}
	for h := int64(15); h <= 36; h += 3 {
		steps = append(steps, h*60*m)
	}
	ax := mustTimes(t, steps)
	fallbacks, uneven := 0, 0
	for _, rule := range []nwpRule{
		{minStale: 60 * m, window: timeWindow{first: -1, n: 4, res: 60 * m}},
		{minStale: 60 * m, maxStale: 360 * m, window: timeWindow{first: -1, n: 4, res: 60 * m}},
		{minStale: 0, maxStale: 600 * m, window: timeWindow{first: 0, n: 5, res: 180 * m}},
		{minStale: 30 * m, window: timeWindow{first: -2, n: 3, res: 30 * m}},
	} {
		for t0 := int64(-120 * m); t0 < 1500*m; t0 += 5 * m {
			wantRun, wantIdx := bruteNWP(inits, steps, rule.minStale, rule.maxStale, rule.window, t0)
			got, ok := rule.choose(inits, ax, t0, make([]int, rule.window.n))
			if ok != (wantRun >= 0) || (ok && got.run != wantRun) {
				t.Fatalf("rule %+v t0 %d min: got run %d (%v), want %d", rule, t0/m, got.run, ok, wantRun)
			}
			if !ok {
				if !strings.Contains((&nwpSource{inits: *mustTimes(t, inits), steps: *ax, rule: rule}).whyNot(t0, true).detail, "run") {
					t.Fatalf("t0 %d min: the reason names no run", t0/m)
				}
				continue
			}
			for k, i := range wantIdx {
				if got.steps.index(k) != i {
					t.Fatalf("rule %+v t0 %d min: step %d at %d, want %d", rule, t0/m, k, got.steps.index(k), i)
				}
			}
			if latest := latestAtOrBefore(inits, t0-rule.minStale); got.run != latest {
				fallbacks++
			}
			if got.steps.at != nil {
				uneven++
			}
		}
	}
	if fallbacks == 0 || uneven == 0 {
		t.Errorf("the cases never exercised the fallback (%d) or an uneven span (%d)", fallbacks, uneven)
	}
}

// gappyMem is the in-memory nowcast of memdata_test.go with real-archive irregularities:
// satellite times lack two steps after index 59 and one after index 119; PV times step by
// 5 minutes, then by 15 after index 99 (so the PV index of a time differs from the
// satellite's, and 15-minute PV windows across the change are unevenly spaced); the NWP run at
// 540 min is missing and no run has the 2 h lead.
func gappyMem() map[string]*memDataset {
	const epoch, m = 1609459200, 60
	ds := newMemNowcast(smallMem)
	T := smallMem.T
	sat := make([]int64, T)
	pv := make([]int64, T)
	for i := range sat {
		sat[i] = epoch + int64(i)*5*m
		if i >= 60 {
			sat[i] += 10 * m
		}
		if i >= 120 {
			sat[i] += 5 * m
		}
		pv[i] = epoch + int64(i)*5*m
		if i > 99 {
			pv[i] = epoch + 99*5*m + int64(i-99)*15*m
		}
	}
	ds["satellite.zarr"].arrays["time"] = &memArray{shape: []int{T}, ints: sat}
	ds["pv.zarr"].arrays["time"] = &memArray{shape: []int{T}, ints: pv}
	n := ds["nwp.zarr"].arrays
	inits := n["init_time"].ints // 0, 180, 360, 540, 720 min
	for i := 3; i < len(inits); i++ {
		inits[i] += 180 * m
	}
	steps := n["step"].ints
	for i := 2; i < len(steps); i++ {
		steps[i] += 3600 // 0, 1, 3, 4, ..., 16 h
	}
	return ds
}

// gappyConfig is memConfig with a staleness limit on the NWP and a 15-minute PV window.
func gappyConfig(batch string) string {
	c := memConfigFmt("")
	c = strings.Replace(c, "min_staleness_minutes = 60\n", "min_staleness_minutes = 60\nmax_staleness_minutes = 360\n", 1)
	c = strings.Replace(c, "nearest_k = 5\ntime_resolution_minutes = 5\n", "nearest_k = 5\ntime_resolution_minutes = 15\n", 1)
	return strings.Replace(c, "seed = 7\n", "seed = 7\n"+batch, 1)
}

// gappyRef is the expected example at t0 and centre (cy, cx), selected by timestamps.
type gappyRef struct {
	ds    map[string]*memDataset
	sat   map[int64]int // time -> index
	pv    map[int64]int
	inits []int64
	steps []int64
}

func newGappyRef(ds map[string]*memDataset) *gappyRef {
	r := &gappyRef{ds: ds, sat: map[int64]int{}, pv: map[int64]int{}}
	for i, v := range ds["satellite.zarr"].arrays["time"].ints {
		r.sat[v] = i
	}
	for i, v := range ds["pv.zarr"].arrays["time"].ints {
		r.pv[v] = i
	}
	r.inits = ds["nwp.zarr"].arrays["init_time"].ints
	r.steps = ds["nwp.zarr"].arrays["step"].ints
	return r
}

var (
	gappySatWin = timeWindow{first: -6, n: 19, res: 300}
	gappyPVWin  = timeWindow{first: -2, n: 7, res: 900}
	gappyNWPWin = timeWindow{first: -1, n: 4, res: 3600}
)

// ok says whether t0 is a candidate, and which sources reject it (satellite, nwp, pv).
func (r *gappyRef) ok(t0 int64) (bool, [3]bool) {
	var rej [3]bool
	for k := 0; k < gappySatWin.n; k++ {
		if _, in := r.sat[t0+(gappySatWin.first+int64(k))*gappySatWin.res]; !in {
			rej[0] = true
		}
	}
	if run, _ := bruteNWP(r.inits, r.steps, 3600, 360*60, gappyNWPWin, t0); run < 0 {
		rej[1] = true
	}
	for k := 0; k < gappyPVWin.n; k++ {
		if _, in := r.pv[t0+(gappyPVWin.first+int64(k))*gappyPVWin.res]; !in {
			rej[2] = true
		}
	}
	return !rej[0] && !rej[1] && !rej[2], rej
}

func (r *gappyRef) example(t0 int64, cy, cx int) (sat, nwp, pv []float32) {
	s := r.ds["satellite.zarr"].arrays
	data := s["data"]
	C, P := data.shape[1], data.shape[2]
	for k := 0; k < gappySatWin.n; k++ {
		ti := r.sat[t0+(gappySatWin.first+int64(k))*gappySatWin.res]
		for c := 0; c < C; c++ {
			for y := cy - 4; y < cy+4; y++ {
				for x := cx - 4; x < cx+4; x++ {
					raw := data.raw[((ti*C+c)*P+y)*P+x]
					v := float32(math.NaN())
					if raw != -1 {
						v = float32(raw * 0.001)
					}
					sat = append(sat, v)
				}
			}
		}
	}
	sy, sx := s["y"].raw[cy], s["x"].raw[cx]
	n := r.ds["nwp.zarr"].arrays
	u := n["UKV"]
	run, idx := bruteNWP(r.inits, r.steps, 3600, 360*60, gappyNWPWin, t0)
	near := func(coord []float64, v float64) int {
		best := 0
		for i := range coord {
			if math.Abs(coord[i]-v) < math.Abs(coord[best]-v) {
				best = i
			}
		}
		return min(max(best-2, 0), len(coord)-4)
	}
	Q, V, S := u.shape[3], u.shape[2], u.shape[1]
	y0, x0 := near(n["y"].raw, sy), near(n["x"].raw, sx)
	for _, st := range idx {
		for v := 0; v < V; v++ {
			for y := y0; y < y0+4; y++ {
				for x := x0; x < x0+4; x++ {
					nwp = append(nwp, float32(u.raw[(((run*S+st)*V+v)*Q+y)*Q+x]))
				}
			}
		}
	}
	p := r.ds["pv.zarr"].arrays
	pw := p["power"]
	ns := pw.shape[1]
	sel := make([]int, ns)
	for i := range sel {
		sel[i] = i
	}
	d := func(i int) float64 { return math.Hypot(p["x"].raw[i]-sx, p["y"].raw[i]-sy) }
	sort.SliceStable(sel, func(a, b int) bool { return d(sel[a]) < d(sel[b]) })
	sel = sel[:5]
	sort.Ints(sel) // ids ascend with the index in this dataset
	for k := 0; k < gappyPVWin.n; k++ {
		ti := r.pv[t0+(gappyPVWin.first+int64(k))*gappyPVWin.res]
		for _, sys := range sel {
			pv = append(pv, float32(pw.raw[ti*ns+sys]))
		}
	}
	return sat, nwp, pv
}

func newGappyJob(t *testing.T, batch string) (*Job, map[string]*memDataset) {
	t.Helper()
	cfg, err := parseCfg(t, gappyConfig(batch))
	if err != nil {
		t.Fatal(err)
	}
	ds := gappyMem()
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j, ds
}

func TestGappyCandidatesAndRejections(t *testing.T) {
	j, ds := newGappyJob(t, "")
	ref := newGappyRef(ds)
	var want []int32
	var rejects [3]int
	for i, t0 := range ds["satellite.zarr"].arrays["time"].ints {
		ok, rej := ref.ok(t0)
		if ok {
			want = append(want, int32(i))
		}
		for s := range rej {
			if rej[s] {
				rejects[s]++
			}
		}
	}
	if fmt.Sprint(j.cands) != fmt.Sprint(want) {
		t.Fatalf("candidates\n %v\nwant\n %v", j.cands, want)
	}
	if len(want) < 20 || rejects[0] == 0 || rejects[1] == 0 || rejects[2] == 0 {
		t.Fatalf("the data exercises too little: %d candidates, rejections %v", len(want), rejects)
	}
	rs := j.Rejections()
	if len(rs) != 3 {
		t.Fatalf("rejections %+v", rs)
	}
	for s, r := range rs {
		if r.Count != rejects[s] || r.Field != fmt.Sprintf("source[%d]", s) || !strings.HasPrefix(r.First, "at t0 2021-01-01T") {
			t.Errorf("rejection %d: %+v, want count %d", s, r, rejects[s])
		}
		t.Log(r)
	}
	if !strings.Contains(rs[0].First, "the time window leaves the time coordinate") {
		t.Errorf("the first satellite rejection (index 0) is not the start of the axis: %s", rs[0].First)
	}
	// t0 in the satellite gap: the reason names the gap.
	gap := ds["satellite.zarr"].arrays["time"].ints[62]
	if why := j.anchor.whyNot(gap, true).detail; !strings.Contains(why, "a gap") {
		t.Errorf("at the gap: %q", why)
	}
}

func TestGappyFillMatchesReference(t *testing.T) {
	j, ds := newGappyJob(t, "")
	ref := newGappyRef(ds)
	buf := batchBuf(j)
	sawUneven, sawFallback := false, false
	for b := uint64(0); b < 60; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		sat, nwp, pv := bytesAsFloat32(buf[0]), bytesAsFloat32(buf[1]), bytesAsFloat32(buf[2])
		t0s := bytesAsInt64(buf[3])
		for e := 0; e < 4; e++ {
			t0, _, cy, cx := j.Draw(b, e)
			if t0s[e] != t0 {
				t.Fatalf("batch %d example %d: t0 %d, drawn %d", b, e, t0s[e], t0)
			}
			if ok, rej := ref.ok(t0); !ok {
				t.Fatalf("t0 %d drawn, but the reference rejects it (%v)", t0, rej)
			}
			ws, wn, wp := ref.example(t0, cy, cx)
			where := fmt.Sprintf("batch %d example %d t0 %s", b, e, fmtTime(t0))
			sameFloats(t, "satellite, "+where, sat[e*len(ws):(e+1)*len(ws)], ws)
			sameFloats(t, "nwp, "+where, nwp[e*len(wn):(e+1)*len(wn)], wn)
			sameFloats(t, "pv, "+where, pv[e*len(wp):(e+1)*len(wp)], wp)
			pvIdx := ref.pv[t0-30*60]
			sawUneven = sawUneven || (pvIdx <= 99 && ref.pv[t0+60*60] > 99)
			run, _ := bruteNWP(ref.inits, ref.steps, 3600, 360*60, gappyNWPWin, t0)
			sawFallback = sawFallback || run != latestAtOrBefore(ref.inits, t0-3600)
		}
	}
	if !sawUneven || !sawFallback {
		t.Errorf("240 examples never crossed the PV change of step (%v) or fell back to an older run (%v)", sawUneven, sawFallback)
	}
}

func TestGappyFillAllocatesNothingWhenWarm(t *testing.T) {
	j, _ := newGappyJob(t, "")
	if allocs := warmFillAllocs(t, j); allocs != 0 {
		t.Errorf("%.1f allocations per warm Fill on gappy axes", allocs)
	}
}

func TestT0StartEnd(t *testing.T) {
	all, ds := newGappyJob(t, "")
	times := ds["satellite.zarr"].arrays["time"].ints
	// Bounds on candidates (inclusive) with a gap inside the range.
	lo, hi := times[all.cands[3]], times[all.cands[len(all.cands)-4]]
	iso := func(v int64) string { return time.Unix(v, 0).UTC().Format("2006-01-02T15:04:05Z") }
	j, _ := newGappyJob(t, fmt.Sprintf("t0_start = %q\nt0_end = %q\n", iso(lo), strings.Replace(iso(hi)[:16], "T", " ", 1)))
	var want []int32
	for _, c := range all.cands {
		if t0 := times[c]; t0 >= lo && t0 <= hi {
			want = append(want, c)
		}
	}
	if len(want) != len(all.cands)-6 || fmt.Sprint(j.cands) != fmt.Sprint(want) {
		t.Fatalf("candidates %v, want %v (all %v)", j.cands, want, all.cands)
	}
	rs := j.Rejections()
	outside := 0
	for _, v := range times {
		if v < lo || v > hi {
			outside++
		}
	}
	if last := rs[len(rs)-1]; last.Field != "batch" || last.Count != outside || !strings.Contains(last.First, "outside t0_start .. t0_end") {
		t.Errorf("range rejection %+v, want %d", last, outside)
	}
	buf := batchBuf(j)
	seen := map[int64]bool{}
	for b := uint64(0); b < 30; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		for _, t0 := range bytesAsInt64(buf[3]) {
			if t0 < lo || t0 > hi {
				t.Fatalf("t0 %s outside t0_start .. t0_end", fmtTime(t0))
			}
			seen[t0] = true
		}
	}
	if !seen[lo] || !seen[hi] {
		t.Errorf("120 examples never drew the bounds (inclusive): %v", seen)
	}
	// Two periods (as ocf-data-sampler's time_periods): a t0 in either, none between them.
	mid1, mid2 := times[all.cands[len(all.cands)/3]], times[all.cands[2*len(all.cands)/3]]
	jp, _ := newGappyJob(t, fmt.Sprintf("time_periods = [[%q, %q], [%q, \"\"]]\n", iso(lo), iso(mid1), iso(mid2)))
	var inEither []int32
	for _, c := range all.cands {
		if t0 := times[c]; t0 >= lo && t0 <= mid1 || t0 >= mid2 {
			inEither = append(inEither, c)
		}
	}
	if fmt.Sprint(jp.cands) != fmt.Sprint(inEither) {
		t.Errorf("two periods: candidates %v, want %v", jp.cands, inEither)
	}
	if last := jp.Rejections()[len(jp.Rejections())-1]; last.Field != "batch" || !strings.Contains(last.First, "outside time_periods") {
		t.Errorf("two periods: range rejection %+v", last)
	}
	// A TOML date-time works as well as a string.
	toml := fmt.Sprintf("t0_start = %s\nt0_end = %s\n", iso(lo), iso(hi)[:19])
	if j2, _ := newGappyJob(t, toml); fmt.Sprint(j2.cands) != fmt.Sprint(want) {
		t.Errorf("TOML date-times: %v", j2.cands)
	}
}

func TestT0RangeErrors(t *testing.T) {
	for _, c := range []struct {
		batch string
		want  []string
	}{
		{"t0_start = \"yesterday\"\n", []string{"batch.t0_start", ":5: batch.t0_start", "not an ISO 8601 time"}},
		{"t0_end = 5\n", []string{":5: batch.t0_end", "ISO 8601"}},
		{"t0_start = \"2021-01-02\"\nt0_end = \"2021-01-01\"\n", []string{":6: batch.t0_end", "before t0_start"}},
		{"t0_start = 06:00:00\n", []string{"batch.t0_start", "without a date"}},
	} {
		_, err := parseCfg(t, gappyConfig(c.batch))
		if err == nil {
			t.Errorf("%q accepted", c.batch)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not contain %q", c.batch, err, w)
			}
		}
	}
	// A range with no anchor time, and one whose times no source accepts.
	for _, c := range []struct {
		batch string
		want  []string
	}{
		{"t0_start = \"2030-01-01\"\n", []string{"batch.t0_start", "no anchor time is within t0_start .. t0_end (2030-01-01T00:00 .. -)"}},
		{"time_periods = [[\"2030-01-01\", \"\"], [\"\", \"2020-01-01\"]]\n", []string{"batch.time_periods",
			"no anchor time is within time_periods (2030-01-01T00:00 .. -, - .. 2020-01-01T00:00)"}},
		{"t0_end = \"2020-12-31T23:00:00Z\"\n", []string{"batch.t0_end", "no anchor time"}},
		{"t0_start = \"2021-01-01T00:00Z\"\nt0_end = \"2021-01-01T00:20Z\"\n", []string{"no valid t0", "within t0_start .. t0_end",
			"source[0] (satellite) rejects 5: at t0 2021-01-01T00:00: the time window leaves the time coordinate", "source[1] (nwp) rejects 5"}},
	} {
		cfg, err := parseCfg(t, gappyConfig(c.batch))
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewJob(cfg, Options{Open: memOpen(gappyMem())})
		var fe *config.FieldError
		if err == nil || !errors.As(err, &fe) {
			t.Fatalf("%q: %v", c.batch, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not contain %q", c.batch, err, w)
			}
		}
	}
}

func TestTimeCoordinateErrorsNameStoreAndIndex(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(map[string]*memDataset)
		wants []string
	}{
		{"repeated satellite time", func(ds map[string]*memDataset) {
			ts := ds["satellite.zarr"].arrays["time"].ints
			ts[30] = ts[29]
		}, []string{"source[0].store", "satellite.zarr/time", "not strictly ascending at index 30"}},
		{"descending init times", func(ds map[string]*memDataset) {
			ts := ds["nwp.zarr"].arrays["init_time"].ints
			ts[2], ts[3] = ts[3], ts[2]
		}, []string{"source[1].store", "nwp.zarr/init_time", "index 3"}},
		{"repeated step", func(ds map[string]*memDataset) {
			ts := ds["nwp.zarr"].arrays["step"].ints
			ts[5] = ts[4]
		}, []string{"source[1].store", "nwp.zarr/step", "index 5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseCfg(t, gappyConfig(""))
			if err != nil {
				t.Fatal(err)
			}
			ds := gappyMem()
			c.edit(ds)
			_, err = NewJob(cfg, Options{Open: memOpen(ds)})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// BenchmarkWindowPlace: one window's indices per example and source, on a regular axis through
// timeAxis (the fast path) and through seriesIndices alone (the code before gaps were
// allowed), and on a gappy axis (the search).
func BenchmarkWindowPlace(b *testing.B) {
	vals := make([]int64, 105120) // a year of 5-minute steps
	for i := range vals {
		vals[i] = 1609459200 + int64(i)*300
	}
	reg, _ := newTimeAxis(vals, fmtTime)
	gappy, _ := newTimeAxis(append(append([]int64(nil), vals[:50000]...), vals[50003:]...), fmtTime)
	w := timeWindow{first: -6, n: 19, res: 300}
	at := make([]int, w.n)
	var sink int
	b.Run("regular", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sp, _ := reg.place(w, vals[(i*7919)%90000+100], at)
			sink += sp.first
		}
	})
	b.Run("seriesIndices", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f, _, _ := seriesIndices(reg.reg, w, vals[(i*7919)%90000+100])
			sink += f
		}
	})
	b.Run("gappy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sp, _ := gappy.place(w, vals[(i*7919)%90000+100], at)
			sink += sp.first
		}
	})
	_ = sink
}

// With order = "epochs" an epoch permutes exactly the candidates that the gaps and
// t0_start / t0_end leave: every one of them once (up to the dropped tail), no other t0.
func TestEpochsOverGappyRange(t *testing.T) {
	all, ds := newGappyJob(t, "")
	times := ds["satellite.zarr"].arrays["time"].ints
	lo, hi := times[all.cands[2]], times[all.cands[len(all.cands)-3]]
	iso := func(v int64) string { return time.Unix(v, 0).UTC().Format(time.RFC3339) }
	j, _ := newGappyJob(t, fmt.Sprintf("order = \"epochs\"\nt0_start = %q\nt0_end = %q\n", iso(lo), iso(hi)))
	want := map[int64]bool{}
	for _, c := range all.cands {
		if v := times[c]; v >= lo && v <= hi {
			want[v] = true
		}
	}
	st := j.Stats()
	if st.Samples != uint64(len(want)) || st.EpochBatches != uint64(len(want)/j.size) {
		t.Fatalf("samples %d, epoch batches %d; want %d candidates", st.Samples, st.EpochBatches, len(want))
	}
	seen := map[int64]bool{}
	buf := batchBuf(j)
	for b := uint64(0); b < st.EpochBatches; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		for _, v := range bytesAsInt64(buf[3]) {
			if !want[v] || seen[v] {
				t.Fatalf("batch %d: t0 %s (a candidate in range: %v, seen before: %v)", b, fmtTime(v), want[v], seen[v])
			}
			seen[v] = true
		}
	}
	if len(want)-len(seen) >= j.size {
		t.Fatalf("one epoch drew %d of %d candidates", len(seen), len(want))
	}
}
