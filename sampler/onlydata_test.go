package sampler

import (
	"sort"
	"strings"
	"testing"
)

// listedDataset is a memDataset that lists its arrays, as a Zarr store with metadata does.
type listedDataset struct{ *memDataset }

func (d listedDataset) ArrayNames() ([]string, error) {
	var out []string
	for n := range d.arrays {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// A source without variable takes the store's only data array: not a dimension coordinate,
// not named in a CF coordinates attribute (ocf-data-sampler's satellite and NWP stores).
func TestOnlyDataArray(t *testing.T) {
	arrays := map[string]*memArray{
		"data":            {dims: []string{"variable", "time", "y_geostationary", "x_geostationary"}, attrs: map[string]string{"coordinates": "x_osgb y_osgb"}},
		"variable":        {dims: []string{"variable"}},
		"time":            {dims: []string{"time"}},
		"y_geostationary": {dims: []string{"y_geostationary"}},
		"x_geostationary": {dims: []string{"x_geostationary"}},
		"x_osgb":          {dims: []string{"y_geostationary", "x_geostationary"}},
		"y_osgb":          {dims: []string{"y_geostationary", "x_geostationary"}},
	}
	ds := listedDataset{&memDataset{name: "sat.zarr", arrays: arrays}}
	if name, err := onlyDataArray(ds); err != nil || name != "data" {
		t.Fatalf("got %q, %v; want data", name, err)
	}
	arrays["capacity_mwp"] = &memArray{dims: []string{"time"}}
	if _, err := onlyDataArray(ds); err == nil || !strings.Contains(err.Error(), "2 data arrays [capacity_mwp, data]") {
		t.Fatalf("two data arrays: %v", err)
	}
	if _, err := onlyDataArray(&memDataset{name: "x.zarr"}); err == nil || !strings.Contains(err.Error(), "cannot list its arrays") {
		t.Fatalf("no listing: %v", err)
	}
}
