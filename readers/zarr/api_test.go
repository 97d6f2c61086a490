package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func manifestPaths(t *testing.T, store string) []string {
	var out []string
	for _, e := range loadManifest(t) {
		if e.Store == store {
			out = append(out, e.Path)
		}
	}
	sort.Strings(out)
	return out
}

func TestHierarchy(t *testing.T) {
	for _, store := range []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr"} {
		want := manifestPaths(t, store)
		check := func(h *Hierarchy, consolidated bool) {
			t.Helper()
			if h.Consolidated != consolidated {
				t.Fatalf("%s: Consolidated %v, want %v", store, h.Consolidated, consolidated)
			}
			if got := h.Arrays(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s: arrays %v, want %v", store, got, want)
			}
			for _, p := range want {
				a, err := h.OpenArray(p)
				if err != nil {
					t.Fatal(err)
				}
				if a.Path != p {
					t.Fatalf("path %q, want %q", a.Path, p)
				}
			}
		}
		h, err := OpenDir(filepath.Join("testdata", store))
		if err != nil {
			t.Fatal(err)
		}
		check(h, true)
		// Without consolidated metadata the tree comes from listing the store.
		dir := copyStore(t, store)
		if h.ZarrFormat == 2 {
			os.Remove(filepath.Join(dir, ".zmetadata"))
		} else {
			p := filepath.Join(dir, "zarr.json")
			var doc map[string]any
			b, _ := os.ReadFile(p)
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			delete(doc, "consolidated_metadata")
			b, _ = json.Marshal(doc)
			os.WriteFile(p, b, 0o644)
		}
		h2, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		check(h2, false)
		// The same through a MemStore (generic listing).
		ds, _ := NewDirStore(dir)
		ms := NewMemStore("mem")
		keys, _ := ds.List("")
		for _, k := range keys {
			ms.Data[k], _ = ds.Get(k)
		}
		h3, err := Open(ms)
		if err != nil {
			t.Fatal(err)
		}
		check(h3, false)
	}
	h, _ := OpenDir("testdata/v2.zarr")
	var title string
	json.Unmarshal(h.Root.Attrs["title"], &title)
	if title != "gobatch v2 fixtures" {
		t.Fatalf("root title %q", title)
	}
	sub := h.Node("sub")
	if sub == nil || sub.IsArray || len(sub.Children) != 1 || sub.Children[0].Path != "sub/inner" || sub.Children[0].Name() != "inner" {
		t.Fatalf("group sub: %+v", sub)
	}
	h3, _ := OpenDir("testdata/v3.zarr")
	if g := h3.Node("grp"); g == nil || g.IsArray || len(g.Children) != 1 {
		t.Fatalf("v3 group grp: %+v", g)
	}
	// A root array opens as a one-node hierarchy.
	ha, err := OpenDir("testdata/v2.zarr/sub/inner")
	if err != nil {
		t.Fatal(err)
	}
	if ha.Root == nil || !ha.Root.IsArray {
		t.Fatal("root array not found")
	}
	if _, err := ha.OpenArray(""); err != nil {
		t.Fatal(err)
	}
}

func TestMetadataDetails(t *testing.T) {
	temp := openFixture(t, "cf2.zarr", "temp")
	if strings.Join(temp.DimNames, ",") != "time,channel,y,x" {
		t.Fatalf("dims %v", temp.DimNames)
	}
	cf := temp.CF()
	if cf.ScaleFactor != 0.01 || cf.AddOffset != 10 || len(cf.FillValues) != 1 || cf.FillValues[0] != -32768 {
		t.Fatalf("cf2 temp CF %+v", cf)
	}
	if temp.DType.String() != "<i2" || temp.Codecs[0].Name != "blosc" {
		t.Fatalf("dtype %s codecs %v", temp.DType, temp.Codecs)
	}
	sat3 := openFixture(t, "cf3.zarr", "sat")
	if c := sat3.CF(); len(c.FillValues) != 1 || !math.IsNaN(c.FillValues[0]) {
		t.Fatalf("cf3 sat _FillValue (base64) %+v", c)
	}
	tm := openFixture(t, "cf3.zarr", "time")
	if c := tm.CF(); !c.IsTime || c.TimeUnit != time.Minute || !c.Epoch.Equal(time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("time CF %+v", c)
	}
	f4 := openFixture(t, "v3.zarr", "f4_default")
	if strings.Join(f4.DimNames, ",") != "y,x" || f4.DType.String() != "float32" {
		t.Fatalf("v3 dims %v dtype %s", f4.DimNames, f4.DType)
	}
	sh := openFixture(t, "v3.zarr", "sharded_end")
	if !equalInts(sh.Chunks, []int{4, 3}) || !equalInts(sh.ShardShape, []int{8, 6}) || sh.Codecs[0].Name != "sharding_indexed" || len(sh.Codecs[0].Inner) != 2 {
		t.Fatalf("sharded: chunks %v shards %v codecs %v", sh.Chunks, sh.ShardShape, sh.Codecs)
	}
	fv := openFixture(t, "v3.zarr", "fill_hex")
	if got := math.Float32frombits(uint32(fv.FillValue[0]) | uint32(fv.FillValue[1])<<8 | uint32(fv.FillValue[2])<<16 | uint32(fv.FillValue[3])<<24); got != 1.5 {
		t.Fatalf("hex fill %v", got)
	}
	dt := openFixture(t, "v2.zarr", "dt_ns")
	if dt.DType.Kind != KindDatetime || dt.DType.Unit != "ns" {
		t.Fatalf("datetime dtype %+v", dt.DType)
	}
}

func TestZipStore(t *testing.T) {
	h, err := OpenPath("testdata/v2.zarr.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Store.(*ZipStore).Close()
	if !h.Consolidated || strings.Join(h.Arrays(), ",") != "data,labels" {
		t.Fatalf("zip hierarchy: consolidated %v arrays %v", h.Consolidated, h.Arrays())
	}
	a, _ := h.OpenArray("data")
	if n, size, err := a.StoredChunks(); err != nil || n != 12 || size == 0 {
		t.Fatalf("zip stored chunks %d (%d bytes), %v", n, size, err)
	}
	if _, err := h.Store.GetRange("data/0.0.0", 190, 10); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("range past the end: %v", err)
	}
	if _, err := h.Store.Get("data/9.9.9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing entry: %v", err)
	}
}

func TestStoredChunks(t *testing.T) {
	for _, c := range []struct {
		store, path string
		want        int
	}{
		{"v2.zarr", "i2_blosc_lz4", 14},   // 3x5 grid, one chunk all fill
		{"v2.zarr", "f4_zstd_nested", 35}, // 3x3x3 grid... see below
		{"v3.zarr", "sharded_end", 3},     // 2x2 shards, one all fill
		{"v2.zarr", "fill_nan", 0},
	} {
		a := openFixture(t, c.store, c.path)
		n, size, err := a.StoredChunks()
		if err != nil {
			t.Fatal(err)
		}
		// Count the files the hard way.
		files := 0
		root := filepath.Join("testdata", c.store, c.path)
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && !strings.HasPrefix(info.Name(), ".") && info.Name() != "zarr.json" {
				files++
			}
			return nil
		})
		if n != files || (c.path != "f4_zstd_nested" && n != c.want) {
			t.Fatalf("%s: %d stored chunks, %d files, want %d", c.path, n, files, c.want)
		}
		if (n > 0) != (size > 0) {
			t.Fatalf("%s: %d chunks of %d bytes", c.path, n, size)
		}
	}
}

// countingStore counts Get and GetRange calls.
type countingStore struct {
	Store
	n atomic.Int64
}

func (s *countingStore) Get(key string) ([]byte, error) { s.n.Add(1); return s.Store.Get(key) }
func (s *countingStore) GetRange(key string, off, n int64) ([]byte, error) {
	s.n.Add(1)
	return s.Store.GetRange(key, off, n)
}

type mapCache struct {
	mu   sync.Mutex
	m    map[ChunkKey][]byte
	hits int
}

func (c *mapCache) Get(k ChunkKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[k]
	if ok {
		c.hits++
	}
	return b, ok
}
func (c *mapCache) Put(k ChunkKey, b []byte) { c.mu.Lock(); c.m[k] = b; c.mu.Unlock() }

func TestChunkCache(t *testing.T) {
	for _, path := range []string{"i2_blosc_lz4", "f8_zlib_F"} {
		ds, _ := NewDirStore("testdata/v2.zarr")
		s := &countingStore{Store: ds}
		a, err := OpenArray(s, path)
		if err != nil {
			t.Fatal(err)
		}
		cache := &mapCache{m: map[ChunkKey][]byte{}}
		a.SetCache(cache)
		want := make([]byte, a.Len()*a.DType.Size)
		if err := a.ReadBox(a.fullBox(), a.Shape, want, &ReadOptions{NoCache: true}); err != nil {
			t.Fatal(err)
		}
		base := s.n.Load()
		got := make([]byte, len(want))
		if err := a.ReadBox(a.fullBox(), a.Shape, got, nil); err != nil {
			t.Fatal(err)
		}
		first := s.n.Load() - base
		if !bytes.Equal(got, want) || first == 0 || len(cache.m) != a.NumChunks() {
			t.Fatalf("%s: first cached read: equal %v, %d reads, %d cached", path, bytes.Equal(got, want), first, len(cache.m))
		}
		clear(got)
		if err := a.ReadBox(a.fullBox(), a.Shape, got, &ReadOptions{Parallel: 2}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || s.n.Load()-base != first || cache.hits != a.NumChunks() {
			t.Fatalf("%s: second read went to the store (%d reads) or differs", path, s.n.Load()-base-first)
		}
	}
}

func TestConcurrentReads(t *testing.T) {
	e := manifestEntry{}
	for _, m := range loadManifest(t) {
		if m.Store == "v2.zarr" && m.Path == "f4_zstd_nested" {
			e = m
		}
	}
	a := openFixture(t, e.Store, e.Path)
	want := expectedBytes(t, e.Data)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 50; i++ {
				start, stop := randomBox(rng, a.Shape)
				w := subBox(want, a.Shape, start, stop, 4)
				got := make([]byte, len(w))
				if err := a.ReadBox(start, stop, got, &ReadOptions{Parallel: 1 + int(seed%3)}); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, w) {
					errs <- &Error{Path: a.Path, Err: ErrCorrupt}
					return
				}
			}
		}(int64(g))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// memCopy loads a fixture array into a MemStore so allocations of the store do not count.
func memCopy(t testing.TB, store, path string) *Array {
	m := NewMemStore("mem")
	root := filepath.Join("testdata", store)
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(root, p)
			b, _ := os.ReadFile(p)
			m.Data[filepath.ToSlash(rel)] = b
		}
		return nil
	})
	a, err := OpenArray(m, path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestReadBoxAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	for _, c := range []struct {
		store, path string
		opt         ReadOptions
		max         float64
		dir         bool
	}{
		{"v2.zarr", "i2_blosc_lz4", ReadOptions{}, 0, true},
		{"v3.zarr", "sharded_end", ReadOptions{CF: true}, 0, true},
		{"v2.zarr", "i2_blosc_lz4", ReadOptions{Out: Float32}, 0, false},
		{"v2.zarr", "f4_zstd_nested", ReadOptions{}, 0, false},
		{"v2.zarr", "f8_zlib_F", ReadOptions{}, 0, false},
		{"cf2.zarr", "temp", ReadOptions{CF: true}, 0, false},
		{"v3.zarr", "sharded_end", ReadOptions{}, 0, false},
	} {
		a := memCopy(t, c.store, c.path)
		if c.dir {
			a = openFixture(t, c.store, c.path) // DirStore: openat/fstat/pread, no allocation on Linux
		}
		dst := make([]byte, a.Len()*8)
		zero := a.fullBox()
		read := func() {
			if err := a.ReadBox(zero, a.Shape, dst, &c.opt); err != nil {
				t.Fatal(err)
			}
		}
		read()
		n := testing.AllocsPerRun(20, read)
		t.Logf("%s/%s: %.1f allocations per ReadBox of %d chunks", c.store, c.path, n, a.NumChunks())
		if n > c.max {
			t.Errorf("%s/%s: %.1f allocations per ReadBox, want <= %.0f", c.store, c.path, n, c.max)
		}
	}
}

// Reading never writes into a store's memory (MemStore hands out its own slices).
func TestStoreBytesUntouched(t *testing.T) {
	stores := map[string]*MemStore{}
	for _, e := range loadManifest(t) {
		if strings.HasSuffix(e.Store, ".zip") {
			continue
		}
		m, ok := stores[e.Store]
		if !ok {
			m = memCopy(t, e.Store, e.Path).Store.(*MemStore)
			stores[e.Store] = m
		}
		a, err := OpenArray(m, e.Path)
		if err != nil {
			t.Fatal(err)
		}
		snap := map[string][]byte{}
		for k, v := range m.Data {
			snap[k] = append([]byte(nil), v...)
		}
		for i := 0; i < 2; i++ {
			if err := readAll(a); err != nil {
				t.Fatalf("%s/%s: %v", e.Store, e.Path, err)
			}
		}
		for k, v := range m.Data {
			if !bytes.Equal(v, snap[k]) {
				t.Fatalf("%s/%s: reading changed the stored bytes of %s", e.Store, e.Path, k)
			}
		}
	}
}

// Shard indexes are read once per shard, then each inner chunk costs one range read.
func TestShardIndexCache(t *testing.T) {
	ds, _ := NewDirStore("testdata/v3.zarr")
	s := &countingStore{Store: ds}
	a, err := OpenArray(s, "sharded_end")
	if err != nil {
		t.Fatal(err)
	}
	base := s.n.Load()
	dst := make([]byte, a.Len()*2)
	if err := a.ReadBox(a.fullBox(), a.Shape, dst, nil); err != nil {
		t.Fatal(err)
	}
	first := s.n.Load() - base
	if err := a.ReadBox(a.fullBox(), a.Shape, dst, nil); err != nil {
		t.Fatal(err)
	}
	second := s.n.Load() - base - first
	// 2x2 shards (one not stored), 2x2 inner chunks each, some inner chunks empty.
	if first-second != 4 || second == 0 || second > 12 {
		t.Fatalf("store reads: first pass %d, second %d; want 4 index reads saved", first, second)
	}
}

// One unreadable array does not stop the rest of the hierarchy from opening.
func TestBrokenArrayInHierarchy(t *testing.T) {
	s := NewMemStore("mem")
	s.Data[".zmetadata"] = []byte(`{"zarr_consolidated_format": 1, "metadata": {
		".zgroup": {"zarr_format": 2},
		"good/.zarray": {"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<i2", "fill_value": 3, "order": "C", "compressor": null},
		"bad/.zarray": {"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": [["a", "<i2"]], "fill_value": null, "order": "C", "compressor": null},
		"bad/.zattrs": {"note": "structured"}}}`)
	h, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(h.Arrays(), ",") != "bad,good" || h.Node("bad").Err == nil {
		t.Fatalf("arrays %v, bad node %+v", h.Arrays(), h.Node("bad"))
	}
	if _, err := h.OpenArray("bad"); err == nil || !strings.Contains(err.Error(), "structured") {
		t.Fatalf("OpenArray(bad): %v", err)
	}
	a, err := h.OpenArray("good")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int16, 2)
	if err := a.ReadBox([]int{0}, []int{2}, unsafeInt16Bytes(got), nil); err != nil || got[0] != 3 {
		t.Fatalf("good array: %v %v", got, err)
	}
}

// readCountingDir is a DirStore that counts Get and GetRange calls; sized says
// whether it passes on DirStore's Sizer.
type readCountingDir struct {
	*DirStore
	reads atomic.Int64
}

func (s *readCountingDir) Get(key string) ([]byte, error) {
	s.reads.Add(1)
	return s.DirStore.Get(key)
}

func (s *readCountingDir) GetRange(key string, off, n int64) ([]byte, error) {
	s.reads.Add(1)
	return s.DirStore.GetRange(key, off, n)
}

type listOnlyStore struct{ s *readCountingDir }

func (s listOnlyStore) String() string                       { return s.s.String() }
func (s listOnlyStore) Get(key string) ([]byte, error)       { return s.s.Get(key) }
func (s listOnlyStore) List(prefix string) ([]string, error) { return s.s.List(prefix) }
func (s listOnlyStore) GetRange(key string, off, n int64) ([]byte, error) {
	return s.s.GetRange(key, off, n)
}

// StoredChunks takes sizes from the store's Sizer (stat) and reads no chunk; a
// store without Sizer gets the count and -1 bytes, still without reading chunks.
func TestStoredChunksReadsNothing(t *testing.T) {
	d, err := NewDirStore(filepath.Join("testdata", "v2.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	cs := &readCountingDir{DirStore: d}
	a, err := OpenArray(cs, "i2_blosc_lz4")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	filepath.Walk(filepath.Join("testdata", "v2.zarr", "i2_blosc_lz4"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(info.Name(), ".") {
			want += info.Size()
		}
		return nil
	})
	cs.reads.Store(0)
	n, size, err := a.StoredChunks()
	if err != nil || n != 14 || size != want || want == 0 {
		t.Fatalf("StoredChunks = %d, %d, %v; want 14, %d", n, size, err, want)
	}
	if r := cs.reads.Load(); r != 0 {
		t.Fatalf("StoredChunks made %d reads, want 0", r)
	}
	a2, err := OpenArray(listOnlyStore{cs}, "i2_blosc_lz4")
	if err != nil {
		t.Fatal(err)
	}
	cs.reads.Store(0)
	n, size, err = a2.StoredChunks()
	if err != nil || n != 14 || size != -1 || cs.reads.Load() != 0 {
		t.Fatalf("without Sizer: %d chunks, %d bytes, %v, %d reads; want 14, -1, nil, 0", n, size, err, cs.reads.Load())
	}
}
