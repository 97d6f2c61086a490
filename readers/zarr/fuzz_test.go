package zarr

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Fuzz targets: garbage must give an error or a correctly sized result, never a
// panic or an out-of-bounds access. `go test` runs the seed corpora; run one with
// e.g. `go test -run '^$' -fuzz FuzzChunk -fuzztime 60s ./readers/zarr`.

// oneKeyStore serves a single key (a chunk or shard) and nothing else.
type oneKeyStore struct {
	key string
	val []byte
}

func (s *oneKeyStore) String() string { return "fuzz" }
func (s *oneKeyStore) Get(key string) ([]byte, error) {
	if key != s.key {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return s.val, nil
}
func (s *oneKeyStore) GetRange(key string, off, n int64) ([]byte, error) {
	if key != s.key {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	start, length, err := resolveRange(int64(len(s.val)), off, n)
	if err != nil {
		return nil, err
	}
	return s.val[start : start+length], nil
}

type fuzzArray struct {
	path string
	meta *arrayMeta
	key  string // key of the stored object holding chunk 0
	seed []byte
}

var (
	fuzzOnce   sync.Once
	fuzzArrays []fuzzArray
)

// fixtureArrays lists every fixture array with the bytes of its first stored object.
func fixtureArrays(t testing.TB) []fuzzArray {
	fuzzOnce.Do(func() {
		for _, store := range []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr"} {
			h, err := OpenDir(filepath.Join("testdata", store))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range h.Arrays() {
				n := h.Node(p)
				a, err := h.OpenArray(p)
				if err != nil {
					t.Fatal(err)
				}
				key := a.ChunkKeyOf(make([]int, a.NDim()))
				seed, _ := os.ReadFile(filepath.Join("testdata", store, filepath.FromSlash(key)))
				fuzzArrays = append(fuzzArrays, fuzzArray{path: p, meta: n.meta, key: key, seed: seed})
			}
		}
	})
	return fuzzArrays
}

func FuzzChunk(f *testing.F) {
	arrays := fixtureArrays(f)
	for i, fa := range arrays {
		f.Add(uint16(i), fa.seed)
	}
	MaxVariableChunkBytes = 4 << 20
	f.Fuzz(func(t *testing.T, sel uint16, data []byte) {
		fa := arrays[int(sel)%len(arrays)]
		s := &oneKeyStore{key: fa.key, val: data}
		a, err := newArray(s, fa.path, fa.meta)
		if err != nil {
			t.Fatal(err)
		}
		if a.Len() == 0 {
			return
		}
		if a.DType.Elem() == ElemNone {
			if a.DType.variable() || a.DType.Kind == KindUTF32 || a.DType.Kind == KindBytes {
				if out, err := a.ReadStrings(); err == nil && len(out) != a.Len() {
					t.Fatalf("%d strings for %d elements", len(out), a.Len())
				}
			}
			return
		}
		c, err := a.DecodeChunk(make([]int, a.NDim()), nil)
		if err == nil && len(c) != a.ChunkBytes() {
			t.Fatalf("chunk of %d bytes, want %d", len(c), a.ChunkBytes())
		}
		stop := make([]int, a.NDim())
		for d := range stop {
			stop[d] = min(a.Shape[d], a.Chunks[d]+1)
		}
		dst := make([]float32, prod(stop))
		_ = a.ReadBoxFloat32(a.fullBox(), stop, dst, &ReadOptions{CF: true, Parallel: 2})
	})
}

func FuzzV2Metadata(f *testing.F) {
	for _, fa := range seedFiles(f, ".zarray") {
		f.Add(fa, []byte(`{"_ARRAY_DIMENSIONS": ["x"], "scale_factor": 0.5, "_FillValue": NaN}`))
	}
	f.Add([]byte(`{"zarr_format": 2, "shape": [], "chunks": [], "dtype": "<M8[10ms]", "fill_value": "NaT", "order": "F", "compressor": null, "filters": [{"id": "delta", "dtype": "<i8"}]}`), []byte(nil))
	f.Fuzz(func(t *testing.T, zarray, zattrs []byte) {
		m, err := parseZarray(zarray, zattrs)
		if err != nil {
			return
		}
		a, err := newArray(NewMemStore("fuzz"), "a", m)
		if err != nil {
			return
		}
		checkOpened(t, a)
	})
}

func FuzzV3Metadata(f *testing.F) {
	for _, doc := range seedFiles(f, "zarr.json") {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		z, err := parseZarrJSON(doc)
		if err != nil || z.NodeType != "array" {
			return
		}
		m, err := v3ArrayMeta(z)
		if err != nil {
			return
		}
		a, err := newArray(NewMemStore("fuzz"), "a", m)
		if err != nil {
			return
		}
		checkOpened(t, a)
	})
}

// checkOpened reads the first chunk of an array whose store is empty: it must be the
// fill value, with the right size.
func checkOpened(t *testing.T, a *Array) {
	if a.DType.Elem() == ElemNone || a.Len() == 0 || a.ChunkBytes() > 1<<20 {
		return
	}
	c, err := a.DecodeChunk(make([]int, a.NDim()), nil)
	if err != nil {
		t.Fatalf("missing chunk: %v", err)
	}
	if len(c) != a.ChunkBytes() {
		t.Fatalf("chunk of %d bytes, want %d", len(c), a.ChunkBytes())
	}
}

func FuzzConsolidated(f *testing.F) {
	for _, doc := range seedFiles(f, ".zmetadata") {
		f.Add(doc)
	}
	for _, store := range []string{"v3.zarr", "cf3.zarr"} {
		doc, err := os.ReadFile(filepath.Join("testdata", store, "zarr.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, key := range []string{".zmetadata", "zarr.json"} {
			s := NewMemStore("fuzz")
			s.Data[key] = doc
			h, err := Open(s)
			if err != nil {
				continue
			}
			for _, p := range h.Arrays() {
				if a, err := h.OpenArray(p); err == nil {
					checkOpened(t, a)
				}
			}
		}
	})
}

// seedFiles returns the fixture files called name.
func seedFiles(f *testing.F, name string) [][]byte {
	var out [][]byte
	for _, store := range []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr"} {
		root := filepath.Join("testdata", store)
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && info.Name() == name {
				b, err := os.ReadFile(p)
				if err == nil {
					out = append(out, b)
				}
			}
			return nil
		})
	}
	if len(out) == 0 {
		f.Fatalf("no %s seeds", name)
	}
	return out
}

var filterTypes = []string{"|u1", "|i1", "<u2", "<i2", ">i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", ">f4", "<f8"}

func FuzzFilters(f *testing.F) {
	f.Add(uint8(0), uint8(6), uint8(3), []byte{1, 0, 2, 0, 255, 255, 9, 0})
	f.Add(uint8(1), uint8(12), uint8(1), []byte{10, 20, 30, 40, 250})
	f.Add(uint8(2), uint8(5), uint8(5), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint8(3), uint8(10), uint8(11), []byte{0, 0, 128, 63, 0, 0, 0, 64})
	f.Fuzz(func(t *testing.T, kind, dt, at uint8, data []byte) {
		d, _ := parseTypestr(filterTypes[int(dt)%len(filterTypes)])
		a, _ := parseTypestr(filterTypes[int(at)%len(filterTypes)])
		var flt flatFilter
		switch kind % 4 {
		case 0:
			flt = deltaFilter{dtype: d, astype: a}
		case 1:
			flt = fsoFilter{dtype: d, astype: a, scale: 100, offset: -3}
		case 2:
			flt = shuffleFilter{size: d.Size, elem: a.Size}
		default:
			flt = castFilter{id: "quantize", dtype: d, astype: a}
		}
		n := len(data) / flt.encSize()
		dst := make([]byte, n*flt.decSize())
		_ = flt.decode(dst, data, n)
		// A short source must be refused, not read past.
		if n > 0 {
			if err := flt.decode(dst, data[:n*flt.encSize()-1], n); err == nil {
				t.Fatal("short source accepted")
			}
		}
	})
}

func FuzzShardIndex(f *testing.F) {
	var seeds []fuzzArray
	for _, fa := range fixtureArrays(f) {
		if strings.HasPrefix(fa.path, "sharded") || fa.path == "transpose_sharded" {
			seeds = append(seeds, fa)
		}
	}
	if len(seeds) < 4 {
		f.Fatalf("%d sharded fixtures", len(seeds))
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i].path < seeds[j].path })
	for i, fa := range seeds {
		f.Add(uint8(i), fa.seed)
	}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		fa := seeds[int(sel)%len(seeds)]
		a, err := newArray(&oneKeyStore{key: fa.key, val: data}, fa.path, fa.meta)
		if err != nil {
			t.Fatal(err)
		}
		// Every inner chunk of shard 0 through range reads, then the whole shard.
		grid := a.ChunkGrid()
		idx := make([]int, a.NDim())
		hi := make([]int, a.NDim())
		per := a.objectShape()
		for d := range hi {
			hi[d] = min(grid[d], per[d]/a.Chunks[d])
		}
		buf := make([]byte, a.ChunkBytes())
		for {
			if _, err := a.DecodeChunk(idx, buf); err == nil && len(buf) != a.ChunkBytes() {
				t.Fatal("bad chunk size")
			}
			if !nextIndex(idx, make([]int, a.NDim()), hi) {
				break
			}
		}
		if a.pipe.ser == serShard {
			whole := make([]byte, a.pipe.decodedSize())
			_ = a.pipe.decode(data, whole)
		}
	})
}

func FuzzLZ4Frame(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 0x50, 'h', 'e', 'l', 'l', 'o'}, 5)
	f.Add([]byte{0, 0, 0, 0}, 0)
	f.Add([]byte{255, 255, 255, 127, 0x10, 'a'}, -1)
	for _, fa := range fixtureArrays(f) {
		if strings.Contains(fa.path, "lz4") && !strings.Contains(fa.path, "blosc") {
			f.Add(fa.seed, -1)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, want int) {
		if want > 1<<20 {
			want = 1 << 20
		}
		out, err := decodeLZ4Frame(nil, data, want)
		if err == nil {
			if want >= 0 && len(out) != want {
				t.Fatalf("decoded %d bytes, want %d", len(out), want)
			}
			if int(binary.LittleEndian.Uint32(data)) != len(out) {
				t.Fatal("size disagrees with the header")
			}
		}
	})
}

func FuzzVlenUTF8(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0}, uint8(2))
	f.Add([]byte{1, 0, 0, 0, 255, 255, 255, 255}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		out := make([]string, n)
		if err := decodeVlen(data, out, true); err == nil {
			total := 4
			for _, s := range out {
				total += 4 + len(s)
			}
			if total != len(data) {
				t.Fatalf("accepted %d bytes but used %d", len(data), total)
			}
		}
	})
}

func FuzzTimeUnits(f *testing.F) {
	for _, s := range []string{"minutes since 2021-01-01 00:00:00", "hours", "nanoseconds since 1970-01-01",
		"milliseconds since 2020-01-04T06:37:59.134000", "days since 2000-1-1 12:00:00+01:00", "seconds since 1999-12-31 23:59:60 UTC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _, _ = parseTimeUnits(s)
		_, _ = attrFloats([]byte(s))
		_ = quoteNonFinite([]byte(s))
	})
}

// v3FilterDocs are v3 arrays with numcodecs array->array filters before bytes.
var v3FilterDocs = []string{
	`{"zarr_format":3,"node_type":"array","shape":[5,7],"data_type":"int16",
	 "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3,4]}},
	 "chunk_key_encoding":{"name":"default"},"fill_value":0,
	 "codecs":[{"name":"numcodecs.delta","configuration":{"dtype":"<i2"}},
	           {"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":1}}]}`,
	`{"zarr_format":3,"node_type":"array","shape":[9],"data_type":"int32",
	 "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
	 "chunk_key_encoding":{"name":"default"},"fill_value":0,
	 "codecs":[{"name":"numcodecs.delta","configuration":{"dtype":"<i4","astype":"<i1"}},
	           {"name":"bytes","configuration":{"endian":"big"}}]}`,
	`{"zarr_format":3,"node_type":"array","shape":[6],"data_type":"float32",
	 "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[6]}},
	 "chunk_key_encoding":{"name":"default"},"fill_value":"NaN",
	 "codecs":[{"name":"numcodecs.fixedscaleoffset","configuration":{"offset":10,"scale":100,"dtype":"<f4","astype":"<u2"}},
	           {"name":"numcodecs.astype","configuration":{"encode_dtype":"<u2","decode_dtype":"<u2"}},
	           {"name":"bytes","configuration":{"endian":"little"}}]}`,
}

// FuzzV3Filters decodes garbage chunks of v3 arrays with numcodecs filters: an error
// or a chunk of the right size, never a panic.
func FuzzV3Filters(f *testing.F) {
	var arrays []*arrayMeta
	for i, doc := range v3FilterDocs {
		z, err := parseZarrJSON([]byte(doc))
		if err != nil {
			f.Fatalf("doc %d: %v", i, err)
		}
		m, err := v3ArrayMeta(z)
		if err != nil {
			f.Fatalf("doc %d: %v", i, err)
		}
		arrays = append(arrays, m)
		f.Add(uint8(i), make([]byte, 24))
	}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		m := arrays[int(sel)%len(arrays)]
		s := NewMemStore("fuzz")
		a, err := newArray(s, "", m)
		if err != nil {
			t.Fatal(err)
		}
		s.Data[a.ChunkKeyOf(make([]int, a.NDim()))] = data
		c, err := a.DecodeChunk(make([]int, a.NDim()), nil)
		if err == nil && len(c) != a.ChunkBytes() {
			t.Fatalf("chunk of %d bytes, want %d", len(c), a.ChunkBytes())
		}
		dst := make([]float32, a.Len())
		_ = a.ReadBoxFloat32(a.fullBox(), a.Shape, dst, &ReadOptions{CF: true})
	})
}
