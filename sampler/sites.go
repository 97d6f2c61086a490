package sampler

import (
	"fmt"
	"math"
	"slices"

	"github.com/gobatch/gobatch/config"
)

// Site-anchored examples: with locations = "pv" on the anchor, the examples are centred on the
// systems of points source "pv" (examples are (t0, site) pairs) instead of on
// pixels drawn from the whole grid. Each system is placed once, at start-up, on the anchor
// pixel nearest its position; systems without a position, outside the anchor's grid or whose
// anchor crop does not fit around that pixel are dropped and counted. An example then draws a
// kept system (its location index) where it would draw a pixel, and the batch's location_id
// tensor holds the system's id.

// LocationIDTensor is the name of the int64 [batch] tensor of site-anchored batches: the id of
// the system each example is centred on.
const LocationIDTensor = "location_id"

// drawSite is the purpose of a site-anchored example's location draw: the row's purpose,
// which site mode does not use otherwise.
const drawSite = drawY

// sites are the kept systems of the locations source, in store order.
type sites struct {
	src    *pointSource
	sys    []int32 // the system (index in the points source) of each location
	cy, cx []int32 // its anchor pixel
	why    string  // why the first dropped system was dropped
	left   []int64 // the ids of the dropped systems (Job.Warnings)
}

// leaveOut records that system id is not a location, and why when it is the first.
func (s *sites) leaveOut(id int64, why string) {
	if len(s.left) == 0 {
		s.why = fmt.Sprintf("system %d: %s", id, why)
	}
	s.left = append(s.left, id)
}

func (s *sites) n() int { return len(s.sys) }

func (s *sites) centre(i int) (cy, cx int) { return int(s.cy[i]), int(s.cx[i]) }

func (s *sites) id(i int) int64 { return s.src.ids[s.sys[i]] }

// position is location i's system position in its own coordinates (x, y: longitude,
// latitude when in degrees).
func (s *sites) position(i int) (x, y float64) { return s.src.xs[s.sys[i]], s.src.ys[s.sys[i]] }

// Locations is the number of locations the examples are centred on when site-anchored (0:
// centres are drawn from the whole grid). Location indices run over [0, Locations()).
func (j *Job) Locations() int {
	if j.sites == nil {
		return 0
	}
	return j.sites.n()
}

// LocationsDropped is the number of systems of the locations source that are not locations:
// without a position, outside the anchor's grid, or too near its edge for the anchor's crop.
func (j *Job) LocationsDropped() int {
	if j.sites == nil {
		return 0
	}
	return len(j.sites.left)
}

// Location returns location i's system id and its centre pixel (anchor row cy, column cx).
func (j *Job) Location(i int) (id int64, cy, cx int) {
	cy, cx = j.sites.centre(i)
	return j.sites.id(i), cy, cx
}

// readPositions reads the systems' positions of points source p.
func readPositions(cfg *config.Config, p *pointSource, ds Dataset, arr Array, idDim string, n int) error {
	sp := p.s
	xName, yName, err := positionNames(cfg, sp, ds, arr, idDim)
	if err != nil {
		return err
	}
	if p.xs, err = readFloats(cfg, sp, ds, xName, n); err != nil {
		return err
	}
	if p.ys, err = readFloats(cfg, sp, ds, yName, n); err != nil {
		return err
	}
	p.xName, p.yName = xName, yName
	geo, err := inDegrees(cfg, sp, xName, yName)
	if err != nil {
		return err
	}
	if geo {
		p.geo = newGeoPositions(p.xs, p.ys)
	}
	return nil
}

// placeOnSystems gives, for a points anchor a, its systems' positions in the coordinates of
// points source sp, laid out as one row of pixels (row 0, column = a's system index): a's
// locations are its systems, and their "pixels" are those columns (placeSitesOwn).
func placeOnSystems(cfg *config.Config, sp *Spec, a *pointSource, xName, yName string) (*positions, error) {
	p := &positions{w: len(a.xs), xs: slices.Clone(a.xs), ys: slices.Clone(a.ys)}
	from, to := sourceCRS(a.s, a.xName, a.yName), sourceCRS(sp, xName, yName)
	if to == "" {
		to = from // no crs of its own: it shares the anchor's coordinates
	}
	if from == to {
		return p, nil
	}
	if from == "" {
		return nil, cfg.Errorf(sp.Field+".crs", "%s is in %s, but the anchor (%s) has no crs key nor positions named longitude/latitude; expected crs on the anchor",
			sp.Name, to, a.s.Field)
	}
	pj, err := transformer(from, to)
	if err != nil {
		return nil, cfg.Errorf(sp.Field+".crs", "%v", err)
	}
	transformAll(pj, p.xs, p.ys)
	return p, nil
}

// placeSites makes the locations of a site-anchored job (anchor key locations): every system
// of the named points source on its nearest anchor pixel, those whose crop fits kept. The
// centre range (placeCentres) must be known.
func (j *Job) placeSites(a *Spec) error {
	key := a.Field + ".locations"
	var p *pointSource
	var names []string
	for _, q := range j.points {
		names = append(names, q.s.Name)
		if q.s.Name == a.Locations {
			p = q
		}
	}
	if p == nil {
		for _, s := range j.srcs {
			if s.spec().Name == a.Locations {
				return j.cfg.Errorf(key, "%q is a %s source; expected the name of a points source (role = %q)", a.Locations, s.spec().Role, RolePoints)
			}
		}
		return j.cfg.Errorf(key, "%q names no source; expected the name of a points source (%s)", a.Locations, orNone(names))
	}
	crop := j.rules.SiteCrop()
	if crop == nil && j.anchor == nil {
		crop = nearestCrop // no grid to place the sites on: each source crops around them itself
	}
	if crop != nil { // crops around each site in every source's own system
		s, err := j.placeSitesOwn(a, p, crop)
		if err != nil {
			return err
		}
		j.sites = s
		j.siteSeries()
		return j.checkSitePositions()
	}
	pix, err := j.sitePixels(p)
	if err != nil {
		return err
	}
	s := &sites{src: p}
	for i, px := range pix {
		why := ""
		switch {
		case px[0] < 0:
			why = "no position, or a position outside the anchor's grid"
		case px[0] < j.cy0 || px[0] >= j.cy0+j.ny || px[1] < j.cx0 || px[1] >= j.cx0+j.nx:
			why = fmt.Sprintf("the anchor's %d x %d crop does not fit around its pixel", a.Height, a.Width)
		default:
			s.sys = append(s.sys, int32(i))
			s.cy = append(s.cy, int32(px[0]))
			s.cx = append(s.cx, int32(px[1]))
			continue
		}
		s.leaveOut(p.ids[i], why)
	}
	if s.n() == 0 {
		return j.cfg.Errorf(key, "none of the %d systems of %s can be a location (%s); expected systems inside the anchor's grid", len(pix), a.Locations, s.why)
	}
	j.sites = s
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "the configuration has none"
	}
	return quoteList(names)
}

// sitePixels is the anchor pixel (row, column) nearest each system of p; -1, -1 for a system
// without a position or outside the grid. With anchor_coords the pixel is the nearest in the
// systems' coordinates, by the distance nearest_k ranks systems with (distance.go; ties to the
// lower row, then column); otherwise the system's position is converted to the anchor's crs
// (when the two differ) and the nearest coordinate taken along each axis, as for crops.
func (j *Job) sitePixels(p *pointSource) ([][2]int, error) {
	out := make([][2]int, len(p.xs))
	if len(p.s.AnchorCoords) > 0 {
		nearestPixels(p.at, len(j.anchor.ys), len(j.anchor.xs), p.xs, p.ys, p.geo != nil, out)
		return out, nil
	}
	xs, ys := p.xs, p.ys
	from := sourceCRS(p.s, p.xName, p.yName)
	to, err := j.anchor.anchorCRS(j.cfg)
	if err != nil {
		return nil, err
	}
	if from != "" && from != to { // the systems have a crs of their own: bring them to the anchor's
		pj, err := transformer(from, to)
		if err != nil {
			return nil, j.cfg.Errorf(p.s.Field+".crs", "%v", err)
		}
		xs, ys = append([]float64(nil), xs...), append([]float64(nil), ys...)
		transformAll(pj, xs, ys)
	}
	ny, nx := newNearest(j.anchor.ys), newNearest(j.anchor.xs)
	for i := range out {
		out[i] = [2]int{-1, -1}
		if inside(j.anchor.ys, ys[i]) && inside(j.anchor.xs, xs[i]) {
			out[i] = [2]int{ny.index(ys[i]), nx.index(xs[i])}
		}
	}
	return out, nil
}

// inside says whether v lies within coordinate c's extent widened by half a spacing at each
// end (the area of its pixels); false for NaN.
func inside(c []float64, v float64) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range c {
		lo, hi = min(lo, x), max(hi, x)
	}
	half := 0.0
	if len(c) > 1 {
		half = (hi - lo) / float64(len(c)-1) / 2
	}
	return v >= lo-half && v <= hi+half
}

// nearestPixels writes into out[i] the pixel of an h x w grid whose position is nearest
// system i at (xs[i], ys[i]) (the first in row-major order on a tie), by euclidean distance
// in the plane, or between geocentric points when geo (positions in longitude/latitude);
// -1, -1 when no pixel has a position or the system has none.
func nearestPixels(pos *positions, h, w int, xs, ys []float64, geo bool, out [][2]int) {
	px, py := make([]float64, h*w), make([]float64, h*w)
	for cy := 0; cy < h; cy++ {
		for cx := 0; cx < w; cx++ {
			px[cy*w+cx], py[cy*w+cx] = pos.at(cy, cx)
		}
	}
	var pz []float64
	if geo {
		g := newGeoPositions(px, py)
		px, py, pz = g.x, g.y, g.z
	}
	one, dist := make([]int32, 1), make([]float64, 1)
	for i := range out {
		x, y, z := xs[i], ys[i], 0.0
		if geo {
			x, y, z = geocentric(xs[i], ys[i])
		}
		out[i] = [2]int{-1, -1}
		if nearestK(px, py, pz, x, y, z, one, dist) {
			out[i] = [2]int{int(one[0]) / w, int(one[0]) % w}
		}
	}
}

// checkSitePositions refuses a points source that measures its nearest systems from a
// location's anchor pixel when that pixel has no position in its coordinates (with crops in
// every source's own system, pixels no site uses may have none: off the Earth's disk).
func (j *Job) checkSitePositions() error {
	for _, q := range j.points {
		if q.siteSys != nil || q == j.anchorPts {
			continue
		}
		for k := range j.sites.n() {
			cy, cx := j.sites.centre(k)
			if x, y := q.at.at(cy, cx); x != x || y != y {
				return j.cfg.Errorf(q.s.Field+".crs", "location %d's anchor pixel (row %d, column %d) has no position in the coordinates of %s, whose nearest systems are measured from it; expected a pixel with one",
					j.sites.id(k), cy, cx, q.s.Name)
			}
		}
	}
	return nil
}

// siteSeries makes every points source with nearest_k = 1 that has each location's id (the
// generation and its capacity) read that system's own series (.sel(location_id=id)), instead of
// the system nearest the crop: with crops around the site itself the example is the site's.
func (j *Job) siteSeries() {
	for _, q := range j.points {
		if q.s.NearestK != 1 {
			continue
		}
		at := make(map[int64]int32, len(q.ids))
		for i := len(q.ids) - 1; i >= 0; i-- { // the first system of a repeated id
			at[q.ids[i]] = int32(i)
		}
		sys := make([]int32, j.sites.n())
		ok := true
		for k := range sys {
			i, found := at[j.sites.id(k)]
			ok = ok && found
			sys[k] = i
		}
		if ok {
			q.siteSys = sys
		}
	}
}
