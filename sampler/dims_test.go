package sampler

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestMapDims(t *testing.T) {
	cases := []struct {
		role     string
		dims     []string
		override map[string]string
		names    string // the mapping, or "" when refused
		perm     []int
		identity bool
		err      []string
	}{
		{role: RoleGrid, dims: []string{"time", "channel", "y", "x"}, names: "time=time channel=channel y=y x=x", perm: []int{0, 1, 2, 3}, identity: true},
		{role: RoleGrid, dims: []string{"time", "y", "x", "variable"}, names: "time=time channel=variable y=y x=x", perm: []int{0, 3, 1, 2}},
		{role: RoleGrid, dims: []string{"time", "y", "x"}, names: "time=time channel=(absent) y=y x=x", perm: []int{0, -1, 1, 2}, identity: true},
		{role: RoleGrid, dims: []string{"time_utc", "channel", "x_geostationary", "y_geostationary"},
			names: "time=time_utc channel=channel y=y_geostationary x=x_geostationary", perm: []int{0, 1, 3, 2}},
		{role: RoleGrid, dims: []string{"datetime_gmt", "lat", "lon"}, names: "time=datetime_gmt channel=(absent) y=lat x=lon", perm: []int{0, -1, 1, 2}, identity: true},
		{role: RoleNWP, dims: []string{"variable", "init_time", "step", "y", "x"}, names: "init_time=init_time step=step channel=variable y=y x=x", perm: []int{1, 2, 0, 3, 4}},
		{role: RoleNWP, dims: []string{"init_time_utc", "step", "variable", "longitude", "latitude"},
			names: "init_time=init_time_utc step=step channel=variable y=latitude x=longitude", perm: []int{0, 1, 2, 4, 3}},
		{role: RolePoints, dims: []string{"gsp_id", "datetime_gmt"}, names: "time=datetime_gmt id=gsp_id", perm: []int{1, 0}},
		{role: RoleGrid, dims: []string{"time", "band", "northing", "easting"}, override: map[string]string{"y": "northing", "x": "easting", "channel": "band"},
			names: "time=time channel=band y=northing x=easting", perm: []int{0, 1, 2, 3}, identity: true},
		// The override takes a name that is a spelling of another axis: that axis does not see it.
		{role: RoleGrid, dims: []string{"time", "y", "x", "channel"}, override: map[string]string{"y": "x", "x": "y"},
			names: "time=time channel=channel y=x x=y", perm: []int{0, 3, 2, 1}},
		{role: RoleGrid, dims: []string{"time", "channel", "row", "col"},
			err: []string{"no y dimension among (time, channel, row, col)", "y: y, y_geostationary, y_osgb, latitude, lat", "x: x, x_geostationary", "dims = { y ="}},
		{role: RoleGrid, dims: []string{"time", "channel", "y", "x", "ensemble"},
			err: []string{`dimension "ensemble"`, `not an axis of role "grid"`, "time: time, time_utc, datetime_gmt"}},
		{role: RoleGrid, dims: []string{"time", "y", "latitude", "x"}, err: []string{`"y" and "latitude" both name axis y`}},
		{role: RoleGrid, dims: []string{"time", "y", "x"}, override: map[string]string{"y": "northing"}, err: []string{`dims.y = "northing" is not a dimension`, "(time, y, x)"}},
		{role: RolePoints, dims: []string{"time", "station"}, err: []string{"no id dimension", "id: system, location_id, gsp_id, ss_id, site_id"}},
	}
	for _, c := range cases {
		t.Run(c.role+"/"+strings.Join(c.dims, ","), func(t *testing.T) {
			m, err := mapDims(c.role, c.dims, c.override)
			if c.err != nil {
				if err == nil {
					t.Fatalf("accepted as %s", m)
				}
				for _, w := range c.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != c.names || fmt.Sprint(m.perm) != fmt.Sprint(c.perm) || m.identity() != c.identity {
				t.Errorf("got %s perm %v identity %v; want %s perm %v identity %v", m, m.perm, m.identity(), c.names, c.perm, c.identity)
			}
		})
	}
}

// transposeChunk against a naive index computation, for every permutation of a 4-d chunk and
// for 5-d and 2-d ones.
func TestTransposeChunk(t *testing.T) {
	check := func(t *testing.T, store []int, perm []int) {
		m := &dimMap{perm: perm, axes: make([]string, len(perm)), names: make([]string, len(perm))}
		arr := &memArray{shape: store, chunks: store, kind: 'f', size: 4}
		c, err := newChunked(0, "t", arr, m)
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		for _, s := range store {
			n *= s
		}
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i)
		}
		dst := make([]float32, n)
		if c.transpose {
			transposeChunk(dst, src, c.chunks, c.tstride)
		} else {
			copy(dst, src)
		}
		// Naive: canonical position -> store position -> store linear index.
		cpos := make([]int, len(perm))
		spos := make([]int, len(store))
		for o := 0; o < n; o++ {
			r := o
			for d := len(perm) - 1; d >= 0; d-- {
				cpos[d] = r % c.chunks[d]
				r /= c.chunks[d]
			}
			for d, p := range perm {
				if p >= 0 {
					spos[p] = cpos[d]
				}
			}
			lin := 0
			for d := range store {
				lin = lin*store[d] + spos[d]
			}
			if dst[o] != src[lin] {
				t.Fatalf("store %v perm %v: canonical %v holds %v, want %v", store, perm, cpos, dst[o], src[lin])
			}
		}
	}
	var perms [][]int
	var gen func(p []int, used int)
	gen = func(p []int, used int) {
		if len(p) == 4 {
			perms = append(perms, append([]int(nil), p...))
			return
		}
		for i := 0; i < 4; i++ {
			if used&(1<<i) == 0 {
				gen(append(p, i), used|1<<i)
			}
		}
	}
	gen(nil, 0)
	for _, p := range perms {
		check(t, []int{3, 2, 5, 4}, p)
	}
	check(t, []int{2, 3, 1, 4, 5}, []int{1, 2, 0, 3, 4}) // UKV (variable, init_time, step, y, x)
	check(t, []int{6, 3}, []int{1, 0})                   // points (id, time)
	check(t, []int{3, 4, 5}, []int{0, -1, 1, 2})         // no channel axis
	check(t, []int{3, 5, 4}, []int{0, -1, 2, 1})         // no channel axis, x before y
}

// permuted returns a copy of a whose store order is the original axes in order, with dimension
// names names (raw transposed, chunks following their axes).
func permuted(a *memArray, order []int, names []string) *memArray {
	b := *a
	n := len(order)
	b.shape, b.chunks = make([]int, n), make([]int, n)
	for d, o := range order {
		b.shape[d], b.chunks[d] = a.shape[o], a.chunks[o]
	}
	b.dims = names
	b.raw = make([]float64, len(a.raw))
	pos := make([]int, n)
	for i := range b.raw {
		r := i
		for d := n - 1; d >= 0; d-- {
			pos[d] = r % b.shape[d]
			r /= b.shape[d]
		}
		lin := 0
		for o := 0; o < n; o++ { // original axis o is at new position d with order[d] == o
			for d := range order {
				if order[d] == o {
					lin = lin*a.shape[o] + pos[d]
				}
			}
		}
		b.raw[i] = a.raw[lin]
	}
	return &b
}

// fillBatches fills batches 0..n-1 of a job over datasets ds.
func fillBatches(t *testing.T, ds map[string]*memDataset, cfgText string, n int) [][][]byte {
	t.Helper()
	cfg, err := parseCfg(t, cfgText)
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var out [][][]byte
	for g := 0; g < n; g++ {
		buf := batchBuf(j)
		if err := j.Fill(context.Background(), uint64(g), buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf)
	}
	return out
}

func sameBatches(t *testing.T, what string, got, want [][][]byte) {
	t.Helper()
	for g := range want {
		for i := range want[g] {
			if !bytes.Equal(got[g][i], want[g][i]) {
				t.Fatalf("%s: batch %d tensor %d differs from the canonical layout's", what, g, i)
			}
		}
	}
}

// Stores in other axis orders (and with other spellings) give the batches of the canonical
// layout, which TestFillMatchesReference checks against a naive reference.
func TestPermutedLayoutsSameBatches(t *testing.T) {
	text := memConfigFmt("")
	want := fillBatches(t, newMemNowcast(smallMem), text, 6)
	layouts := []struct {
		name                string
		sat, nwp, pv        []int
		satDims, nwpDims    []string
		pvDims              []string
		satTime, nwpX, pvID string // renamed coordinates
	}{
		{name: "channel last, UKV variable first, points (id, time)",
			sat: []int{0, 2, 3, 1}, satDims: []string{"time", "y", "x", "channel"},
			nwp: []int{2, 0, 1, 3, 4}, nwpDims: []string{"variable", "init_time", "step", "y", "x"},
			pv: []int{1, 0}, pvDims: []string{"system", "time"}},
		{name: "ocf-data-sampler (x before y)",
			sat: []int{0, 1, 3, 2}, satDims: []string{"time_utc", "channel", "x", "y"}, satTime: "time_utc",
			nwp: []int{0, 1, 2, 4, 3}, nwpDims: []string{"init_time", "step", "variable", "x", "y"},
			pv: []int{0, 1}, pvDims: []string{"time_utc", "location_id"}, pvID: "location_id"},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			ds := newMemNowcast(smallMem)
			sat, nwp, pv := ds["satellite.zarr"].arrays, ds["nwp.zarr"].arrays, ds["pv.zarr"].arrays
			sat["data"] = permuted(sat["data"], l.sat, l.satDims)
			nwp["UKV"] = permuted(nwp["UKV"], l.nwp, l.nwpDims)
			pv["power"] = permuted(pv["power"], l.pv, l.pvDims)
			if l.satTime != "" {
				sat[l.satTime] = sat["time"]
				pv[l.satTime] = pv["time"]
				delete(sat, "time")
				delete(pv, "time")
			}
			if l.pvID != "" {
				pv[l.pvID] = pv["system"]
				delete(pv, "system")
			}
			sameBatches(t, l.name, fillBatches(t, ds, text, 6), want)
		})
	}
}

// A store without a channel axis is one channel: the batches of the same data with a channel
// axis of size 1.
func TestNoChannelAxis(t *testing.T) {
	one := func() map[string]*memDataset {
		ds := newMemNowcast(smallMem)
		a := ds["satellite.zarr"].arrays
		d := a["data"]
		T, C, P := d.shape[0], d.shape[1], d.shape[2]
		raw := make([]float64, 0, T*P*P)
		for t := 0; t < T; t++ {
			raw = append(raw, d.raw[t*C*P*P:(t*C+1)*P*P]...) // channel 0
		}
		d.raw, d.shape, d.chunks[1] = raw, []int{T, 1, P, P}, 1
		a["channel"] = &memArray{shape: []int{1}, strs: []string{"A"}}
		return ds
	}
	canonical := strings.Replace(memConfigFmt(""), `channels = ["A", "B", "C", "D"]`, `channels = ["A"]`, 1)
	want := fillBatches(t, one(), canonical, 4)

	ds := one()
	d := ds["satellite.zarr"].arrays["data"]
	d.shape, d.chunks, d.dims = []int{d.shape[0], d.shape[2], d.shape[3]}, []int{d.chunks[0], d.chunks[2], d.chunks[3]}, []string{"time", "y", "x"}
	delete(ds["satellite.zarr"].arrays, "channel")
	noKey := strings.Replace(memConfigFmt(""), "channels = [\"A\", \"B\", \"C\", \"D\"]\n", "", 1)
	sameBatches(t, "(time, y, x)", fillBatches(t, ds, noKey, 4), want)

	// channels on a store without a channel axis is refused.
	cfg, err := parseCfg(t, canonical)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewJob(cfg, Options{Open: memOpen(ds)})
	if err == nil || !strings.Contains(err.Error(), "source[0].channels") || !strings.Contains(err.Error(), "no channel dimension") {
		t.Fatalf("channels without a channel axis: %v", err)
	}
}

// Decimal string ids become int64 and give the batches of the integer ids.
func TestStringIDs(t *testing.T) {
	text := memConfigFmt("")
	want := fillBatches(t, newMemNowcast(smallMem), text, 4)
	ds := newMemNowcast(smallMem)
	sys := ds["pv.zarr"].arrays["system"]
	strs := make([]string, len(sys.ints))
	for i, v := range sys.ints {
		strs[i] = fmt.Sprint(v)
	}
	ds["pv.zarr"].arrays["system"] = &memArray{shape: sys.shape, strs: strs}
	sameBatches(t, "string ids", fillBatches(t, ds, text, 4), want)
}

// Layout errors found when the stores are opened name the field, the store, the array and
// what was expected.
func TestLayoutErrors(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(ds map[string]*memDataset)
		from   string
		to     string
		want   []string
		parse  bool // refused by the parser
		parsed []string
	}{
		{name: "unmappable dims", edit: func(ds map[string]*memDataset) {
			ds["satellite.zarr"].arrays["data"].dims = []string{"time", "band", "row", "col"}
		}, want: []string{"source[0].variable", "satellite.zarr/data", "(time, band, row, col)", "channel: channel, channels, variable", "y: y, y_geostationary"}},
		{name: "no dimension names", edit: func(ds map[string]*memDataset) {
			ds["nwp.zarr"].arrays["UKV"].dims = nil
		}, want: []string{"source[1].variable", "nwp.zarr/UKV has 0 dimension names", "_ARRAY_DIMENSIONS or dimension_names"}},
		{name: "dims table maps them", edit: func(ds map[string]*memDataset) {
			a := ds["satellite.zarr"].arrays
			a["data"].dims = []string{"time", "band", "northing", "easting"}
			a["band"], a["northing"], a["easting"] = a["channel"], a["y"], a["x"]
		}, from: "cache_mb = 64", to: `cache_mb = 64
dims = { channel = "band", y = "northing", x = "easting" }`},
		{name: "dims names a missing dimension", from: "cache_mb = 64", to: `cache_mb = 64
dims = { y = "northing" }`, want: []string{"source[0].dims", `dims.y = "northing" is not a dimension`, "(time, channel, y, x)"}},
		{name: "dims key of another role", from: "cache_mb = 64", to: `cache_mb = 64
dims = { step = "lead" }`, parse: true, parsed: []string{"source[0].dims.step", "unknown key", "time, channel, y, x"}},
		{name: "dims twice the same name", from: "cache_mb = 64", to: `cache_mb = 64
dims = { y = "a", x = "a" }`, parse: true, parsed: []string{"source[0].dims.", `is mapped to dims.`}},
		{name: "dims not a table", from: "cache_mb = 64", to: `cache_mb = 64
dims = "y"`, parse: true, parsed: []string{"source[0].dims", "expected a table"}},
		{name: "non-decimal string ids", edit: func(ds map[string]*memDataset) {
			s := make([]string, smallMem.S)
			for i := range s {
				s[i] = fmt.Sprintf("site-%d", i)
			}
			ds["pv.zarr"].arrays["system"] = &memArray{shape: []int{smallMem.S}, strs: s}
		}, want: []string{"source[2].store", "id coordinate pv.zarr/system", `"site-0", not a decimal integer`}},
		{name: "no positions", edit: func(ds map[string]*memDataset) {
			a := ds["pv.zarr"].arrays
			delete(a, "x")
			delete(a, "y")
			a["power"].attrs = nil
		}, want: []string{"source[2].nearest_k", "pv.zarr/power has no positions", `over "system"`}},
		{name: "positions only in longitude/latitude", edit: func(ds map[string]*memDataset) {
			a := ds["pv.zarr"].arrays
			a["longitude"], a["latitude"] = a["x"], a["y"]
			delete(a, "x")
			delete(a, "y")
			a["power"].attrs = nil
		}, want: []string{"source[2].store", "pv is in EPSG:4326", "the anchor (source[0]) has no crs"}}, // meeting them needs a projection (align.go)
		{name: "unmappable points", edit: func(ds map[string]*memDataset) {
			ds["pv.zarr"].arrays["power"].dims = []string{"time", "station"}
		}, want: []string{"source[2].variable", "pv.zarr/power", "no id dimension among (time, station)", "system, location_id, gsp_id, ss_id, site_id"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := memConfigFmt("")
			if c.from != "" {
				if !strings.Contains(text, c.from) {
					t.Fatalf("test bug: %q not in the config", c.from)
				}
				text = strings.Replace(text, c.from, c.to, 1)
			}
			cfg, err := parseCfg(t, text)
			if c.parse {
				if err == nil {
					t.Fatal("parser accepted")
				}
				for _, w := range c.parsed {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if !strings.Contains(err.Error(), "test.toml:") {
					t.Errorf("error %q names no line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ds := newMemNowcast(smallMem)
			if c.edit != nil {
				c.edit(ds)
			}
			j, err := NewJob(cfg, Options{Open: memOpen(ds)})
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				j.Close()
				return
			}
			if err == nil {
				j.Close()
				t.Fatal("accepted")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
