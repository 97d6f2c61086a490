package sampler

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// newJobErr builds the memory nowcast (changed by edit), with anchorKeys on the anchor and
// nwpKeys on the NWP source, and returns NewJob's error.
func newJobErr(t *testing.T, anchorKeys, nwpKeys string, edit func(ds map[string]*memDataset)) error {
	t.Helper()
	text := fmt.Sprintf(memConfig, anchorKeys)
	text = strings.Replace(text, `role = "nwp"`, `role = "nwp"`+"\n"+nwpKeys, 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	edit(ds)
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err == nil {
		j.Close()
	}
	return err
}

// A NaN (or infinity) in a grid's spatial coordinate is refused as the store opens, naming the
// source, the store, the coordinate and the index: before, a NaN in the anchor's x passed the
// plan and failed the run blaming another store.
func TestNaNCoordinateRefused(t *testing.T) {
	for _, c := range []struct {
		store, coord string
		at           int
		v            float64
		want         string
	}{
		{"satellite.zarr", "x", 3, math.NaN(), "source[0].store: satellite.zarr/x: value 3 is NaN"},
		{"satellite.zarr", "y", 0, math.NaN(), "source[0].store: satellite.zarr/y: value 0 is NaN"},
		{"satellite.zarr", "x", 39, math.Inf(1), "source[0].store: satellite.zarr/x: value 39 is +Inf"},
		{"nwp.zarr", "y", 2, math.NaN(), "source[1].store: nwp.zarr/y: value 2 is NaN"},
	} {
		err := newJobErr(t, "", "", func(ds map[string]*memDataset) { ds[c.store].arrays[c.coord].raw[c.at] = c.v })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s[%d] = %v: error %v; want it to contain %q", c.store, c.coord, c.at, c.v, err, c.want)
		}
	}
	// A points source's positions may hold NaN (such a system is never chosen).
	if err := newJobErr(t, "", "", func(ds map[string]*memDataset) { ds["pv.zarr"].arrays["x"].raw[1] = math.NaN() }); err != nil {
		t.Errorf("a NaN site position: %v", err)
	}
}

// A crs whose units contradict the coordinates is refused: degrees declared on a metre grid,
// metres declared on values that look like degrees. Legitimate grids, including a small
// projected one in whole metres and a longitude/latitude one, are not.
func TestCRSUnitsContradictingCoordinates(t *testing.T) {
	degrees := func(ds map[string]*memDataset) { // the satellite on a 0.03 degree grid over Scotland
		sat := ds["satellite.zarr"].arrays
		sat["x"].raw = coords(smallMem.P, -5.6, 0.03)
		sat["y"].raw = coords(smallMem.P, 58.2, -0.03)
	}
	for _, c := range []struct {
		name, anchor, nwp string
		edit              func(ds map[string]*memDataset)
		want              string // "": accepted
	}{
		{"EPSG:4326 on metres", `crs = "EPSG:4326"`, `crs = "EPSG:27700"`, func(map[string]*memDataset) {},
			`source[0].crs: crs "EPSG:4326" is in degrees, but satellite.zarr/x spans [200000, 278000] and satellite.zarr/y spans [822000, 900000]`},
		{"EPSG:4326 implied by names on metres", "", "", func(ds map[string]*memDataset) {
			nwp := ds["nwp.zarr"].arrays
			nwp["longitude"], nwp["latitude"] = nwp["x"], nwp["y"]
			delete(nwp, "x")
			delete(nwp, "y")
			nwp["UKV"].dims = []string{"init_time", "step", "variable", "latitude", "longitude"}
		}, `source[1].store: crs "EPSG:4326" is in degrees, but nwp.zarr/longitude spans`},
		{"EPSG:27700 on degrees", `crs = "EPSG:27700"`, `crs = "EPSG:27700"`, degrees,
			`source[0].crs: crs "EPSG:27700" is in metres, but satellite.zarr/x spans [-5.6, -4.43] and satellite.zarr/y spans [57.03, 58.2] in steps of 0.03 and 0.03: these look like longitudes and latitudes`},
		{"EPSG:27700 on metres", `crs = "EPSG:27700"`, `crs = "EPSG:27700"`, func(map[string]*memDataset) {}, ""},
		{"EPSG:4326 on degrees", `crs = "EPSG:4326"`, `crs = "EPSG:27700"`, degrees, ""},
		{"a small projected grid in metres", `crs = "EPSG:27700"`, `crs = "EPSG:27700"`, func(ds map[string]*memDataset) {
			sat := ds["satellite.zarr"].arrays
			sat["x"].raw = coords(smallMem.P, 0, 1) // 40 one-metre pixels: within +-180, yet metres
			sat["y"].raw = coords(smallMem.P, 50, -1)
		}, "look like"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := newJobErr(t, c.anchor, c.nwp, c.edit)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "look like": // other errors may follow (the grids do not overlap), not this one
				if err != nil && strings.Contains(err.Error(), c.want) {
					t.Fatalf("refused: %v", err)
				}
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}
