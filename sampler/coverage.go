package sampler

import (
	"fmt"
	"math"

	"github.com/gobatch/gobatch/config"
)

// Coverage: a grid or NWP source must reach the centres the anchor draws. Its crop table
// clamps a crop into the grid, so a grid that lies elsewhere (an NWP store of another
// region, a wrong crs, coordinates in other units) would otherwise give every example the
// same border crop. A centre is reached when the crop centred on it comes within one pixel
// of the grid: it lies outside the grid's outermost coordinates by at most half the source's
// crop plus one pixel. A source that reaches none of the centres is refused at start-up,
// naming its grid's extent and the centres'. One that reaches only some is accepted: a
// regional NWP under a wider satellite view is the usual case (the centres beyond it get
// crops clamped at its border).

// coverage is what a crop table was built from, kept for the check once the centres are known.
type coverage struct {
	pos    *positions
	ys, xs []float64
}

// extent is the range of a coordinate and the margin a centre may lie outside it: half the
// crop (n pixels) plus one pixel, in the coordinate's units (the mean spacing).
type extent struct{ lo, hi, margin float64 }

func extentOf(c []float64, crop int) (extent, bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range c {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(c) < 2 || !(hi > lo) {
		return extent{}, false // one coordinate: no pixel size to measure "one pixel" with
	}
	step := (hi - lo) / float64(len(c)-1)
	return extent{lo: lo, hi: hi, margin: step * (float64(crop/2) + 1)}, true
}

func (e extent) holds(v float64) bool { return v >= e.lo-e.margin && v <= e.hi+e.margin }

// centreSet is the anchor pixels examples are centred on: a rectangle of pixels, or the sites.
type centreSet struct {
	cy0, ny, cx0, nx int
	sites            *sites
}

func (j *Job) centreSet() centreSet {
	return centreSet{cy0: j.cy0, ny: j.ny, cx0: j.cx0, nx: j.nx, sites: j.sites}
}

// each calls f with every centre until f returns false.
func (cs centreSet) each(f func(cy, cx int) bool) {
	if cs.sites != nil {
		for i := 0; i < cs.sites.n(); i++ {
			if !f(cs.sites.centre(i)) {
				return
			}
		}
		return
	}
	for cy := cs.cy0; cy < cs.cy0+cs.ny; cy++ {
		for cx := cs.cx0; cx < cs.cx0+cs.nx; cx++ {
			if !f(cy, cx) {
				return
			}
		}
	}
}

// checkCoverage refuses a grid or NWP source whose grid reaches none of the centres.
func (j *Job) checkCoverage() error {
	cs := j.centreSet()
	for _, src := range j.srcs {
		var cv *coverage
		switch s := src.(type) {
		case *gridSource:
			if s.crop != nil {
				cv = s.crop.cover
			}
		case *nwpSource:
			cv = s.crop.cover
		}
		if cv == nil {
			continue
		}
		if err := cv.check(j.cfg, src.spec(), cs); err != nil {
			return err
		}
	}
	return nil
}

func (cv *coverage) check(cfg *config.Config, sp *Spec, cs centreSet) error {
	ex, okx := extentOf(cv.xs, sp.Width)
	ey, oky := extentOf(cv.ys, sp.Height)
	var cover struct{ xlo, xhi, ylo, yhi float64 }
	cover.xlo, cover.ylo = math.Inf(1), math.Inf(1)
	cover.xhi, cover.yhi = math.Inf(-1), math.Inf(-1)
	reached, n := false, 0
	cs.each(func(cy, cx int) bool {
		x, y := cv.pos.at(cy, cx)
		cover.xlo, cover.xhi = math.Min(cover.xlo, x), math.Max(cover.xhi, x)
		cover.ylo, cover.yhi = math.Min(cover.ylo, y), math.Max(cover.yhi, y)
		n++
		reached = (!okx || ex.holds(x)) && (!oky || ey.holds(y))
		return !reached
	})
	if reached || n == 0 {
		return nil
	}
	key := sp.Field + ".store"
	switch {
	case len(sp.AnchorCoords) > 0:
		key = sp.Field + ".anchor_coords"
	case sp.CRS != "":
		key = sp.Field + ".crs"
	}
	return cfg.Errorf(key, "the grid of %s (x %s, y %s in its coordinates) does not cover the anchor's centres (x %s, y %s in the same coordinates): "+
		"a crop of %d x %d pixels around any of them would not come within one pixel of the grid; expected a grid over the anchor's region "+
		"(check the store, its crs or anchor_coords)",
		sp.Name, extentText(ex.lo, ex.hi, okx, cv.xs), extentText(ey.lo, ey.hi, oky, cv.ys), extentText(cover.xlo, cover.xhi, true, nil), extentText(cover.ylo, cover.yhi, true, nil),
		sp.Height, sp.Width)
}

// extentText writes a range for a message; a coordinate of one value is written as that value.
func extentText(lo, hi float64, ok bool, c []float64) string {
	if !ok && len(c) > 0 {
		return fmt.Sprintf("%.6g", c[0])
	}
	return fmt.Sprintf("%.6g .. %.6g", lo, hi)
}
