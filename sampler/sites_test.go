package sampler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
)

// The in-memory nowcast data (memdata_test.go) has its PV systems scattered over the satellite
// grid, in the satellite's coordinates: a site-anchored job puts each on its nearest pixel.

func TestSiteAnchoredJob(t *testing.T) {
	j, ds := newMemJob(t, smallMem, `locations = "pv"`, Options{})
	sat, pv := ds["satellite.zarr"].arrays, ds["pv.zarr"].arrays
	xs, ys := sat["x"].raw, sat["y"].raw
	// The expected locations: nearest pixel by a scan, kept where the 8 x 8 crop fits.
	type pix struct{ cy, cx int }
	kept := map[int64]pix{}
	for i, id := range pv["system"].ints {
		p := pix{refNearest(ys, pv["y"].raw[i]), refNearest(xs, pv["x"].raw[i])}
		if p.cy >= 4 && p.cy < smallMem.P-4 && p.cx >= 4 && p.cx < smallMem.P-4 {
			kept[id] = p
		}
	}
	if len(kept) == 0 || len(kept) == smallMem.S {
		t.Fatalf("fixture: %d of %d systems kept; expected some kept and some dropped", len(kept), smallMem.S)
	}
	if j.Locations() != len(kept) || j.LocationsDropped() != smallMem.S-len(kept) {
		t.Fatalf("%d locations, %d dropped; want %d, %d", j.Locations(), j.LocationsDropped(), len(kept), smallMem.S-len(kept))
	}
	if st := j.Stats(); st.Locations != len(kept) || st.LocationsDropped != smallMem.S-len(kept) {
		t.Fatalf("stats: %+v", st)
	}
	for i := 0; i < j.Locations(); i++ {
		id, cy, cx := j.Location(i)
		if p, ok := kept[id]; !ok || p != (pix{cy, cx}) {
			t.Fatalf("location %d: system %d at (%d, %d); want %v (kept %v)", i, id, cy, cx, p, ok)
		}
	}
	names := []string{}
	for _, tn := range j.Tensors() {
		names = append(names, tn.Name)
	}
	if got := strings.Join(names, ","); got != "satellite,nwp,pv,t0,x,y,pv_system,location_id" {
		t.Fatalf("tensors %s", got)
	}
	buf := batchBuf(j)
	seen := map[int64]bool{}
	for b := uint64(0); b < 100; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		sats, nwps, pvs := bytesAsFloat32(buf[0]), bytesAsFloat32(buf[1]), bytesAsFloat32(buf[2])
		bx, by, lids := bytesAsFloat64(buf[4]), bytesAsFloat64(buf[5]), bytesAsInt64(buf[7])
		for e := 0; e < 4; e++ {
			_, ti, cy, cx := j.Draw(b, e)
			p, ok := kept[lids[e]]
			if !ok || p != (pix{cy, cx}) || bx[e] != xs[cx] || by[e] != ys[cy] {
				t.Fatalf("batch %d example %d: location %d (kept %v at %v), centre (%d, %d), x %v y %v", b, e, lids[e], ok, p, cy, cx, bx[e], by[e])
			}
			seen[lids[e]] = true
			ws, wn, wp, _ := refExample(ds, ti, cy, cx)
			sameFloats(t, "satellite", sats[e*len(ws):(e+1)*len(ws)], ws)
			sameFloats(t, "nwp", nwps[e*len(wn):(e+1)*len(wn)], wn)
			sameFloats(t, "pv", pvs[e*len(wp):(e+1)*len(wp)], wp)
		}
	}
	if len(seen) != len(kept) {
		t.Errorf("%d of %d locations drawn in 400 examples", len(seen), len(kept))
	}
}

// Without locations the tensors and the draws are today's: no location_id, centres over the
// whole valid range.
func TestNoLocationsKeepsPixelDraws(t *testing.T) {
	j, _ := newMemJob(t, smallMem, "", Options{})
	if j.Locations() != 0 || j.LocationsDropped() != 0 {
		t.Fatalf("%d locations", j.Locations())
	}
	for _, tn := range j.Tensors() {
		if tn.Name == LocationIDTensor {
			t.Fatal("location_id without locations")
		}
	}
}

// shear adds anchor_coords arrays to the satellite store: a sheared copy of the anchor's own
// grid (x_osgb over (y, x), y_osgb over (x, y), transposed on purpose).
func shear(ds map[string]*memDataset) (X, Y func(cy, cx int) float64) {
	sat := ds["satellite.zarr"].arrays
	xs, ys := sat["x"].raw, sat["y"].raw
	H, W := len(ys), len(xs)
	X = func(cy, cx int) float64 { return xs[cx] + 0.5*float64(cy)*1000 }
	Y = func(cy, cx int) float64 { return ys[cy] - 0.25*float64(cx)*1000 }
	xo := &memArray{shape: []int{H, W}, dims: []string{"y", "x"}, raw: make([]float64, H*W)}
	yo := &memArray{shape: []int{W, H}, dims: []string{"x", "y"}, raw: make([]float64, H*W)}
	for cy := 0; cy < H; cy++ {
		for cx := 0; cx < W; cx++ {
			xo.raw[cy*W+cx] = X(cy, cx)
			yo.raw[cx*H+cy] = Y(cy, cx)
		}
	}
	sat["x_osgb"], sat["y_osgb"] = xo, yo
	sat["bad"] = &memArray{shape: []int{3, 3}, dims: []string{"a", "b"}, raw: make([]float64, 9)}
	return X, Y
}

func newSheared(t testing.TB, anchorKeys, nwpKeys, pvKeys string) (*Job, map[string]*memDataset, error) {
	t.Helper()
	text := fmt.Sprintf(memConfig, anchorKeys)
	text = strings.Replace(text, `role = "nwp"`, `role = "nwp"`+"\n"+nwpKeys, 1)
	text = strings.Replace(text, `role = "points"`, `role = "points"`+"\n"+pvKeys, 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		return nil, nil, err
	}
	ds := newMemNowcast(smallMem)
	shear(ds)
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err == nil {
		t.Cleanup(j.Close)
	}
	return j, ds, err
}

func TestAnchorCoordsTables(t *testing.T) {
	j, ds, err := newSheared(t, "", `anchor_coords = ["x_osgb", "y_osgb"]`, `anchor_coords = ["x_osgb", "y_osgb"]`)
	if err != nil {
		t.Fatal(err)
	}
	X, Y := shear(newMemNowcast(smallMem)) // the same formulas
	nwp := ds["nwp.zarr"].arrays
	n := j.srcs[1].(*nwpSource)
	p := j.srcs[2].(*pointSource)
	for cy := 0; cy < smallMem.P; cy++ {
		for cx := 0; cx < smallMem.P; cx++ {
			y0, x0 := n.crop.at(cy, cx)
			wy, wx := refStart(nwp["y"].raw, Y(cy, cx), 4), refStart(nwp["x"].raw, X(cy, cx), 4)
			if y0 != wy || x0 != wx {
				t.Fatalf("nwp crop at anchor (%d, %d): (%d, %d), want (%d, %d)", cy, cx, y0, x0, wy, wx)
			}
			if px, py := p.at.at(cy, cx); px != X(cy, cx) || py != Y(cy, cx) {
				t.Fatalf("points: anchor (%d, %d) at (%v, %v)", cy, cx, px, py)
			}
		}
	}
	// Some crops differ from the unsheared placement, or the test proves nothing.
	plain, _ := newMemJob(t, smallMem, "", Options{})
	differ := 0
	pn := plain.srcs[1].(*nwpSource)
	for cy := 0; cy < smallMem.P; cy++ {
		for cx := 0; cx < smallMem.P; cx++ {
			a0, a1 := n.crop.at(cy, cx)
			b0, b1 := pn.crop.at(cy, cx)
			if a0 != b0 || a1 != b1 {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Fatal("the shear moves no crop")
	}
}

// Sites placed through anchor_coords: the pixel whose position is nearest by euclidean
// distance in the systems' coordinates (a scan over the grid here).
func TestSitesThroughAnchorCoords(t *testing.T) {
	j, ds, err := newSheared(t, `locations = "pv"`, "", `anchor_coords = ["x_osgb", "y_osgb"]`)
	if err != nil {
		t.Fatal(err)
	}
	X, Y := shear(newMemNowcast(smallMem))
	pv := ds["pv.zarr"].arrays
	kept := map[int64][2]int{}
	for i, id := range pv["system"].ints {
		best, bestD := [2]int{}, -1.0
		for cy := 0; cy < smallMem.P; cy++ {
			for cx := 0; cx < smallMem.P; cx++ {
				dx, dy := X(cy, cx)-pv["x"].raw[i], Y(cy, cx)-pv["y"].raw[i]
				if d := dx*dx + dy*dy; bestD < 0 || d < bestD {
					best, bestD = [2]int{cy, cx}, d
				}
			}
		}
		if best[0] >= 4 && best[0] < smallMem.P-4 && best[1] >= 4 && best[1] < smallMem.P-4 {
			kept[id] = best
		}
	}
	if j.Locations() != len(kept) || j.LocationsDropped() != smallMem.S-len(kept) {
		t.Fatalf("%d locations, %d dropped; want %d kept", j.Locations(), j.LocationsDropped(), len(kept))
	}
	moved := 0
	sat := ds["satellite.zarr"].arrays
	for i, id := range pv["system"].ints {
		p, ok := kept[id]
		plain := [2]int{refNearest(sat["y"].raw, pv["y"].raw[i]), refNearest(sat["x"].raw, pv["x"].raw[i])}
		if ok && p != plain {
			moved++
		}
	}
	for i := 0; i < j.Locations(); i++ {
		id, cy, cx := j.Location(i)
		if kept[id] != [2]int{cy, cx} {
			t.Fatalf("system %d at (%d, %d), want %v", id, cy, cx, kept[id])
		}
	}
	if moved == 0 {
		t.Fatal("the shear moves no site: the test proves nothing")
	}
}

func TestAlignmentErrorsNameTheKey(t *testing.T) {
	cases := []struct{ nwp, pv, anchor, want string }{
		{`anchor_coords = ["x_osgb", "nope"]`, "", "", `source[1].anchor_coords: "nope" is not an array of the anchor's store`},
		{`anchor_coords = ["bad", "y_osgb"]`, "", "", "source[1].anchor_coords: satellite.zarr/bad: shape [3 3]"},
		{`crs = "EPSG:27700"`, "", "", "the anchor (source[0]) has no crs key nor area attribute"},
		{`crs = "EPSG:27700"`, "", `crs = "EPSG:999999"`, `source[0].crs: unknown coordinate reference system "EPSG:999999"`},
		{`crs = "bogus"`, "", `crs = "EPSG:27700"`, `source[1].crs: unknown coordinate reference system "bogus"`},
		{"", "", `locations = "nwp"`, `source[0].locations: "nwp" is a nwp source`},
		{"", "", `locations = "sites"`, `source[0].locations: "sites" names no source; expected the name of a points source ("pv")`},
		{`anchor_coords = ["x_osgb"]`, "", "", "source[1].anchor_coords: 1 names; expected two"},
		{`anchor_coords = ["x_osgb", "y_osgb"]`, "", `crs = "EPSG:27700"`, ""},
		{`anchor_coords = ["x_osgb", "y_osgb"]` + "\n" + `crs = "EPSG:27700"`, "", "", "source[1].anchor_coords: set together with crs"},
		{"", "", `anchor_coords = ["x_osgb", "y_osgb"]`, "source[0].anchor_coords: set on the anchor"},
		{`crs = ""`, "", "", "source[1].crs: empty"},
	}
	for _, c := range cases {
		text := fmt.Sprintf(memConfig, c.anchor)
		text = strings.Replace(text, `role = "nwp"`, `role = "nwp"`+"\n"+c.nwp, 1)
		cfg, err := parseCfg(t, text)
		if err == nil {
			ds := newMemNowcast(smallMem)
			shear(ds)
			var j *Job
			if j, err = NewJob(cfg, Options{Open: memOpen(ds)}); err == nil {
				j.Close()
			}
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s / %s: %v", c.nwp, c.anchor, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s / %s: error %v\nwant it to contain %q", c.nwp, c.anchor, err, c.want)
		}
	}
}

func TestPointsWithoutPositionsRefused(t *testing.T) {
	cfg, err := parseCfg(t, fmt.Sprintf(memConfig, ""))
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	pv := ds["pv.zarr"].arrays
	delete(pv, "x")
	delete(pv, "y")
	pv["power"].attrs = nil
	_, err = NewJob(cfg, Options{Open: memOpen(ds)})
	if err == nil || !strings.Contains(err.Error(), "source[2].nearest_k: pv.zarr/power has no positions") {
		t.Fatalf("error %v", err)
	}
}

func TestPositionNames(t *testing.T) {
	over := func() *memArray { return &memArray{shape: []int{3}, dims: []string{"system"}} }
	ds := &memDataset{name: "p", arrays: map[string]*memArray{"longitude": over(), "latitude": over()}}
	cfg := &config.Config{File: "t.toml"}
	cases := []struct{ coords, x, y string }{
		{"latitude longitude", "longitude", "latitude"}, // xarray writes them sorted
		{"x y", "x", "y"},
		{"capacity latitude longitude", "longitude", "latitude"},
		{"", "longitude", "latitude"}, // no attribute: the arrays the store has
	}
	for _, c := range cases {
		x, y, err := positionNames(cfg, &Spec{Field: "source[2]"}, ds, &memArray{attrs: map[string]string{"coordinates": c.coords}}, "system")
		if err != nil || x != c.x || y != c.y {
			t.Errorf("%q: %q %q %v", c.coords, x, y, err)
		}
	}
}
