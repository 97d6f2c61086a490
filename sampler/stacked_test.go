package sampler

import (
	"slices"
	"strings"
	"testing"
)

// unstack splits the array name of d along its axis into one array per channel, named by the
// coordinate names, removing the channel coordinate: a store of one data array per channel.
func unstack(d *memDataset, name string, axis int, names string) *memDataset {
	a := d.arrays[name]
	chans := d.arrays[names].strs
	out := &memDataset{name: d.name, arrays: map[string]*memArray{}}
	for k, v := range d.arrays {
		if k != name && k != names {
			out.arrays[k] = v
		}
	}
	outer, inner := 1, 1
	for _, s := range a.shape[:axis] {
		outer *= s
	}
	for _, s := range a.shape[axis+1:] {
		inner *= s
	}
	n := a.shape[axis]
	for c, cn := range chans {
		p := *a
		p.shape = slices.Delete(slices.Clone(a.shape), axis, axis+1)
		p.chunks = slices.Delete(slices.Clone(a.chunks), axis, axis+1)
		p.dims = slices.Delete(slices.Clone(a.dims), axis, axis+1)
		p.raw = make([]float64, 0, outer*inner)
		for o := range outer {
			p.raw = append(p.raw, a.raw[(o*n+c)*inner:(o*n+c+1)*inner]...)
		}
		out.arrays[cn] = &p
	}
	return out
}

// listedDS is a memDataset that lists its arrays (sorted), as a Zarr store with consolidated
// metadata does.
type listedDS struct{ *memDataset }

func (d listedDS) ArrayNames() ([]string, error) {
	var out []string
	for n := range d.arrays {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// A store of one data array per channel (GFS's layout), read with variables_as_channels, gives
// the batches of the same data stored as one array with a channel dimension; the channels are
// selected by name as usual; a variable key beside it, or arrays that disagree, are refused.
func TestVariablesAsChannels(t *testing.T) {
	whole, _ := newMemJob(t, smallMem, "", Options{})
	want := fillRange(t, whole, 0, 6, 2)

	ds := newMemNowcast(smallMem)
	ds["nwp.zarr"] = unstack(ds["nwp.zarr"], "UKV", 2, "variable")
	text := strings.Replace(memConfigFmt(""), `variable = "UKV"`, "variables_as_channels = true", 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		t.Fatal(err)
	}
	open := func(p string) (Dataset, error) {
		d, err := memOpen(ds)(p)
		if err == nil && strings.HasSuffix(p, "nwp.zarr") {
			return listedDS{d.(*memDataset)}, nil
		}
		return d, err
	}
	j, err := NewJob(cfg, Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	got := fillRange(t, j, 0, 6, 2)
	for b := range want {
		for i := range want[b] {
			if string(got[b][i]) != string(want[b][i]) {
				t.Fatalf("batch %d, tensor %s differs from the one-array store's", b, j.Tensors()[i].Name)
			}
		}
	}

	if _, err := parseCfg(t, strings.Replace(memConfigFmt(""), `variable = "UKV"`, "variable = \"UKV\"\nvariables_as_channels = true", 1)); err == nil ||
		!strings.Contains(err.Error(), "source[1].variables_as_channels: true with variable") {
		t.Errorf("variable beside variables_as_channels: %v", err)
	}
	ds["nwp.zarr"].arrays["w"].kind, ds["nwp.zarr"].arrays["w"].size = 'i', 2
	if _, err := NewJob(cfg, Options{Open: open}); err == nil || !strings.Contains(err.Error(), "source[1].variables_as_channels") ||
		!strings.Contains(err.Error(), "dtypes f4 and i2") {
		t.Errorf("a channel of another dtype: %v", err)
	}
}
