package sampler

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Spatial selection under rules = "ocf" (docs/OCF.md): every gridded source is cropped around
// the site itself, as ocf-data-sampler 1.0.24's select_spatial_slice_pixels does, not around
// the anchor pixel nearest it. The site's longitude/latitude is projected into each source's
// own system (the anchor's `area` attribute or crs, a source's crs, or longitude/latitude),
// the source's coordinates are seen in increasing order (ocf's loader flips a descending
// axis), the site must lie strictly inside them, the centre is the nearest coordinate (the
// first on a tie) and the crop covers [c - size/2, c + size/2) of the increasing axis. Nothing
// is clamped: a site whose crop leaves some source's grid is one that ocf-data-sampler cannot
// sample, so the job leaves it out (ocfPlaceSites).

// ocfAxis is one coordinate of a source as ocf-data-sampler sees it: increasing.
type ocfAxis struct {
	c    []float64 // the store's coordinate, in store order
	desc bool      // the store's order is descending (ocf flips it)
}

func newOCFAxis(c []float64) ocfAxis {
	return ocfAxis{c: c, desc: len(c) > 1 && c[0] > c[len(c)-1]}
}

// inc is the i-th coordinate in increasing order.
func (a ocfAxis) inc(i int) float64 {
	if a.desc {
		return a.c[len(a.c)-1-i]
	}
	return a.c[i]
}

// cropStart is the first store index of a crop of size pixels around v by ocf's rule, or -1
// and why there is none. The crop's store indices are [start, start+size) either way; with a
// descending store they hold the increasing crop reversed.
func (a ocfAxis) cropStart(v float64, size int) (int, string) {
	n := len(a.c)
	if n == 0 || !(a.inc(0) < v && v < a.inc(n-1)) { // false for NaN too
		return -1, fmt.Sprintf("%g is not strictly inside %g .. %g", v, a.inc(0), a.inc(max(n-1, 0)))
	}
	c, best := 0, math.Inf(1)
	for i := 0; i < n; i++ {
		if d := math.Abs(a.inc(i) - v); d < best { // strict: the first index on a tie (argmin)
			c, best = i, d
		}
	}
	lo, hi := c-size/2, c+size/2
	if lo < 0 || hi > n {
		return -1, fmt.Sprintf("the %d-pixel crop around index %d of %d leaves the grid", size, c, n)
	}
	if a.desc {
		return n - hi, ""
	}
	return lo, ""
}

// ocfGrid is a gridded source's coordinates and crop size, for ocf's crops.
type ocfGrid struct {
	src    dataSource
	x, y   ocfAxis
	w, h   int
	xn, yn string // the coordinates' names
	crs    string // the source's system; "" for the anchor's
}

// ocfGrids lists the job's grid and NWP sources for ocf's crops.
func (j *Job) ocfGrids() []ocfGrid {
	var out []ocfGrid
	for _, s := range j.srcs {
		sp := s.spec()
		switch g := s.(type) {
		case *gridSource:
			xn, yn := g.dims.name(axisX), g.dims.name(axisY)
			crs := sourceCRS(sp, xn, yn)
			if g == j.anchor {
				crs = ""
			}
			out = append(out, ocfGrid{src: s, x: newOCFAxis(g.xs), y: newOCFAxis(g.ys), w: sp.Width, h: sp.Height, xn: xn, yn: yn, crs: crs})
		case *nwpSource:
			out = append(out, ocfGrid{src: s, x: newOCFAxis(g.xs), y: newOCFAxis(g.ys), w: sp.Width, h: sp.Height, xn: g.xName, yn: g.yName,
				crs: sourceCRS(sp, g.xName, g.yName)})
		}
	}
	return out
}

// SiteExclusion is a source's crops that some locations cannot have under rules = "ocf": the
// systems (by id) that ocf-data-sampler would fail to sample, and why the first fails.
type SiteExclusion struct {
	Field string  `json:"field"` // "source[0]"
	Name  string  `json:"name"`
	IDs   []int64 `json:"location_ids"`
	First string  `json:"first"` // "location 7: 5.2e+06 is not strictly inside ..."
}

func (e SiteExclusion) String() string {
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = fmt.Sprint(id)
	}
	return fmt.Sprintf("%s (%s) cannot crop locations %s (%s)", e.Field, e.Name, strings.Join(ids, ", "), e.First)
}

// ocfPlaceSites keeps the systems of p (those with a position) that every gridded source can
// crop by ocf's rule, sets each source's crop start per kept location, and records the
// excluded locations per source (SiteExclusions). The one place where rules = "ocf" decides
// which locations a job has.
func (j *Job) ocfPlaceSites(a *Spec, p *pointSource) (*sites, error) {
	grids := j.ocfGrids()
	n := len(p.xs)
	// starts[g][2*i], [2*i+1]: source g's crop start (row, column) for system i; -1: none.
	starts := make([][]int32, len(grids))
	excl := make([]SiteExclusion, len(grids))
	from := sourceCRS(p.s, p.xName, p.yName)
	anchorCRS, err := j.anchor.anchorCRS(j.cfg)
	if err != nil {
		return nil, err
	}
	if from == "" {
		from = anchorCRS
	}
	for gi, g := range grids {
		sp := g.src.spec()
		if len(sp.AnchorCoords) > 0 {
			return nil, j.cfg.Errorf(sp.Field+".anchor_coords", "rules = %q places crops around each site in the source's own system; expected crs instead of anchor_coords", RulesOCF)
		}
		to := g.crs
		if to == "" {
			to = anchorCRS
		}
		xs, ys := append([]float64(nil), p.xs...), append([]float64(nil), p.ys...)
		if from != to && (from == "" || to == "") {
			return nil, j.cfg.Errorf(sp.Field+".crs", "rules = %q projects each site of %s (crs %s) into this source's system (crs %s); expected a crs key or an area attribute on both",
				RulesOCF, p.s.Name, crsName(from), crsName(to))
		}
		if from != to {
			pj, err := transformer(from, to)
			if err != nil {
				return nil, j.cfg.Errorf(g.src.spec().Field+".crs", "%v", err)
			}
			transformAll(pj, xs, ys)
		}
		starts[gi] = make([]int32, 2*n)
		excl[gi] = SiteExclusion{Field: g.src.spec().Field, Name: g.src.spec().Name}
		for i := 0; i < n; i++ {
			x0, whyX := g.x.cropStart(xs[i], g.w)
			y0, whyY := g.y.cropStart(ys[i], g.h)
			starts[gi][2*i], starts[gi][2*i+1] = int32(y0), int32(x0)
			if x0 >= 0 && y0 >= 0 {
				continue
			}
			if len(excl[gi].IDs) == 0 {
				why := whyX
				name := g.xn
				if why == "" {
					why, name = whyY, g.yn
				}
				excl[gi].First = fmt.Sprintf("location %d: %s %s", p.ids[i], name, why)
			}
			excl[gi].IDs = append(excl[gi].IDs, p.ids[i])
		}
	}
	s := &sites{src: p}
	keep := make([]int, 0, n)
	for i := 0; i < n; i++ {
		ok := p.xs[i] == p.xs[i] && p.ys[i] == p.ys[i]
		for gi := range grids {
			ok = ok && starts[gi][2*i] >= 0 && starts[gi][2*i+1] >= 0
		}
		if !ok {
			if s.dropped == 0 {
				s.why = fmt.Sprintf("system %d: no position, or a crop by ocf-data-sampler's rule leaves a source's grid", p.ids[i])
			}
			s.dropped++
			continue
		}
		keep = append(keep, i)
	}
	for _, e := range excl {
		if len(e.IDs) > 0 {
			j.siteExclusions = append(j.siteExclusions, e)
		}
	}
	if len(keep) == 0 {
		var parts []string
		for _, e := range j.siteExclusions {
			parts = append(parts, e.String())
		}
		return nil, j.cfg.Errorf(a.Field+".locations", "none of the %d systems of %s can be sampled by ocf-data-sampler's crop rule: %s",
			n, a.Locations, strings.Join(parts, "; "))
	}
	for gi, g := range grids {
		site := make([]int32, 0, 2*len(keep))
		for _, i := range keep {
			site = append(site, starts[gi][2*i], starts[gi][2*i+1])
		}
		switch s := g.src.(type) {
		case *gridSource:
			s.siteCrop = site
		case *nwpSource:
			s.siteCrop = site
		}
	}
	a0, h, w := j.anchor.siteCrop, j.anchor.s.Height, j.anchor.s.Width
	for k, i := range keep {
		s.sys = append(s.sys, int32(i))
		// The location's anchor pixel: its crop's middle pixel in store order (the x and y
		// tensors, and the nearest systems of other points sources, are read there).
		s.cy = append(s.cy, a0[2*k]+int32(h/2))
		s.cx = append(s.cx, a0[2*k+1]+int32(w/2))
	}
	return s, nil
}

// SiteExclusions lists, under rules = "ocf", each gridded source that cannot crop some of the
// systems of the locations source by ocf-data-sampler's rule, and those systems' ids: the job
// leaves them out (ocf-data-sampler's get_sample would raise for them). Empty otherwise.
func (j *Job) SiteExclusions() []SiteExclusion {
	return append([]SiteExclusion(nil), j.siteExclusions...)
}

func crsName(c string) string {
	if c == "" {
		return "unknown"
	}
	return strconv.Quote(c)
}
