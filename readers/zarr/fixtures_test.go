package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The fixtures are written by testdata/gen.py with zarr-python and xarray; the
// expected values are what those libraries read back.

type manifestEntry struct {
	Store      string   `json:"store"`
	Path       string   `json:"path"`
	Shape      []int    `json:"shape"`
	DType      string   `json:"dtype"`
	ZarrFormat int      `json:"zarr_format"`
	Data       string   `json:"data"`
	Native     string   `json:"native"`
	Strings    []string `json:"strings"`
	BytesHex   []string `json:"bytes_hex"`
	Int64      []int64  `json:"int64"`
	CFData     string   `json:"cf_data"`
	CFInt64    []int64  `json:"cf_int64"`
}

var (
	manifestOnce sync.Once
	manifest     []manifestEntry
	manifestErr  error
	hierMu       sync.Mutex
	hiers        = map[string]*Hierarchy{}
)

func loadManifest(t testing.TB) []manifestEntry {
	manifestOnce.Do(func() {
		b, err := os.ReadFile("testdata/manifest.json")
		if err != nil {
			manifestErr = err
			return
		}
		var m struct {
			Arrays []manifestEntry `json:"arrays"`
		}
		manifestErr = json.Unmarshal(b, &m)
		manifest = m.Arrays
	})
	if manifestErr != nil {
		t.Fatal(manifestErr)
	}
	return manifest
}

func openFixture(t testing.TB, store, path string) *Array {
	t.Helper()
	hierMu.Lock()
	h, ok := hiers[store]
	if !ok {
		var err error
		h, err = OpenPath(filepath.Join("testdata", store))
		if err != nil {
			hierMu.Unlock()
			t.Fatal(err)
		}
		hiers[store] = h
	}
	hierMu.Unlock()
	a, err := h.OpenArray(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func expectedBytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "expected", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// subBox extracts box [start, stop) of the C-order array full (shape, es-byte elements).
func subBox(full []byte, shape, start, stop []int, es int) []byte {
	var out []byte
	nd := len(shape)
	if nd == 0 {
		return append(out, full[:es]...)
	}
	str := cStrides(shape)
	idx := append([]int(nil), start...)
	for d := range start {
		if start[d] >= stop[d] {
			return nil
		}
	}
	for {
		o := 0
		for d := range idx {
			o += idx[d] * str[d]
		}
		out = append(out, full[o*es:(o+1)*es]...)
		if !nextIndex(idx, start, stop) {
			return out
		}
	}
}

func randomBox(rng *rand.Rand, shape []int) ([]int, []int) {
	start := make([]int, len(shape))
	stop := make([]int, len(shape))
	for d, n := range shape {
		if n == 0 {
			continue
		}
		start[d] = rng.Intn(n)
		stop[d] = start[d] + 1 + rng.Intn(n-start[d])
	}
	return start, stop
}

func TestFixtures(t *testing.T) {
	entries := loadManifest(t)
	if len(entries) < 40 {
		t.Fatalf("manifest lists %d arrays, expected the full fixture set", len(entries))
	}
	for _, e := range entries {
		t.Run(e.Store+"/"+e.Path, func(t *testing.T) {
			a := openFixture(t, e.Store, e.Path)
			if !equalInts(a.Shape, e.Shape) {
				t.Fatalf("shape %v, want %v", a.Shape, e.Shape)
			}
			if a.ZarrFormat != e.ZarrFormat {
				t.Fatalf("zarr_format %d, want %d", a.ZarrFormat, e.ZarrFormat)
			}
			switch {
			case e.Data != "":
				checkNumeric(t, a, e)
			case e.Strings != nil || e.BytesHex != nil:
				checkStrings(t, a, e)
			case e.Int64 != nil:
				checkTimes(t, a, e)
			default:
				t.Fatalf("manifest entry without expected values")
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkNumeric(t *testing.T, a *Array, e manifestEntry) {
	checkValues(t, a, expectedBytes(t, e.Data))
	if e.CFData != "" {
		checkCF(t, a, e)
	}
}

// checkValues compares whole-array and random-box reads (native, float64, float32)
// and DecodeChunk with the values zarr-python read.
func checkValues(t *testing.T, a *Array, want []byte) {
	es := a.DType.Size
	if len(want) != a.Len()*es {
		t.Fatalf("expected file has %d bytes, array needs %d", len(want), a.Len()*es)
	}
	// Whole array, native type, serial and parallel.
	for _, par := range []int{1, 3} {
		got := make([]byte, len(want))
		if err := a.ReadBox(a.fullBox(), a.Shape, got, &ReadOptions{Parallel: par}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("parallel=%d: values differ from zarr-python\n got %x\nwant %x", par, head(got), head(want))
		}
	}
	// Random sub-boxes, native and converted to float32 / float64.
	rng := rand.New(rand.NewSource(int64(len(want))))
	for i := 0; i < 20; i++ {
		start, stop := randomBox(rng, a.Shape)
		wsub := subBox(want, a.Shape, start, stop, es)
		got := make([]byte, len(wsub))
		if err := a.ReadBox(start, stop, got, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wsub) {
			t.Fatalf("box %v:%v differs", start, stop)
		}
		n := len(wsub) / es
		f64 := make([]float64, n)
		if err := a.ReadBox(start, stop, float64Bytes(f64), &ReadOptions{Out: Float64}); err != nil {
			t.Fatal(err)
		}
		f32 := make([]float32, n)
		if err := a.ReadBoxFloat32(start, stop, f32, nil); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < n; k++ {
			w := elemFloat(wsub[k*es:(k+1)*es], a.DType)
			if !sameFloat(f64[k], w) {
				t.Fatalf("box %v:%v element %d: float64 %v, want %v", start, stop, k, f64[k], w)
			}
			if !sameFloat(float64(f32[k]), float64(float32(w))) {
				t.Fatalf("box %v:%v element %d: float32 %v, want %v", start, stop, k, f32[k], float32(w))
			}
		}
	}
	// DecodeChunk of the first chunk agrees with the box read of the same region.
	if a.Len() > 0 {
		idx := make([]int, a.NDim())
		c, err := a.DecodeChunk(idx, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := make([]int, a.NDim())
		for d := range stop {
			stop[d] = min(a.Chunks[d], a.Shape[d])
		}
		wsub := subBox(want, a.Shape, idx, stop, es)
		csub := subBox(c, a.Chunks, idx, stop, es)
		if !bytes.Equal(wsub, csub) {
			t.Fatalf("DecodeChunk(0...) differs from the array values")
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 48 {
		return b[:48]
	}
	return b
}

func sameFloat(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

func checkCF(t *testing.T, a *Array, e manifestEntry) {
	raw := expectedBytes(t, e.CFData)
	want := make([]float32, len(raw)/4)
	for i := range want {
		want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	got := make([]float32, a.Len())
	if err := a.ReadBoxFloat32(a.fullBox(), a.Shape, got, &ReadOptions{CF: true}); err != nil {
		t.Fatal(err)
	}
	nans := 0
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.IsNaN(w) || math.IsNaN(g) {
			if math.IsNaN(w) != math.IsNaN(g) {
				t.Fatalf("CF element %d: got %v, xarray %v", i, g, w)
			}
			nans++
			continue
		}
		if math.Abs(w-g) > 1e-6*math.Max(1, math.Abs(w)) {
			t.Fatalf("CF element %d: got %v, xarray %v", i, g, w)
		}
	}
	if nans == 0 {
		t.Fatalf("CF fixture has no masked values; it should")
	}
}

func checkTimes(t *testing.T, a *Array, e manifestEntry) {
	raw := make([]int64, a.Len())
	if err := a.ReadBox(a.fullBox(), a.Shape, int64Bytes(raw), nil); err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		if raw[i] != e.Int64[i] {
			t.Fatalf("raw %v, want %v", raw, e.Int64)
		}
	}
	var got []int64
	var err error
	readBox := a.ReadBoxTimes
	if a.DType.Kind == KindDatetime {
		got, err = a.ReadTimes()
	} else {
		got, err = a.ReadDurations()
		readBox = a.ReadBoxDurations
	}
	if err != nil {
		t.Fatal(err)
	}
	checkBoxes(t, a, got, readBox)
	un, _ := unitNanos(a.DType.Unit, a.DType.UnitScale)
	for i := range got {
		w := e.Int64[i]
		if w != NaT {
			w *= un
		}
		if got[i] != w {
			t.Fatalf("times %v, want %v (unit %s)", got, e.Int64, a.DType.Unit)
		}
	}
}

func TestCFTimes(t *testing.T) {
	n := 0
	for _, e := range loadManifest(t) {
		if e.CFInt64 == nil {
			continue
		}
		n++
		a := openFixture(t, e.Store, e.Path)
		var got []int64
		var err error
		if a.CF().IsTime {
			got, err = a.ReadTimes()
		} else {
			got, err = a.ReadDurations()
		}
		if err != nil {
			t.Fatalf("%s/%s: %v", e.Store, e.Path, err)
		}
		if len(got) != len(e.CFInt64) {
			t.Fatalf("%s/%s: %d values, want %d", e.Store, e.Path, len(got), len(e.CFInt64))
		}
		for i := range got {
			if got[i] != e.CFInt64[i] {
				t.Fatalf("%s/%s: %v, xarray %v", e.Store, e.Path, got, e.CFInt64)
			}
		}
	}
	if n < 4 {
		t.Fatalf("only %d CF time fixtures", n)
	}
}

// TestZarrPythonMatrix writes GOBATCH_ZARR_MATRIX random arrays with zarr-python
// (random format, shape, chunks, dtype, byte order, order, codecs, filters, sharding,
// fill value, partly written; seed GOBATCH_ZARR_MATRIX_SEED) and reads them back.
// It needs the project venv and is off by default.
func TestZarrPythonMatrix(t *testing.T) {
	n := os.Getenv("GOBATCH_ZARR_MATRIX")
	if n == "" {
		t.Skip("set GOBATCH_ZARR_MATRIX=<count> to run")
	}
	seed := os.Getenv("GOBATCH_ZARR_MATRIX_SEED")
	if seed == "" {
		seed = "1"
	}
	py, _ := filepath.Abs("../../.venv/bin/python")
	dir := t.TempDir()
	out, err := exec.Command(py, "testdata/gen.py", "--matrix", dir, n, seed).CombinedOutput()
	if err != nil {
		t.Fatalf("gen.py --matrix: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "matrix.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Arrays []struct {
			manifestEntry
			Config string `json:"config"`
		} `json:"arrays"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	hs := map[string]*Hierarchy{}
	for _, e := range m.Arrays {
		t.Run(e.Store+"/"+e.Path, func(t *testing.T) {
			h, ok := hs[e.Store]
			if !ok {
				var err error
				if h, err = OpenDir(filepath.Join(dir, e.Store)); err != nil {
					t.Fatal(err)
				}
				hs[e.Store] = h
			}
			a, err := h.OpenArray(e.Path)
			if err != nil {
				t.Fatalf("%v (config %s)", err, e.Config)
			}
			t.Logf("%s %v chunks %v: %s", a.DType, a.Shape, a.Chunks, e.Config)
			if e.Strings != nil || e.BytesHex != nil {
				checkStrings(t, a, e.manifestEntry)
				return
			}
			want, err := os.ReadFile(filepath.Join(dir, e.Data))
			if err != nil {
				t.Fatal(err)
			}
			checkValues(t, a, want)
		})
	}
}

// checkStrings compares ReadStrings with zarr-python's strings (or bytes, in hex).
func checkStrings(t *testing.T, a *Array, e manifestEntry) {
	t.Helper()
	got, err := a.ReadStrings()
	if err != nil {
		t.Fatal(err)
	}
	want := e.Strings
	if e.BytesHex != nil {
		want = e.BytesHex
		for i, s := range got {
			got[i] = hex.EncodeToString([]byte(s))
		}
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
		t.Fatalf("strings %q, want %q", got, want)
	}
	all, err := a.ReadStrings()
	if err != nil {
		t.Fatal(err)
	}
	checkBoxes(t, a, all, a.ReadBoxStrings)
}

// checkBoxes compares read (a ReadBox... method) on random boxes with the same boxes
// of all, the whole array as the whole-array method read it.
func checkBoxes[T comparable](t *testing.T, a *Array, all []T, read func(start, stop []int) ([]T, error)) {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(len(all))))
	for range 20 {
		start, stop := randomBox(rng, a.Shape)
		got, err := read(start, stop)
		if err != nil {
			t.Fatalf("box %v:%v: %v", start, stop, err)
		}
		k := 0
		boxIndices(a.Shape, start, stop, func(i int) {
			if k >= len(got) || got[k] != all[i] {
				t.Fatalf("box %v:%v element %d: %d values, want %v at flat %d", start, stop, k, len(got), all[i], i)
			}
			k++
		})
		if k != len(got) {
			t.Fatalf("box %v:%v: %d values, want %d", start, stop, len(got), k)
		}
	}
}
