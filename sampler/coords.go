package sampler

import (
	"fmt"
	"math"

	proj "github.com/twpayne/go-proj/v11"

	"github.com/gobatch/gobatch/config"
)

// Checks on a grid's spatial coordinates, made as its store is opened (so that `plan` reports
// them, naming the store and the coordinate): every value is a number, and the values fit the
// units of the crs they are declared in.

// readAxis reads the n values of spatial coordinate name of a grid or NWP source, refusing NaN
// and infinities: a NaN misorders every search along the axis and places crops nowhere.
// (A points source's positions may hold NaN: such a system is never chosen.)
func readAxis(cfg *config.Config, sp *Spec, ds Dataset, name string, n int) ([]float64, error) {
	v, err := readFloats(cfg, sp, ds, name, n)
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, cfg.Errorf(sp.Field+".store", "%s/%s: value %d is %v; expected a number at every index of a spatial coordinate", ds, name, i, x)
		}
	}
	return v, nil
}

// crsAngular reports whether crs's coordinates are angles (degrees): one unit along x at its
// origin moves a point by about a degree of longitude, against about 1e-5 for a metre. known is
// false when PROJ cannot tell (the origin does not convert).
func crsAngular(crs string) (angular, known bool) {
	pj, err := transformer(crs, GeographicCRS)
	if err != nil {
		return false, false
	}
	a, errA := pj.Forward(proj.NewCoord(0, 0, 0, 0))
	b, errB := pj.Forward(proj.NewCoord(1, 0, 0, 0))
	d := math.Hypot(b[0]-a[0], b[1]-a[1])
	if errA != nil || errB != nil || !(d > 0) || math.IsInf(d, 0) {
		return false, false
	}
	return d > 0.01, true
}

// checkCRSUnits refuses coordinates whose values contradict the units of crs: a crs in degrees
// over values outside longitudes and latitudes (a grid in metres declared EPSG:4326), or a crs
// in metres over values within ±180 and ±90 whose steps are under half a metre along both axes
// (degrees declared in a projected crs; a real projected grid of such small pixels is not a
// dataset of this loader's kind, and one in whole metres is never refused). xName and yName
// name the coordinates (STORE/NAME) in the message.
func checkCRSUnits(crs, xName, yName string, xs, ys []float64) error {
	angular, known := crsAngular(crs)
	if !known || len(xs) == 0 || len(ys) == 0 {
		return nil
	}
	xlo, xhi := extentOfValues(xs)
	ylo, yhi := extentOfValues(ys)
	xmax, ymax := max(-xlo, xhi), max(-ylo, yhi)
	if angular {
		if xmax > 360 || ymax > 90 {
			return fmt.Errorf("crs %q is in degrees, but %s spans [%g, %g] and %s spans [%g, %g], beyond longitudes (±360) and latitudes (±90): "+
				"these look like metres of a projected grid; expected the crs the coordinates are in", crs, xName, xlo, xhi, yName, ylo, yhi)
		}
		return nil
	}
	if dx, dy := smallestStep(xs), smallestStep(ys); xmax <= 180 && ymax <= 90 && dx < 0.5 && dy < 0.5 {
		return fmt.Errorf("crs %q is in metres, but %s spans [%g, %g] and %s spans [%g, %g] in steps of %.3g and %.3g: "+
			"these look like longitudes and latitudes in degrees, not a grid of sub-metre pixels; expected crs = %q for degrees, or the coordinates in metres",
			crs, xName, xlo, xhi, yName, ylo, yhi, dx, dy, GeographicCRS)
	}
	return nil
}

func extentOfValues(v []float64) (lo, hi float64) {
	lo, hi = v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// smallestStep is the smallest distance between neighbouring values (+Inf for one value).
func smallestStep(v []float64) float64 {
	s := math.Inf(1)
	for i := 1; i < len(v); i++ {
		s = min(s, math.Abs(v[i]-v[i-1]))
	}
	return s
}

// checkOwnCRS checks grid or NWP source sp's coordinates against the crs it declares (its crs
// key, or EPSG:4326 implied by longitude/latitude names).
func checkOwnCRS(cfg *config.Config, sp *Spec, ds Dataset, m dimMap, xs, ys []float64) error {
	xName, yName := m.name(axisX), m.name(axisY)
	crs := sourceCRS(sp, xName, yName)
	if crs == "" {
		return nil
	}
	key := sp.Field + ".crs"
	if sp.CRS == "" {
		key = sp.Field + ".store" // implied by the coordinate names
	}
	if err := checkCRSUnits(crs, fmt.Sprintf("%s/%s", ds, xName), fmt.Sprintf("%s/%s", ds, yName), xs, ys); err != nil {
		return cfg.Errorf(key, "%v", err)
	}
	return nil
}
