package sampler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gobatch/gobatch/sampler/rules"
)

// Crops placed in every source's own system (a rule set's SiteCrop, rules.AxisCrop):
// every gridded source is cropped around the site itself,
// not around the anchor pixel nearest it. The site's longitude/latitude is projected into each
// source's own system (the anchor's `area` attribute or crs, a source's crs, or
// longitude/latitude), and the rule places the crop along each axis of the source's
// coordinates. Nothing is clamped: a site whose crop leaves some source's grid is one the rule
// set cannot sample, so the job leaves it out (placeSitesOwn) and says so (SiteExclusions).

// ownGrid is a gridded source's coordinates and crop size, for crops in its own system.
type ownGrid struct {
	src    dataSource
	x, y   []float64 // the coordinates, in store order
	w, h   int
	xn, yn string // the coordinates' names
	crs    string // the source's system; "" for the anchor's
}

// ownGrids lists the job's grid and NWP sources for crops in their own systems.
func (j *Job) ownGrids() []ownGrid {
	var out []ownGrid
	for _, s := range j.srcs {
		sp := s.spec()
		switch g := s.(type) {
		case *gridSource:
			xn, yn := g.dims.name(axisX), g.dims.name(axisY)
			crs := sourceCRS(sp, xn, yn)
			if g == j.anchor {
				crs = ""
			}
			out = append(out, ownGrid{src: s, x: g.xs, y: g.ys, w: sp.Width, h: sp.Height, xn: xn, yn: yn, crs: crs})
		case *nwpSource:
			out = append(out, ownGrid{src: s, x: g.xs, y: g.ys, w: sp.Width, h: sp.Height, xn: g.xName, yn: g.yName,
				crs: sourceCRS(sp, g.xName, g.yName)})
		}
	}
	return out
}

// SiteExclusion is a source's crops that some locations cannot have by the rule set's crop
// rule: the systems (by id) the rule set could not sample, and why the first fails.
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

// placeSitesOwn keeps the systems of p (those with a position) that every gridded source can
// crop by rule crop, sets each source's crop start per kept location, and records the excluded
// locations per source (SiteExclusions).
func (j *Job) placeSitesOwn(a *Spec, p *pointSource, crop rules.AxisCrop) (*sites, error) {
	grids := j.ownGrids()
	n := len(p.xs)
	// starts[g][2*i], [2*i+1]: source g's crop start (row, column) for system i; -1: none.
	starts := make([][]int32, len(grids))
	excl := make([]SiteExclusion, len(grids))
	from := sourceCRS(p.s, p.xName, p.yName)
	anchorCRS := ""
	if j.anchor != nil {
		var err error
		if anchorCRS, err = j.anchor.anchorCRS(j.cfg); err != nil {
			return nil, err
		}
	}
	if from == "" {
		from = anchorCRS
	}
	for gi, g := range grids {
		sp := g.src.spec()
		if len(sp.AnchorCoords) > 0 {
			return nil, j.cfg.Errorf(sp.Field+".anchor_coords", "rules = %q places crops around each site in the source's own system; expected crs instead of anchor_coords", j.rules.Name())
		}
		to := g.crs
		if to == "" {
			to = anchorCRS
		}
		xs, ys := append([]float64(nil), p.xs...), append([]float64(nil), p.ys...)
		if from != to && (from == "" || to == "") {
			return nil, j.cfg.Errorf(sp.Field+".crs", "rules = %q projects each site of %s (crs %s) into this source's system (crs %s); expected a crs key or an area attribute on both",
				j.rules.Name(), p.s.Name, crsName(from), crsName(to))
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
			x0, whyX := crop(g.x, xs[i], g.w)
			y0, whyY := crop(g.y, ys[i], g.h)
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
			s.leaveOut(p.ids[i], fmt.Sprintf("no position, or a crop by rules %q leaves a source's grid", j.rules.Name()))
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
		return nil, j.cfg.Errorf(a.Field+".locations", "none of the %d systems of %s can be sampled by the crop rule of rules %q: %s",
			n, a.Locations, j.rules.Name(), strings.Join(parts, "; "))
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
	if j.anchor == nil { // a points anchor: a location's "pixel" is its system (placeOnSystems)
		for _, i := range keep {
			s.sys, s.cy, s.cx = append(s.sys, int32(i)), append(s.cy, 0), append(s.cx, int32(i))
		}
		return s, nil
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

// nearestCrop is gobatch's own crop around a site in a source's system, for a points anchor
// under a rule set without a crop rule: the rule of a source placed on an anchor grid (the
// nearest coordinate, ties to the lower index, the crop starting size/2 before it, clamped into
// the grid) at the site's own position. A site outside the grid (beyond half a pixel of its
// outermost coordinates) or a crop larger than the grid is one the source cannot crop.
func nearestCrop(coords []float64, v float64, size int) (start int, why string) {
	n := len(coords)
	switch {
	case size > n:
		return -1, fmt.Sprintf("the %d-pixel crop is larger than the grid's %d", size, n)
	case !inside(coords, v):
		return -1, fmt.Sprintf("%g is outside the grid (%g .. %g)", v, coords[0], coords[n-1])
	}
	return cropStart(nearestIndex(coords, v), size, n), ""
}

// SiteExclusions lists, when crops are placed in every source's own system, each gridded source
// that cannot crop some of the systems of the locations source by the rule set's crop rule, and
// those systems' ids: the job leaves them out (the rule set could not sample them). Empty
// otherwise.
func (j *Job) SiteExclusions() []SiteExclusion {
	return append([]SiteExclusion(nil), j.siteExclusions...)
}

func crsName(c string) string {
	if c == "" {
		return "unknown"
	}
	return strconv.Quote(c)
}
