package sampler

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// refNearest is the nearest coordinate by a plain scan, written out here: the first index of
// the smallest distance.
func refNearest(c []float64, v float64) int {
	best := 0
	for i := range c {
		if math.Abs(c[i]-v) < math.Abs(c[best]-v) {
			best = i
		}
	}
	return best
}

func refStart(c []float64, v float64, n int) int {
	s := refNearest(c, v) - n/2
	return max(0, min(s, len(c)-n))
}

func TestNearestBinarySearchAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(40)
		step := []float64{1, 0.5, -2, -1000, 3.25}[trial%5]
		c := coords(n, rng.Float64()*100-50, step)
		if trial%7 == 0 && n > 3 { // uneven spacing, still monotonic
			for i := 1; i < n; i++ {
				c[i] = c[i-1] + step*(0.5+rng.Float64())
			}
		}
		nn := newNearest(c)
		if n > 1 && nn.sign == 0 {
			t.Fatalf("strictly monotonic %v not recognised", c)
		}
		lo, hi := min(c[0], c[n-1]), max(c[0], c[n-1])
		for q := 0; q < 100; q++ {
			v := lo - 5 + rng.Float64()*(hi-lo+10)
			if q%4 == 0 && n > 1 { // exactly half-way: the tie goes to the lower index
				k := rng.IntN(n - 1)
				v = (c[k] + c[k+1]) / 2
			}
			if got, want := nn.index(v), refNearest(c, v); got != want {
				t.Fatalf("coords %v value %v: index %d, want %d", c, v, got, want)
			}
		}
	}
	// Not monotonic: the scan.
	c := []float64{0, 2, 1, 3}
	if got := newNearest(c).index(1.4); got != 2 {
		t.Fatalf("unsorted: %d, want 2", got)
	}
}

func TestCropTableSeparableAndPerPixel(t *testing.T) {
	ys, xs := coords(9, 100, -10), coords(12, 0, 7)
	// Separable: positions of the anchor's own rows and columns.
	ay, ax := coords(5, 120, -13), coords(6, -20, 17)
	sep := newCropTable(&positions{xs: ax, ys: ay}, ys, xs, 4, 3)
	// Per pixel: a rotated grid.
	H, W := len(ay), len(ax)
	p := &positions{w: W, xs: make([]float64, H*W), ys: make([]float64, H*W)}
	for cy := 0; cy < H; cy++ {
		for cx := 0; cx < W; cx++ {
			p.xs[cy*W+cx] = ax[cx] + 3*float64(cy)
			p.ys[cy*W+cx] = ay[cy] - 2*float64(cx)
		}
	}
	full := newCropTable(p, ys, xs, 4, 3)
	for cy := 0; cy < H; cy++ {
		for cx := 0; cx < W; cx++ {
			y0, x0 := sep.at(cy, cx)
			if y0 != refStart(ys, ay[cy], 4) || x0 != refStart(xs, ax[cx], 3) {
				t.Fatalf("separable (%d, %d): %d, %d", cy, cx, y0, x0)
			}
			y0, x0 = full.at(cy, cx)
			px, py := p.at(cy, cx)
			if y0 != refStart(ys, py, 4) || x0 != refStart(xs, px, 3) {
				t.Fatalf("per pixel (%d, %d) at (%v, %v): %d, %d", cy, cx, px, py, y0, x0)
			}
		}
	}
}

func TestOverAnchorGridLayouts(t *testing.T) {
	g := &gridSource{ys: coords(2, 0, 1), xs: coords(3, 0, 1), dims: dimMap{axes: []string{axisY, axisX}, names: []string{"y", "x"}}}
	want := []float64{0, 1, 2, 10, 11, 12} // value = 10*row + column
	cases := []struct {
		name string
		a    *memArray
		want []float64
	}{
		{"(y, x)", &memArray{shape: []int{2, 3}, dims: []string{"y", "x"}}, want},
		{"(x, y)", &memArray{shape: []int{3, 2}, dims: []string{"x", "y"}}, want},
		{"(x)", &memArray{shape: []int{3}, dims: []string{"x"}}, []float64{0, 1, 2, 0, 1, 2}},
		{"(y)", &memArray{shape: []int{2}, dims: []string{"y"}}, []float64{0, 0, 0, 10, 10, 10}},
	}
	for _, c := range cases {
		var v []float64
		switch c.name {
		case "(y, x)":
			v = want
		case "(x, y)":
			v = []float64{0, 10, 1, 11, 2, 12}
		case "(x)":
			v = []float64{0, 1, 2}
		case "(y)":
			v = []float64{0, 10}
		}
		got, err := overAnchorGrid(c.a, v, g)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
	for _, a := range []*memArray{
		{shape: []int{4, 4}, dims: []string{"y", "x"}},
		{shape: []int{2, 3}, dims: []string{"a", "b"}},
		{shape: []int{5}, dims: []string{"x"}},
	} {
		if _, err := overAnchorGrid(a, make([]float64, 16), g); err == nil || !strings.Contains(err.Error(), "does not match the anchor's grid") {
			t.Errorf("shape %v dims %v: error %v", a.shape, a.dims, err)
		}
	}
}

func TestCRSOfArea(t *testing.T) {
	yamlArea := `msg_seviri_rss_3km:
  description: MSG SEVIRI
  projection:
    a: 6378169.0
    h: 35785831.0
    lon_0: 9.5
    no_defs: null
    proj: geos
    rf: 295.488065897
    type: crs
    units: m
  shape:
    height: 298
    width: 615
`
	want := "+proj=geos +a=6378169 +h=35785831 +lon_0=9.5 +no_defs +rf=295.488065897 +type=crs +units=m"
	if got := crsOfArea(yamlArea); got != want {
		t.Fatalf("yaml: %q\nwant %q", got, want)
	}
	for _, s := range []string{"EPSG:27700", "+proj=longlat +datum=WGS84"} {
		if got := crsOfArea(s); got != s {
			t.Errorf("%q: %q", s, got)
		}
	}
	if got := crsOfArea("a:\n  projection: '+proj=geos +h=35785831'\n"); got != "+proj=geos +h=35785831" {
		t.Errorf("projection string: %q", got)
	}
	if err := checkCRS(want); err != nil {
		t.Errorf("the pyresample area's PROJ string: %v", err)
	}
}

// The transformation is PROJ's; the figures are pyproj 3.7's for the same points (EPSG:4326 to
// EPSG:27700, always_xy), so a wrong axis order or a wrong CRS shows.
func TestTransformerMatchesPyproj(t *testing.T) {
	pj, err := transformer(GeographicCRS, "EPSG:27700")
	if err != nil {
		t.Fatal(err)
	}
	xs, ys := []float64{-1.5}, []float64{52.5}
	transformAll(pj, xs, ys)
	if math.Abs(xs[0]-434039.4572860588) > 1e-6 || math.Abs(ys[0]-289239.2810926733) > 1e-6 {
		t.Fatalf("(-1.5, 52.5) -> (%v, %v)", xs[0], ys[0])
	}
	geos := "+proj=geos +lon_0=9.5 +h=35785831 +a=6378169 +rf=295.488065897 +units=m +no_defs"
	pj, err = transformer(geos, "EPSG:27700")
	if err != nil {
		t.Fatal(err)
	}
	xs, ys = []float64{0, 6e6}, []float64{5e6, 6e6}
	transformAll(pj, xs, ys)
	if math.Abs(xs[0]-1048372.7474729627) > 1e-5 || math.Abs(ys[0]-1127541.363534618) > 1e-5 {
		t.Fatalf("geos (0, 5e6) -> (%v, %v)", xs[0], ys[0])
	}
	if !math.IsNaN(xs[1]) || !math.IsNaN(ys[1]) {
		t.Fatalf("a point off the disk: (%v, %v), want NaN", xs[1], ys[1])
	}
	for _, bad := range []string{"EPSG:999999", "+proj=nonsense", "not a crs"} {
		if _, err := transformer(bad, GeographicCRS); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
