package sampler

import (
	"math"
	"slices"
	"testing"
)

// xyTranspose: (planes, y, x) in store order to (planes, x, y) with both increasing.
func TestXYTranspose(t *testing.T) {
	h, w := 2, 3
	// store value = 10*y + x (store indices), two planes (+100 for the second)
	src := make([]float32, 2*h*w)
	for p := 0; p < 2; p++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				src[p*h*w+y*w+x] = float32(100*p + 10*y + x)
			}
		}
	}
	for _, c := range []struct{ yDesc, xDesc bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		dst := make([]float32, len(src))
		xyTranspose(dst, src, 2, h, w, c.yDesc, c.xDesc)
		for p := 0; p < 2; p++ {
			for xi := 0; xi < w; xi++ {
				for yi := 0; yi < h; yi++ {
					sy, sx := yi, xi
					if c.yDesc {
						sy = h - 1 - yi
					}
					if c.xDesc {
						sx = w - 1 - xi
					}
					if got, want := dst[p*h*w+xi*h+yi], float32(100*p+10*sy+sx); got != want {
						t.Fatalf("%+v: [%d, %d, %d] = %v, want %v", c, p, xi, yi, got, want)
					}
				}
			}
		}
	}
}

func TestCropCoords(t *testing.T) {
	out := make([]float64, 3)
	cropCoords([]float64{70, 60, 50, 40, 30}, 1, out) // store 60, 50, 40
	if out[0] != 40 || out[1] != 50 || out[2] != 60 {
		t.Fatalf("descending crop coordinates %v, want [40 50 60]", out)
	}
	cropCoords([]float64{0, 1, 2, 3}, 1, out)
	if out[0] != 1 || out[2] != 3 {
		t.Fatalf("ascending crop coordinates %v, want [1 2 3]", out)
	}
}

// ocfRefStart is ocf-data-sampler's crop rule by hand: the coordinate made increasing, the
// strict-inside check, the first nearest index, [c - n/2, c + n/2) inside the axis; the start
// back in store order.
func ocfRefStart(c []float64, v float64, n int) (int, bool) {
	inc := append([]float64(nil), c...)
	desc := c[0] > c[len(c)-1]
	if desc {
		slices.Reverse(inc)
	}
	if !(inc[0] < v && v < inc[len(inc)-1]) {
		return 0, false
	}
	ci := refNearest(inc, v)
	if ci-n/2 < 0 || ci+n/2 > len(inc) {
		return 0, false
	}
	if desc {
		return len(c) - (ci + n/2), true
	}
	return ci - n/2, true
}

// A site-anchored job under rules = "ocf": the satellite (y descending) and the NWP are
// cropped around each system by ocf's rule, systems that some crop cannot hold are left out
// (and reported per source), and the satellite rows are (time, channel, x, y) with both
// increasing, with its window times and crop coordinates beside it.
func TestOCFRulesSiteJob(t *testing.T) {
	j, ds := newMemJob(t, smallMem, "locations = \"pv\"\nrules = \"ocf\"", Options{})
	sat, nwp, pv := ds["satellite.zarr"].arrays, ds["nwp.zarr"].arrays, ds["pv.zarr"].arrays
	xs, ys := sat["x"].raw, sat["y"].raw
	P, C := smallMem.P, 4
	kept := map[int64][2]int{} // system id: the satellite crop's store start (row, column)
	var out []int64
	for i, id := range pv["system"].ints {
		x, y := pv["x"].raw[i], pv["y"].raw[i]
		y0, oky := ocfRefStart(ys, y, 8)
		x0, okx := ocfRefStart(xs, x, 8)
		_, okny := ocfRefStart(nwp["y"].raw, y, 4)
		_, oknx := ocfRefStart(nwp["x"].raw, x, 4)
		if oky && okx && okny && oknx {
			kept[id] = [2]int{y0, x0}
		} else {
			out = append(out, id)
		}
	}
	if len(kept) == 0 || len(out) == 0 {
		t.Fatalf("fixture: %d kept, %d left out; expected some of each", len(kept), len(out))
	}
	if j.Locations() != len(kept) || j.LocationsDropped() != len(out) {
		t.Fatalf("%d locations, %d dropped; want %d, %d", j.Locations(), j.LocationsDropped(), len(kept), len(out))
	}
	if sp := j.SampleSpace(); sp == nil || sp.Pairs == 0 || j.Stats().Pairs != sp.Pairs {
		t.Fatalf("stats' pairs %d, sample space %+v; want the sample space's pairs", j.Stats().Pairs, sp)
	}
	reported := map[int64]bool{}
	for _, e := range j.SiteExclusions() {
		for _, id := range e.IDs {
			reported[id] = true
		}
	}
	for _, id := range out {
		if !reported[id] {
			t.Errorf("system %d left out but not reported (%v)", id, j.SiteExclusions())
		}
	}
	at := map[string]int{}
	for i, tn := range j.Tensors() {
		at[tn.Name] = i
	}
	if sh := j.Tensors()[at["satellite"]].Shape; !slices.Equal(sh, []int{4, 19, C, 8, 8}) {
		t.Fatalf("satellite shape %v", sh)
	}
	buf := batchBuf(j)
	data := sat["data"]
	for b := uint64(0); b < 20; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		sats := bytesAsFloat32(buf[at["satellite"]])
		lids, t0s := bytesAsInt64(buf[at["location_id"]]), bytesAsFloat64(buf[at["t0"]])
		sx, sy := bytesAsFloat64(buf[at["satellite_x"]]), bytesAsFloat64(buf[at["satellite_y"]])
		st := bytesAsFloat64(buf[at["satellite_time_utc"]])
		lon := bytesAsFloat64(buf[at["longitude"]])
		for e := 0; e < 4; e++ {
			t0, ti, _, _ := j.Draw(b, e)
			start, ok := kept[lids[e]]
			if !ok || t0s[e] != float64(t0) {
				t.Fatalf("batch %d example %d: location %d (kept %v), t0 %v want %d", b, e, lids[e], ok, t0s[e], t0)
			}
			y0, x0 := start[0], start[1]
			for k := 0; k < 19; k++ {
				if want := float64(sat["time"].ints[ti-6+k]) * 1e9; st[e*19+k] != want {
					t.Fatalf("satellite_time_utc[%d][%d] = %v, want %v", e, k, st[e*19+k], want)
				}
				for c := 0; c < C; c++ {
					for xi := 0; xi < 8; xi++ {
						for yi := 0; yi < 8; yi++ {
							sy := y0 + 7 - yi // y descends in the store
							raw := data.raw[(((ti-6+k)*C+c)*P+sy)*P+x0+xi]
							want := float32(math.NaN())
							if raw != -1 {
								want = float32(raw * 0.001)
							}
							got := sats[(((e*19+k)*C+c)*8+xi)*8+yi]
							if got != want && !(got != got && want != want) {
								t.Fatalf("batch %d example %d [%d %d %d %d] = %v, want %v", b, e, k, c, xi, yi, got, want)
							}
						}
					}
				}
			}
			for q := 0; q < 8; q++ {
				if sx[e*8+q] != xs[x0+q] || sy[e*8+q] != ys[y0+7-q] {
					t.Fatalf("crop coordinates %v %v at %d", sx[e*8:e*8+8], sy[e*8:e*8+8], q)
				}
			}
			if q := slices.Index(pv["system"].ints, lids[e]); lon[e] != pv["x"].raw[q] {
				t.Fatalf("longitude %v, want the system's x %v", lon[e], pv["x"].raw[q])
			}
		}
	}
}
