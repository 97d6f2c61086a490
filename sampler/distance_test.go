package sampler

import (
	"math"
	"sort"
	"testing"

	proj "github.com/twpayne/go-proj/v11"
)

// geocentric against PROJ's conversion from EPSG:4326 to earth-centred EPSG:4978.
func TestGeocentricMatchesPROJ(t *testing.T) {
	pj, err := transformer("EPSG:4326", "EPSG:4978")
	if err != nil {
		t.Fatal(err)
	}
	for lat := 49.0; lat <= 61; lat += 1.5 {
		for lon := -9.0; lon <= 3; lon += 1.5 {
			c, err := pj.Forward(proj.NewCoord(lon, lat, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			x, y, z := geocentric(lon, lat)
			if math.Abs(x-c.X()) > 1e-6 || math.Abs(y-c.Y()) > 1e-6 || math.Abs(z-c.Z()) > 1e-6 {
				t.Fatalf("(%g, %g): got (%.6f, %.6f, %.6f), PROJ (%.6f, %.6f, %.6f)", lon, lat, x, y, z, c.X(), c.Y(), c.Z())
			}
		}
	}
}

// Systems on a 0.1-degree grid at British latitudes are ranked by geodesic distance (PROJ's
// geodesic on WGS84), not by distance in degrees, where a degree of longitude counts as much
// as one of latitude.
func TestNearestSystemsInLonLatAreGeodesicNearest(t *testing.T) {
	geod, err := proj.New("EPSG:4326")
	if err != nil {
		t.Fatal(err)
	}
	dist := func(lon0, lat0, lon1, lat1 float64) float64 {
		a, b := proj.NewCoord(lon0, lat0, 0, 0), proj.NewCoord(lon1, lat1, 0, 0)
		s, _, _ := geod.Geod(a.DegToRad(), b.DegToRad())
		return s
	}
	// The reference's axis order: a degree of latitude is about 111 km, of longitude at 52°N 69 km.
	if d := dist(0, 52, 0, 53); math.Abs(d-111.3e3) > 0.5e3 {
		t.Fatalf("geodesic of a degree of latitude %.0f m", d)
	}
	if d := dist(0, 52, 1, 52); math.Abs(d-68.7e3) > 0.5e3 {
		t.Fatalf("geodesic of a degree of longitude at 52N %.0f m", d)
	}

	var lons, lats []float64
	for lat := 50.0; lat <= 56; lat += 0.1 {
		for lon := -5.0; lon <= 1; lon += 0.1 {
			lons, lats = append(lons, lon), append(lats, lat)
		}
	}
	lons, lats = append(lons, math.NaN()), append(lats, 52) // a system without a position
	p := &pointSource{xs: lons, ys: lats, geo: newGeoPositions(lons, lats)}
	const k = 6
	differs := 0
	for q := 0; q < 200; q++ {
		// Centres spread over the grid's interior, off the grid points.
		x := -4.5 + 5*(float64((q*7919)%997)+0.37)/997
		y := 50.5 + 5*(float64((q*104729)%991)+0.61)/991
		out, scratch := make([]int32, k), make([]float64, k)
		if !p.nearest(x, y, out, scratch) {
			t.Fatal("fewer than k systems")
		}
		want := rankBy(len(lons)-1, k, func(i int) float64 { return dist(x, y, lons[i], lats[i]) })
		if !sameInts(out, want) {
			t.Fatalf("centre (%.4f, %.4f): got systems %v, the geodesic nearest are %v", x, y, out, want)
		}
		deg := rankBy(len(lons)-1, k, func(i int) float64 { return math.Hypot(lons[i]-x, lats[i]-y) })
		if !sameInts(out, deg) {
			differs++
		}
	}
	// The test tells the two apart: the nearest in degrees are different for many centres.
	if differs < 50 {
		t.Fatalf("only %d of 200 centres have different nearest systems in degrees", differs)
	}
}

// rankBy is the k of indices [0, n) with the least d (a stable sort), in ascending order.
func rankBy(n, k int, d func(int) float64) []int32 {
	idx := make([]int, n)
	ds := make([]float64, n)
	for i := range idx {
		idx[i], ds[i] = i, d(i)
	}
	sort.SliceStable(idx, func(a, b int) bool { return ds[idx[a]] < ds[idx[b]] })
	out := make([]int32, k)
	for i := range out {
		out[i] = int32(idx[i])
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

func sameInts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGeographicCRS(t *testing.T) {
	for c, want := range map[string]bool{
		"EPSG:4326": true, "OGC:CRS84": true, "EPSG:4277": true, "+proj=longlat +datum=WGS84": true,
		"EPSG:27700": false, "EPSG:32630": false,
		"+proj=geos +lon_0=9.5 +h=35785831 +a=6378169 +rf=295.488065897": false,
	} {
		got, err := geographicCRS(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if got != want {
			t.Errorf("geographicCRS(%q) = %v, want %v", c, got, want)
		}
	}
}

// Sites placed through anchor_coords in longitude/latitude go to the pixel nearest on the
// ground (PROJ's geodesic), not in degrees. The pixels are 0.1 x 0.06 degree at 52-54N (6.8 x 6.7 km).
func TestSitePixelsInLonLatAreGeodesicNearest(t *testing.T) {
	geod, err := proj.New("EPSG:4326")
	if err != nil {
		t.Fatal(err)
	}
	dist := func(lon0, lat0, lon1, lat1 float64) float64 {
		a, b := proj.NewCoord(lon0, lat0, 0, 0), proj.NewCoord(lon1, lat1, 0, 0)
		s, _, _ := geod.Geod(a.DegToRad(), b.DegToRad())
		return s
	}
	h, w := 30, 40
	pos := &positions{w: w, xs: make([]float64, h*w), ys: make([]float64, h*w)}
	for cy := 0; cy < h; cy++ {
		for cx := 0; cx < w; cx++ {
			// A sheared grid, so that the nearest pixel is not the nearest along each axis.
			pos.xs[cy*w+cx] = -3 + 0.1*float64(cx) + 0.03*float64(cy)
			pos.ys[cy*w+cx] = 52 + 0.06*float64(cy)
		}
	}
	var lons, lats []float64
	for i := 0; i < 300; i++ {
		lons = append(lons, -2.5+2.5*float64((i*7919)%997)/997)
		lats = append(lats, 52.2+1.4*float64((i*104729)%991)/991)
	}
	out := make([][2]int, len(lons))
	nearestPixels(pos, h, w, lons, lats, true, out)
	differs := 0
	for i := range lons {
		best, bestD, byDeg, byDegD := -1, math.Inf(1), -1, math.Inf(1)
		for p := range pos.xs {
			if d := dist(lons[i], lats[i], pos.xs[p], pos.ys[p]); d < bestD {
				best, bestD = p, d
			}
			if d := math.Hypot(lons[i]-pos.xs[p], lats[i]-pos.ys[p]); d < byDegD {
				byDeg, byDegD = p, d
			}
		}
		if got := out[i][0]*w + out[i][1]; got != best {
			t.Fatalf("system %d at (%.4f, %.4f): pixel %v, the geodesic nearest is (%d, %d)", i, lons[i], lats[i], out[i], best/w, best%w)
		}
		if byDeg != best {
			differs++
		}
	}
	if differs < 25 {
		t.Fatalf("only %d of 300 systems have another nearest pixel in degrees: the test does not tell them apart", differs)
	}
}
