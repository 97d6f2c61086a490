package sampler

import (
	"fmt"
	"sort"

	"github.com/gobatch/gobatch/features"
	"github.com/gobatch/gobatch/sampler/chunks"
	"github.com/gobatch/gobatch/sampler/rules"
)

// dataSource is one zarr source of a job (a grid, NWP or points role): it says whether its window fits at a t0 and gathers one
// example's window.
type dataSource interface {
	spec() *Spec
	data() *chunked
	// fits reports whether every step of the source's window exists at anchor time t0 (unix
	// seconds); whyNot says what is missing when it does not: its cause, and with detail the
	// step and times (called for each rejected time at start-up, the report counting the
	// causes; with detail only for the first time of each cause).
	fits(t0 int64) bool
	whyNot(t0 int64, detail bool) reject
	// fill writes example ex into out (one example's slice of the source's tensor).
	fill(rs *readerState, ex *example, out []float32) error
}

// example is one drawn example.
type example struct {
	ti     int   // anchor time index of t0
	t0     int64 // unix seconds
	cy, cx int   // anchor pixel of the centre
	site   int   // site-anchored: the location index (sites.go)
	// dropout cut-off per source: steps after t0 + cut are filled; math.MaxInt64 for none
	cut []int64
}

// readerState is what one Fill call uses; states are reused, so steady state allocates nothing.
type readerState struct {
	pins chunks.Pins
	sel  []int32
	dist []float64
	ex   example
	segs []int    // locality: distinct segments of the batch (stats)
	keys []uint64 // prefetch: chunks of the batch
	at   []int    // time indices of a window whose steps are not evenly spaced (span.at)
	nt   bool     // write rows with non-temporal stores (Job.nt)
	// a per-target NWP window (nwptargets.go): the run and step of each target time, and the
	// accumulated channels' step after the window
	nwpRun, nwpStep []int
	accum           []float32
	xyBuf           []float32         // layout XYIncreasing: a crop in store order before its transpose (xylayout.go)
	sun             features.SunCache // the site features' sun positions by time (sitefeatures.go)
}

// timeScratch is rs.at with room for n indices; it grows once, so steady state allocates
// nothing.
func (rs *readerState) timeScratch(n int) []int {
	if len(rs.at) < n {
		rs.at = make([]int, n)
	}
	return rs.at[:n]
}

// reject is why a source rules out a t0: its cause (one of a few classes, which the start-up
// report counts) and, when asked for, the detail of this t0 (which step, which time): formatting
// it for every rejected time of a long archive would cost more than finding the cause.
type reject struct {
	cause  string
	detail string
}

func (r reject) String() string { return r.detail }

// The causes of a rejected t0.
const (
	causeEdge   = "the window leaves the time coordinate"
	causeGap    = "the time coordinate has a gap where the window needs a step"
	causeNoRun  = "no NWP run is old enough"
	causeStale  = "the latest NWP run is too stale"
	causeNoStep = "the NWP run lacks a step of the window"
)

// windowWhy says which step of window w at t0 the time axis lacks: past an end of the
// coordinate, or in a gap, with the spacing of the coordinate around it (a window resolution
// finer than the store's steps rejects almost every t0 that way). Without detail, the cause only.
func windowWhy(t *timeAxis, w timeWindow, t0 int64, detail bool) reject {
	_, k := t.place(w, t0, nil)
	if k < 0 {
		return reject{}
	}
	off := (w.first + int64(k)) * w.res
	v := t0 + off
	edge := v < t.value(0) || v > t.last()
	switch {
	case !detail && edge:
		return reject{cause: causeEdge}
	case !detail:
		return reject{cause: causeGap}
	case edge:
		return reject{causeEdge, fmt.Sprintf("the time window leaves the time coordinate (t0 %s = %s is outside %s .. %s)",
			fmtOffset(off), fmtTime(v), fmtTime(t.value(0)), fmtTime(t.last()))}
	}
	i := sort.Search(t.len(), func(i int) bool { return t.value(i) > v }) // t.value(i-1) < v < t.value(i)
	return reject{causeGap, fmt.Sprintf("the time coordinate has no step at t0 %s = %s (a gap: its steps there are %s and %s, %s apart; the window's are %s apart: time_resolution_minutes)",
		fmtOffset(off), fmtTime(v), fmtTime(t.value(i-1)), fmtTime(t.value(i)), fmtSeconds(t.value(i)-t.value(i-1)), fmtSeconds(w.res))}
}

// fmtOffset writes seconds relative to t0 or an init time: "+ 60 min", "- 30 min", "+ 90 s".
func fmtOffset(s int64) string {
	if s < 0 {
		return "- " + fmtSeconds(-s)
	}
	return "+ " + fmtSeconds(s)
}

// fmtSeconds writes a duration in whole minutes when it is one ("5 min"), else in seconds.
func fmtSeconds(s int64) string {
	if s%60 == 0 {
		return fmt.Sprintf("%d min", s/60)
	}
	return fmt.Sprintf("%d s", s)
}

// public is the window as rule sets see it (rules.Window).
func (w timeWindow) public() rules.Window { return rules.Window{First: w.first, N: w.n, Res: w.res} }

// dropoutFills is the steps [from, to) of window w for t0 that source sp's dropout with cut-off
// cut (seconds after t0) fills, by the job's rule set.
func dropoutFills(sp *Spec, w timeWindow, t0, cut int64) (from, to int) {
	return sp.rules.DropoutFills(w.public(), w.cutFrom(t0, cut))
}

// ---- grid: (time, channel, y, x) ------------------------------------------------------------

type gridSource struct {
	s      *Spec
	c      *chunked
	dims   dimMap   // the store's dimensions on the canonical axes
	times  timeAxis // unix seconds
	win    timeWindow
	chans  []int     // store channel of each output channel
	xs, ys []float64 // coordinates
	// non-anchor sources: where the crop starts for every anchor pixel (align.go)
	crop *cropTable
	// crops in every source's own system: the crop's first row and column for each location
	// (sitecrop.go); nil otherwise
	siteCrop []int32
	// placement (align.go): the store (its y and x axes are named in dims), the crs once known
	store    Dataset
	crs      string
	crsKnown bool
}

func (g *gridSource) spec() *Spec    { return g.s }
func (g *gridSource) data() *chunked { return g.c }

func (g *gridSource) fits(t0 int64) bool {
	_, missing := g.times.place(g.win, t0, nil)
	return missing < 0
}

func (g *gridSource) whyNot(t0 int64, detail bool) reject {
	return windowWhy(&g.times, g.win, t0, detail)
}

// box is the example's window in the array; at is scratch for an unevenly spaced window.
func (g *gridSource) box(ex *example, bx *box4, at []int) bool {
	sp, missing := g.times.place(g.win, ex.t0, at)
	if missing >= 0 {
		return false
	}
	*bx = box4{lead: -1, a0: sp.first, aStride: sp.stride, at: sp.at, na: g.win.n, b: g.chans,
		h: g.s.Height, w: g.s.Width}
	bx.nanFrom, bx.nanTo = dropoutFills(g.s, g.win, ex.t0, ex.cut[g.s.Index])
	bx.y0, bx.x0 = g.cropStart(ex)
	return true
}

// cropStart is the first row and column of example ex's crop: around the site itself when
// crops are placed in every source's own system (sitecrop.go), centred on the drawn pixel for
// the anchor, else where the anchor pixel's position falls (align.go).
func (g *gridSource) cropStart(ex *example) (y0, x0 int) {
	switch {
	case g.siteCrop != nil:
		return int(g.siteCrop[2*ex.site]), int(g.siteCrop[2*ex.site+1])
	case g.crop == nil:
		return ex.cy - g.s.Height/2, ex.cx - g.s.Width/2
	}
	return g.crop.at(ex.cy, ex.cx)
}

func (g *gridSource) fill(rs *readerState, ex *example, out []float32) error {
	var bx box4
	return gatherBox(rs, g.c, &bx, g.box(ex, &bx, rs.timeScratch(g.win.n)), ex, out, "no time window")
}

// gatherBox gathers box bx of c into out; when the example has no box (found false: t0 was a
// candidate, so it is a bug) missing says what is missing. The roles compute their boxes with
// concrete calls, so that bx stays on the stack (Fill allocates nothing).
func gatherBox(rs *readerState, c *chunked, bx *box4, found bool, ex *example, out []float32, missing string) error {
	if !found {
		return fmt.Errorf("%s: %s at t0 %d", c.what, missing, ex.t0)
	}
	defer rs.pins.ReleaseAll()
	return gather4(&rs.pins, c, bx, out, rs.nt)
}

// ---- nwp: (init_time, step, channel, y, x) --------------------------------------------------

type nwpSource struct {
	s     *Spec
	c     *chunked
	inits timeAxis // unix seconds
	steps timeAxis // lead seconds
	rule  nwpRule
	chans []int
	crop  cropTable // where the crop starts for every anchor pixel (align.go)
	// targets: a rule set's per-target window (nwptargets.go); nil: one run per example (rule)
	targets *targetWindow
	// the grid's coordinates (store order) and their names
	xs, ys       []float64
	xName, yName string
	siteCrop     []int32 // crops in every source's own system: first row and column per location (sitecrop.go)
}

func (n *nwpSource) spec() *Spec { return n.s }

// cropStart is the first row and column of example ex's crop: around the site itself when
// crops are placed in every source's own system (sitecrop.go), else where the anchor pixel's
// position falls (align.go).
func (n *nwpSource) cropStart(ex *example) (y0, x0 int) {
	if n.siteCrop != nil {
		return int(n.siteCrop[2*ex.site]), int(n.siteCrop[2*ex.site+1])
	}
	return n.crop.at(ex.cy, ex.cx)
}
func (n *nwpSource) data() *chunked { return n.c }

func (n *nwpSource) fits(t0 int64) bool {
	if n.targets != nil {
		return n.fitsTargets(t0)
	}
	_, ok := n.rule.choose(n.inits.vals, &n.steps, t0, nil)
	return ok
}

func (n *nwpSource) whyNot(t0 int64, detail bool) reject {
	if n.targets != nil {
		return n.whyNotTargets(t0, detail)
	}
	r := n.rule
	run := latestAtOrBefore(n.inits.vals, t0-r.minStale)
	switch {
	case run < 0 && !detail:
		return reject{cause: causeNoRun}
	case run < 0:
		return reject{causeNoRun, fmt.Sprintf("no run with init_time <= t0 - %d min (the first run is %s)", r.minStale/60, fmtTime(n.inits.value(0)))}
	}
	init := n.inits.value(run)
	stale := r.maxStale > 0 && t0-init > r.maxStale
	switch {
	case stale && !detail:
		return reject{cause: causeStale}
	case !detail:
		return reject{cause: causeNoStep}
	case stale:
		return reject{causeStale, fmt.Sprintf("the latest run with init_time <= t0 - %d min (%s) is more than max_staleness_minutes (%d) older than t0",
			r.minStale/60, fmtTime(init), r.maxStale/60)}
	}
	lead := r.lead(init, t0)
	_, k := n.steps.steps(lead, r.window.res, r.window.n, nil)
	older := "no older run"
	if r.maxStale > 0 {
		older = fmt.Sprintf("no older run within max_staleness_minutes (%d)", r.maxStale/60)
	}
	return reject{causeNoStep, fmt.Sprintf("the latest run (%s) has no step %s, and %s has every step of the window",
		fmtTime(init), fmtOffset(lead+int64(max(k, 0))*r.window.res), older)}
}

// box is the example's window in the array; at is scratch for an unevenly spaced window.
func (n *nwpSource) box(ex *example, bx *box4, at []int) bool {
	ch, ok := n.rule.choose(n.inits.vals, &n.steps, ex.t0, at)
	if !ok {
		return false
	}
	y0, x0 := n.cropStart(ex)
	*bx = box4{lead: ch.run, a0: ch.steps.first, aStride: ch.steps.stride, at: ch.steps.at, na: n.rule.window.n, b: n.chans,
		y0: y0, h: n.s.Height, x0: x0, w: n.s.Width, nanFrom: n.rule.window.n, nanTo: n.rule.window.n}
	return true
}

func (n *nwpSource) fill(rs *readerState, ex *example, out []float32) error {
	if n.targets != nil {
		return n.fillTargets(rs, ex, out)
	}
	var bx box4
	return gatherBox(rs, n.c, &bx, n.box(ex, &bx, rs.timeScratch(n.rule.window.n)), ex, out, "no run")
}

// ---- points: (time, system) -----------------------------------------------------------------

type pointSource struct {
	s      *Spec
	c      *chunked
	times  timeAxis
	win    timeWindow
	xs, ys []float64     // position of each system, in its own coordinates
	geo    *geoPositions // their geocentric positions when xs, ys are longitude/latitude (distance.go)
	xName  string        // the names of the positions' coordinates
	yName  string
	at     *positions // the anchor pixels' positions in the systems' coordinates (align.go)
	ids    []int64
	order  []int32 // system indices by ascending id (then index)
	rank   []int32 // rank[i] = position of system i in order
	// crops in every source's own system: the system of each location (the site's own series,
	// not the nearest system to the crop); nil otherwise
	siteSys []int32
}

func (p *pointSource) spec() *Spec    { return p.s }
func (p *pointSource) data() *chunked { return p.c }

func (p *pointSource) fits(t0 int64) bool {
	_, missing := p.times.place(p.win, t0, nil)
	return missing < 0
}

func (p *pointSource) whyNot(t0 int64, detail bool) reject {
	return windowWhy(&p.times, p.win, t0, detail)
}

// setOrder prepares the ascending-id ordering of the chosen systems.
func (p *pointSource) setOrder() {
	n := len(p.ids)
	p.order = make([]int32, n)
	for i := range p.order {
		p.order[i] = int32(i)
	}
	sort.SliceStable(p.order, func(a, b int) bool { return p.ids[p.order[a]] < p.ids[p.order[b]] })
	p.rank = make([]int32, n)
	for r, i := range p.order {
		p.rank[i] = int32(r)
	}
}

// choose writes the k systems nearest the example's centre, in ascending id order, to rs.sel.
func (p *pointSource) choose(rs *readerState, ex *example) error {
	k := p.s.NearestK
	rs.sel, rs.dist = rs.sel[:k], rs.dist[:k]
	if p.siteSys != nil {
		rs.sel[0] = p.siteSys[ex.site]
		return nil
	}
	x, y := p.at.at(ex.cy, ex.cx)
	if !p.nearest(x, y, rs.sel, rs.dist) {
		return fmt.Errorf("%s: fewer than %d systems have coordinates", p.c.what, k)
	}
	// nearestK sorted by index; ascending id is the order of rank (equal to index order
	// when the ids are ascending, as they usually are).
	sel := rs.sel
	for i := 1; i < k; i++ {
		v := sel[i]
		j := i
		for j > 0 && p.rank[sel[j-1]] > p.rank[v] {
			sel[j] = sel[j-1]
			j--
		}
		sel[j] = v
	}
	return nil
}

// addKeys adds the keys of the chunks the example's window of its k nearest systems touches
// (prefetch: from object storage each chunk the gather misses costs a request's latency).
func (p *pointSource) addKeys(rs *readerState, ex *example, keys []uint64) []uint64 {
	sp, missing := p.times.place(p.win, ex.t0, rs.timeScratch(p.win.n))
	if missing >= 0 || p.choose(rs, ex) != nil {
		return keys // the gather reports it
	}
	c := p.c
	ct, cs := c.chunks[0], c.chunks[1]
	lastKt := -1
	from, to := dropoutFills(p.s, p.win, ex.t0, ex.cut[p.s.Index])
	for step := 0; step < p.win.n; step++ {
		if step >= from && step < to {
			continue // filled
		}
		kt := sp.index(step) / ct
		if kt == lastKt {
			continue
		}
		lastKt = kt
		for _, sys := range rs.sel {
			keys = append(keys, c.key(kt*c.gstride[0]+int(sys)/cs*c.gstride[1]))
		}
	}
	return keys
}

// fill64 is fill for a source whose cache holds float64 (chunked.keepFloat64): out is the
// example's float64 rows.
func (p *pointSource) fill64(rs *readerState, ex *example, out []float64) error {
	return gatherPoints(p, rs, ex, out, float64(p.c.fillValue()),
		func(block []byte, i int) float64 { return bytesAsFloat64(block)[i] })
}

func (p *pointSource) fill(rs *readerState, ex *example, out []float32) error {
	c := p.c
	cv := c.rowConv(0)
	return gatherPoints(p, rs, ex, out, c.fillValue(),
		func(block []byte, i int) float32 { return c.value(cv, block, i) })
}

// gatherPoints writes example ex's window of p's chosen systems (rs.sel) into out, steps by
// systems: a dropped-out step as fill, every other value read from its cached chunk by value
// (the cache's form: float32 or stored values, or float64).
func gatherPoints[T float32 | float64](p *pointSource, rs *readerState, ex *example, out []T, fill T,
	value func(block []byte, i int) T) error {
	sp, missing := p.times.place(p.win, ex.t0, rs.timeScratch(p.win.n))
	if missing >= 0 {
		return fmt.Errorf("%s: no time window at t0 %d", p.c.what, ex.t0)
	}
	c := p.c
	k := p.s.NearestK
	nanFrom, nanTo := dropoutFills(p.s, p.win, ex.t0, ex.cut[p.s.Index])
	ct, cs := c.chunks[0], c.chunks[1]
	defer rs.pins.ReleaseAll()
	lastKt := -1
	for step := 0; step < p.win.n; step++ {
		row := out[step*k : (step+1)*k]
		if step >= nanFrom && step < nanTo {
			for i := range row {
				row[i] = fill
			}
			continue
		}
		t := sp.index(step)
		kt, wt := t/ct, t%ct
		if kt != lastKt {
			rs.pins.ReleaseAll() // t only grows: earlier time chunks are done
			lastKt = kt
		}
		for q, sys := range rs.sel {
			ks, ws := int(sys)/cs, int(sys)%cs
			src, err := rs.pins.Get(c.key(kt*c.gstride[0]+ks*c.gstride[1]), c.chunkBytes(), c.load)
			if err != nil {
				return err
			}
			row[q] = value(src, wt*cs+ws)
		}
	}
	return nil
}
