package sampler

import (
	"fmt"
	"math"
	"sort"
)

// dataSource is one zarr source of a job (a grid, NWP or points role): it says whether its window fits at a t0 and gathers one
// example's window.
type dataSource interface {
	spec() *Spec
	data() *chunked
	// fits reports whether the source's window exists at anchor time t0 (unix seconds); why
	// says what is missing when it does not.
	fits(t0 int64) (ok bool, why string)
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
	pins pinSet
	sel  []int32
	dist []float64
	ex   example
	segs []int    // locality: distinct segments of the batch (stats)
	keys []uint64 // prefetch: chunks of the batch
}

// dropout applies a cut-off to a window: the number of leading steps at or before t0 + cut.
func dropoutSteps(w timeWindow, cut int64) int {
	if cut == math.MaxInt64 {
		return w.n
	}
	n := floorDiv(cut, w.res) - w.first + 1
	return int(max(0, min(n, int64(w.n))))
}

// ---- grid: (time, channel, y, x) ------------------------------------------------------------

type gridSource struct {
	s      *Spec
	c      *chunked
	dims   dimMap // the store's dimensions on the canonical axes
	times  axis   // unix seconds
	win    timeWindow
	chans  []int     // store channel of each output channel
	xs, ys []float64 // coordinates
	// non-anchor sources: where the crop starts for every anchor pixel (align.go)
	crop *cropTable
	// placement (align.go): the store (its y and x axes are named in dims), the crs once known
	store    Dataset
	crs      string
	crsKnown bool
}

func (g *gridSource) spec() *Spec    { return g.s }
func (g *gridSource) data() *chunked { return g.c }

func (g *gridSource) fits(t0 int64) (bool, string) {
	if _, _, ok := seriesIndices(g.times, g.win, t0); !ok {
		return false, "the time window leaves the time coordinate"
	}
	return true, ""
}

// box is the example's window in the array.
func (g *gridSource) box(ex *example, bx *box4) bool {
	first, stride, ok := seriesIndices(g.times, g.win, ex.t0)
	if !ok {
		return false
	}
	*bx = box4{lead: -1, a0: first, aStride: stride, na: g.win.n, b: g.chans,
		h: g.s.Height, w: g.s.Width, nanFrom: dropoutSteps(g.win, ex.cut[g.s.Index])}
	if g.crop == nil { // the anchor: the crop is centred on the drawn pixel
		bx.y0, bx.x0 = ex.cy-g.s.Height/2, ex.cx-g.s.Width/2
	} else {
		bx.y0, bx.x0 = g.crop.at(ex.cy, ex.cx)
	}
	return true
}

func (g *gridSource) fill(rs *readerState, ex *example, out []float32) error {
	var bx box4
	return gatherBox(rs, g.c, &bx, g.box(ex, &bx), ex, out, "no time window")
}

// gatherBox gathers box bx of c into out; when the example has no box (found false: t0 was a
// candidate, so it is a bug) missing says what is missing. The roles compute their boxes with
// concrete calls, so that bx stays on the stack (Fill allocates nothing).
func gatherBox(rs *readerState, c *chunked, bx *box4, found bool, ex *example, out []float32, missing string) error {
	if !found {
		return fmt.Errorf("%s: %s at t0 %d", c.what, missing, ex.t0)
	}
	defer rs.pins.releaseAll()
	return gather4(&rs.pins, c, bx, out)
}

// ---- nwp: (init_time, step, channel, y, x) --------------------------------------------------

type nwpSource struct {
	s     *Spec
	c     *chunked
	inits []int64 // unix seconds, ascending
	steps axis    // seconds
	rule  nwpRule
	chans []int
	crop  cropTable // where the crop starts for every anchor pixel (align.go)
}

func (n *nwpSource) spec() *Spec    { return n.s }
func (n *nwpSource) data() *chunked { return n.c }

func (n *nwpSource) fits(t0 int64) (bool, string) {
	if _, ok := n.rule.choose(n.inits, n.steps, t0); !ok {
		return false, n.whyNot(t0)
	}
	return true, ""
}

func (n *nwpSource) whyNot(t0 int64) string {
	run := latestAtOrBefore(n.inits, t0-n.rule.minStale)
	switch {
	case run < 0:
		return fmt.Sprintf("no run with init_time <= t0 - %d min", n.rule.minStale/60)
	case n.rule.maxStale > 0 && t0-n.inits[run] > n.rule.maxStale:
		return fmt.Sprintf("the latest run is more than max_staleness_minutes (%d) older than t0", n.rule.maxStale/60)
	default:
		return "the lead steps of the window are not all in the run"
	}
}

// box is the example's window in the array.
func (n *nwpSource) box(ex *example, bx *box4) bool {
	ch, ok := n.rule.choose(n.inits, n.steps, ex.t0)
	if !ok {
		return false
	}
	y0, x0 := n.crop.at(ex.cy, ex.cx)
	*bx = box4{lead: ch.run, a0: ch.step0, aStride: ch.stepStride, na: n.rule.window.n, b: n.chans,
		y0: y0, h: n.s.Height, x0: x0, w: n.s.Width, nanFrom: n.rule.window.n}
	return true
}

func (n *nwpSource) fill(rs *readerState, ex *example, out []float32) error {
	var bx box4
	return gatherBox(rs, n.c, &bx, n.box(ex, &bx), ex, out, "no run")
}

// ---- points: (time, system) -----------------------------------------------------------------

type pointSource struct {
	s      *Spec
	c      *chunked
	times  axis
	win    timeWindow
	xs, ys []float64 // position of each system
	xName  string    // the names of the positions' coordinates
	yName  string
	at     *positions // the anchor pixels' positions in the systems' coordinates (align.go)
	ids    []int64
	order  []int32 // system indices by ascending id (then index)
	rank   []int32 // rank[i] = position of system i in order
	anchor *gridSource
}

func (p *pointSource) spec() *Spec    { return p.s }
func (p *pointSource) data() *chunked { return p.c }

func (p *pointSource) fits(t0 int64) (bool, string) {
	if _, _, ok := seriesIndices(p.times, p.win, t0); !ok {
		return false, "the time window leaves the time coordinate"
	}
	return true, ""
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
	x, y := p.at.at(ex.cy, ex.cx)
	if !nearestK(p.xs, p.ys, x, y, rs.sel, rs.dist) {
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

func (p *pointSource) fill(rs *readerState, ex *example, out []float32) error {
	first, stride, ok := seriesIndices(p.times, p.win, ex.t0)
	if !ok {
		return fmt.Errorf("%s: no time window at t0 %d", p.c.what, ex.t0)
	}
	c := p.c
	k := p.s.NearestK
	nanFrom := dropoutSteps(p.win, ex.cut[p.s.Index])
	fill := c.fillValue()
	ct, cs := c.chunks[0], c.chunks[1]
	defer rs.pins.releaseAll()
	for step := 0; step < p.win.n; step++ {
		row := out[step*k : (step+1)*k]
		if step >= nanFrom {
			for i := range row {
				row[i] = fill
			}
			continue
		}
		t := first + step*stride
		kt, wt := t/ct, t%ct
		if step == 0 || (t-stride)/ct != kt {
			rs.pins.releaseAll() // t only grows: earlier time chunks are done
		}
		for q, sys := range rs.sel {
			ks, ws := int(sys)/cs, int(sys)%cs
			src, err := rs.pins.get(c.key(kt*c.gstride[0]+ks*c.gstride[1]), c.elems, c.load)
			if err != nil {
				return err
			}
			row[q] = src[wt*cs+ws]
		}
	}
	return nil
}
