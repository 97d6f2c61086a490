package sampler

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// splitTime cuts every array of d whose first dimension is dim (the data and its time
// coordinate) at the given indices along it, naming the parts name-0.zarr, name-1.zarr, ...;
// the other arrays are shared by every part. The coordinate of dim is given its dimension name,
// as a Zarr store's is.
func splitTime(d *memDataset, dim, name string, cuts ...int) []*memDataset {
	bounds := append(append([]int{0}, cuts...), 0)
	out := make([]*memDataset, len(cuts)+1)
	for i := range out {
		out[i] = &memDataset{name: fmt.Sprintf("%s-%d.zarr", name, i), arrays: map[string]*memArray{}}
	}
	for an, a := range d.arrays {
		along := an == dim || (len(a.dims) > 0 && a.dims[0] == dim)
		for i, part := range out {
			if !along {
				part.arrays[an] = a
				continue
			}
			n := a.shape[0]
			lo, hi := bounds[i], bounds[i+1]
			if i == len(out)-1 {
				hi = n
			}
			row := 1
			for _, s := range a.shape[1:] {
				row *= s
			}
			c := *a
			c.shape = slices.Clone(a.shape)
			c.shape[0] = hi - lo
			if an == dim {
				c.dims = []string{dim}
			}
			if a.raw != nil {
				c.raw = a.raw[lo*row : hi*row]
			}
			if a.ints != nil {
				c.ints = a.ints[lo*row : hi*row]
			}
			part.arrays[an] = &c
		}
	}
	return out
}

// concatConfig is memConfig with each source's store replaced by the list of its parts.
func concatConfig(extra string, parts map[string][]*memDataset) string {
	text := fmt.Sprintf(memConfig, extra)
	for store, ps := range parts {
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = fmt.Sprintf("%q", p.name)
		}
		text = strings.Replace(text, fmt.Sprintf("store = %q", store), "store = ["+strings.Join(names, ", ")+"]", 1)
	}
	return text
}

// A source whose store is a list of stores reads as the one store they were cut from: the
// satellite in three (a cut on its 12-step chunk grid and one inside a chunk, so that chunks
// straddle two stored ones, and the last store chunked by 5 steps), the NWP in two along init_time, the PV in two inside a chunk;
// every batch is bit for bit the one of the uncut stores, and the concatenation's aligned
// part decodes each chunk once, in place.
func TestConcatenatedStoresSameBatches(t *testing.T) {
	whole, _ := newMemJob(t, smallMem, "", Options{})
	want := fillRange(t, whole, 0, 12, 2)

	ds := newMemNowcast(smallMem)
	sat := splitTime(ds["satellite.zarr"], "time", "sat", 48, 101)
	nwp := splitTime(ds["nwp.zarr"], "init_time", "nwp", 3)
	pv := splitTime(ds["pv.zarr"], "time", "pv", 70)
	open := map[string]*memDataset{}
	for _, p := range slices.Concat(sat, nwp, pv) {
		open[p.name] = p
	}
	third := *sat[2].arrays["data"] // the last store chunked otherwise along time, as a later archive may be
	third.chunks = slices.Clone(third.chunks)
	third.chunks[0] = 5
	sat[2].arrays["data"] = &third
	var decodes atomic.Int64 // the first store's chunk decodes
	sat[0].arrays["data"].onDecode = func([]int) { decodes.Add(1) }
	cfg, err := parseCfg(t, concatConfig("", map[string][]*memDataset{"satellite.zarr": sat, "nwp.zarr": nwp, "pv.zarr": pv}))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(open)})
	if err != nil {
		t.Fatal(err)
	}
	got := fillRange(t, j, 0, 12, 2)
	for b := range want {
		for i := range want[b] {
			if string(got[b][i]) != string(want[b][i]) {
				t.Fatalf("batch %d, tensor %s differs from the uncut stores'", b, j.Tensors()[i].Name)
			}
		}
	}
	if n, misses := decodes.Load(), j.Cache().Stats().Misses; n == 0 || uint64(n) > misses {
		t.Errorf("the first satellite store decoded %d chunks for %d cache misses of the job; want each at most once", n, misses)
	}
	if w := j.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q, want none", w)
	}
}

// Stores that overlap in time or come out of order are refused, naming both; an array that
// differs in its dtype is refused naming the stores; a coordinate of another dimension that
// differs is the first store's, with a warning.
func TestConcatenatedStoresRefusedOrWarned(t *testing.T) {
	try := func(parts []*memDataset, mutate func([]*memDataset)) (*Job, error) {
		ds := newMemNowcast(smallMem)
		open := map[string]*memDataset{"nwp.zarr": ds["nwp.zarr"], "pv.zarr": ds["pv.zarr"]}
		if mutate != nil {
			mutate(parts)
		}
		for _, p := range parts {
			open[p.name] = p
		}
		cfg, err := parseCfg(t, concatConfig("", map[string][]*memDataset{"satellite.zarr": parts}))
		if err != nil {
			t.Fatal(err)
		}
		return NewJob(cfg, Options{Open: memOpen(open)})
	}
	cut := func() []*memDataset { return splitTime(newMemNowcast(smallMem)["satellite.zarr"], "time", "sat", 60) }

	swapped := cut()
	swapped[0], swapped[1] = swapped[1], swapped[0]
	if _, err := try(swapped, nil); err == nil || !strings.Contains(err.Error(), "sat-0.zarr/time starts at") ||
		!strings.Contains(err.Error(), "where sat-1.zarr/time ends") || !strings.Contains(err.Error(), "source[0].store") {
		t.Errorf("stores out of order: %v; want the store and the one before it named", err)
	}
	overlap := splitTime(newMemNowcast(smallMem)["satellite.zarr"], "time", "sat", 60)
	again := splitTime(newMemNowcast(smallMem)["satellite.zarr"], "time", "sat", 59)[1] // times 59 ..
	again.name = "sat-again.zarr"
	if _, err := try([]*memDataset{overlap[0], again}, nil); err == nil || !strings.Contains(err.Error(), "sat-again.zarr/time starts at") {
		t.Errorf("overlapping stores: %v; want them refused", err)
	}
	if _, err := try(cut(), func(p []*memDataset) {
		d := *p[1].arrays["data"]
		d.kind, d.size = 'f', 4
		p[1].arrays["data"] = &d
	}); err == nil || !strings.Contains(err.Error(), "dtypes i2 and f4") || !strings.Contains(err.Error(), "sat-1.zarr/data") {
		t.Errorf("a store of another dtype: %v; want it refused, naming it", err)
	}
	j, err := try(cut(), func(p []*memDataset) {
		x := *p[1].arrays["x"]
		x.raw = coords(len(x.raw), 200001, 2000)
		p[1].arrays["x"] = &x
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(j.Warnings(), "\n"); !strings.Contains(w, "sat-1.zarr/x differs from sat-0.zarr/x; the first store's is used") {
		t.Errorf("warnings %q; want the differing coordinate named", w)
	}
}

// fetchingMem is a memArray that reads a chunk in two steps, as a store-backed array does
// (fetchingArray): FetchChunk "reads" its bytes (the decoded values stand for them), and
// DecodeFetched copies them into place. It counts both steps.
type fetchingMem struct {
	*memArray
	fetched, decoded *atomic.Int64
}

func (f fetchingMem) FetchChunk(idx []int, buf []byte) ([]byte, bool, error) {
	f.fetched.Add(1)
	raw := append(buf[:0], make([]byte, f.rawChunkBytes())...)
	return raw, true, f.memArray.DecodeChunk(idx, raw)
}

func (f fetchingMem) DecodeFetched(idx []int, raw []byte, found bool, dst []byte) error {
	f.decoded.Add(1)
	copy(dst, raw)
	return nil
}

func (f fetchingMem) rawChunkBytes() int {
	n := f.size
	for _, c := range f.chunks {
		n *= c
	}
	return n
}

// fetchingDS gives its "data" array as a fetchingMem.
type fetchingDS struct {
	*memDataset
	fetched, decoded *atomic.Int64
}

func (d fetchingDS) Array(n string) (Array, error) {
	a, err := d.memDataset.Array(n)
	if err != nil || n != "data" {
		return a, err
	}
	return fetchingMem{a.(*memArray), d.fetched, d.decoded}, nil
}

// TestConcatenatedStoresFetchInTwoSteps: a concatenation of stores that read a chunk in two
// steps (object storage's: the read bounded by fetch_depth, the decode by the cores) reads
// each chunk that is one stored chunk of one store that way, and each chunk a store boundary
// cuts in one step; every batch is still the uncut stores'.
func TestConcatenatedStoresFetchInTwoSteps(t *testing.T) {
	whole, _ := newMemJob(t, smallMem, "", Options{})
	want := fillRange(t, whole, 0, 12, 2)
	ds := newMemNowcast(smallMem)
	sat := splitTime(ds["satellite.zarr"], "time", "sat", 48, 101) // 101: inside a 12-step chunk
	var fetched, decoded atomic.Int64
	open := map[string]Dataset{"nwp.zarr": ds["nwp.zarr"], "pv.zarr": ds["pv.zarr"]}
	for _, p := range sat {
		open[p.name] = fetchingDS{p, &fetched, &decoded}
	}
	cfg, err := parseCfg(t, concatConfig("", map[string][]*memDataset{"satellite.zarr": sat}))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: func(path string) (Dataset, error) {
		if d, ok := open[filepath.Base(path)]; ok {
			return d, nil
		}
		return nil, fmt.Errorf("no store %s", path)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	got := fillRange(t, j, 0, 12, 2)
	for b := range want {
		for i := range want[b] {
			if string(got[b][i]) != string(want[b][i]) {
				t.Fatalf("batch %d, tensor %s differs from the uncut stores'", b, j.Tensors()[i].Name)
			}
		}
	}
	sd, _ := j.srcs[0].data().chunkCounts()
	f, d := fetched.Load(), decoded.Load()
	if d == 0 || f != d {
		t.Fatalf("%d chunks fetched and %d decoded in two steps; want every fetched chunk decoded, some", f, d)
	}
	if uint64(d) >= sd {
		t.Errorf("%d of %d satellite chunks read in two steps; the chunks a store boundary cuts cannot be", d, sd)
	}
}
