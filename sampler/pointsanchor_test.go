package sampler

import (
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A configuration without a grid to centre on: the PV source is the anchor, so the examples
// are centred on its systems (t0 from its times), the NWP is cropped around each system in
// its own grid, and a second points source takes the systems nearest each one.
const pointsAnchorConfig = `
[batch]
size = 4
seed = 11

[[source]]
name = "nwp"
kind = "zarr"
store = "nwp.zarr"
variable = "UKV"
role = "nwp"
min_staleness_minutes = 60
time_resolution_minutes = 60
interval_start_minutes = -60
interval_end_minutes = 120
image_size_pixels_height = 4
image_size_pixels_width = 4
channels = ["u", "v", "w"]

[[source]]
name = "pv"
kind = "zarr"
store = "pv.zarr"
variable = "power"
role = "points"
anchor = true
cache_mb = 64
nearest_k = 1
time_resolution_minutes = 5
interval_start_minutes = -30
interval_end_minutes = 60

[[source]]
name = "near"
kind = "zarr"
store = "pv.zarr"
variable = "power"
role = "points"
nearest_k = 5
time_resolution_minutes = 5
interval_start_minutes = 0
interval_end_minutes = 30
`

// refNWPStart is the crop start of size pixels around v on coord, by hand: outside the grid
// (half a pixel beyond its ends) none, else the nearest coordinate (the first on a tie), the
// crop starting size/2 before it, clamped into the grid.
func refNWPStart(coord []float64, v float64, size int) (int, bool) {
	lo, hi := math.Min(coord[0], coord[len(coord)-1]), math.Max(coord[0], coord[len(coord)-1])
	half := (hi - lo) / float64(len(coord)-1) / 2
	if v < lo-half || v > hi+half {
		return 0, false
	}
	best := 0
	for i := range coord {
		if math.Abs(coord[i]-v) < math.Abs(coord[best]-v) {
			best = i
		}
	}
	return min(max(best-size/2, 0), len(coord)-size), true
}

func TestPointsAnchorJob(t *testing.T) {
	cfg, err := parseCfg(t, pointsAnchorConfig)
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(memParams{T: 150, P: 40, S: 60, satChunkT: 12, satChunkP: 16}) // some systems beyond the NWP's grid
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	n, p := ds["nwp.zarr"].arrays, ds["pv.zarr"].arrays
	ids, px, py := p["system"].ints, p["x"].raw, p["y"].raw
	kept := map[int64][2]int{} // system id: its NWP crop start (row, column)
	var out []int64
	for i, id := range ids {
		y0, oky := refNWPStart(n["y"].raw, py[i], 4)
		x0, okx := refNWPStart(n["x"].raw, px[i], 4)
		if oky && okx {
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
	if len(j.SiteExclusions()) != 1 || !slices.Equal(j.SiteExclusions()[0].IDs, out) {
		t.Fatalf("exclusions %v; want the NWP's, of %v", j.SiteExclusions(), out)
	}
	at := map[string]int{}
	for i, tn := range j.Tensors() {
		at[tn.Name] = i
	}
	for _, name := range []string{"nwp", "pv", "near", "t0", "x", "y", "near_system", LocationIDTensor} {
		if _, ok := at[name]; !ok {
			t.Fatalf("no tensor %q in %v", name, j.Tensors())
		}
	}
	times := p["time"].ints
	pw := p["power"]
	S := pw.shape[1]
	u := n["UKV"]
	Q, V := u.shape[3], u.shape[2]
	buf := batchBuf(j)
	for b := uint64(0); b < 25; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		nwps, pvs, nears := bytesAsFloat32(buf[at["nwp"]]), bytesAsFloat32(buf[at["pv"]]), bytesAsFloat32(buf[at["near"]])
		lids, t0s, nearIDs := bytesAsInt64(buf[at[LocationIDTensor]]), bytesAsInt64(buf[at["t0"]]), bytesAsInt64(buf[at["near_system"]])
		xs, ys := bytesAsFloat64(buf[at["x"]]), bytesAsFloat64(buf[at["y"]])
		for e := 0; e < 4; e++ {
			start, ok := kept[lids[e]]
			if !ok {
				t.Fatalf("batch %d example %d: location %d is not one to keep", b, e, lids[e])
			}
			sys := slices.Index(ids, lids[e])
			t0 := t0s[e]
			ti := slices.Index(times, t0)
			if ti < 6 || ti+12 >= len(times) || xs[e] != px[sys] || ys[e] != py[sys] {
				t.Fatalf("batch %d example %d: t0 %d (index %d), x, y %v %v; want a time with the window, the system's position", b, e, t0, ti, xs[e], ys[e])
			}
			for k := 0; k < 19; k++ { // the system's own series
				want, got := float32(pw.raw[(ti-6+k)*S+sys]), pvs[e*19+k]
				if got != want && !(got != got && want != want) {
					t.Fatalf("pv[%d][%d] = %v, want %v", e, k, got, want)
				}
			}
			run := -1
			for r, v := range n["init_time"].ints {
				if v <= t0-3600 {
					run = r
				}
			}
			lead := int((t0 - 3600 - n["init_time"].ints[run]) / 3600)
			var want []float32
			for st := lead; st < lead+4; st++ {
				for v := 0; v < V; v++ {
					for y := start[0]; y < start[0]+4; y++ {
						for x := start[1]; x < start[1]+4; x++ {
							want = append(want, float32(u.raw[(((run*16+st)*V+v)*Q+y)*Q+x]))
						}
					}
				}
			}
			sameFloats(t, "nwp", nwps[e*len(want):(e+1)*len(want)], want)
			// the 5 systems nearest this one (itself first), in ascending id
			near := make([]int, S)
			for i := range near {
				near[i] = i
			}
			d := func(i int) float64 { return math.Hypot(px[i]-px[sys], py[i]-py[sys]) }
			sort.SliceStable(near, func(a, b int) bool { return d(near[a]) < d(near[b]) })
			sel := slices.Clone(near[:5])
			slices.Sort(sel) // ids ascend with the index
			for q, s := range sel {
				if nearIDs[e*5+q] != ids[s] {
					t.Fatalf("near_system %v, want the ids of systems %v", nearIDs[e*5:e*5+5], sel)
				}
				for k := 0; k < 7; k++ {
					want, got := float32(pw.raw[(ti+k)*S+s]), nears[(e*7+k)*5+q]
					if got != want && !(got != got && want != want) {
						t.Fatalf("near[%d][%d][%d] = %v, want %v", e, k, q, got, want)
					}
				}
			}
		}
	}
}

// What a points anchor cannot take is refused naming the key: an NWP as the anchor, another
// locations source, anchor_coords (no grid to lay them over).
func TestPointsAnchorRefusals(t *testing.T) {
	for _, c := range []struct{ from, to, key, msg string }{
		{"variable = \"UKV\"\n", "variable = \"UKV\"\nanchor = true\n", "source[0].anchor", "an NWP source cannot be the anchor"},
		{"nearest_k = 1\n", "nearest_k = 1\nlocations = \"near\"\n", "source[1].locations", "on a points anchor"},
		{"channels = [\"u\", \"v\", \"w\"]\n", "channels = [\"u\", \"v\", \"w\"]\nanchor_coords = [\"x\", \"y\"]\n", "source[0].anchor_coords", "no grid"},
	} {
		cfg, err := parseCfg(t, strings.Replace(pointsAnchorConfig, c.from, c.to, 1))
		if err == nil {
			var j *Job
			if j, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))}); err == nil {
				j.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want an error naming %s (%q)", c.to, err, c.key, c.msg)
		}
	}
}
