package zarr

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyStore copies testdata/<name> into a temporary directory.
func copyStore(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func readAll(a *Array) error {
	if a.DType.Elem() == ElemNone {
		_, err := a.ReadStrings()
		return err
	}
	dst := make([]byte, a.Len()*a.DType.Elem().Size())
	return a.ReadBox(a.fullBox(), a.Shape, dst, nil)
}

func mustOpen(t *testing.T, dir, path string) *Array {
	t.Helper()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenArray(s, path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantErr checks that err is an *Error naming the store, array, key and codec, and
// wrapping target.
func wantErr(t *testing.T, err error, target error, key, codec string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one (%v)", target)
	}
	var ze *Error
	if !errors.As(err, &ze) {
		t.Fatalf("error %T %v is not a *zarr.Error", err, err)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("error %v does not wrap %v", err, target)
	}
	if ze.Store == "" || ze.Path == "" {
		t.Fatalf("error %v does not name the store and the array", err)
	}
	if key != "" && ze.Key != key {
		t.Fatalf("error %v: key %q, want %q", err, ze.Key, key)
	}
	if codec != "" && ze.Codec != codec {
		t.Fatalf("error %v: codec %q, want %q", err, ze.Codec, codec)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not mention %q", err, w)
		}
	}
}

func TestCorruptChunks(t *testing.T) {
	dir := copyStore(t, "v2.zarr")
	dir3 := copyStore(t, "v3.zarr")
	cases := []struct {
		dir, path, key, codec string
		mutate                func([]byte) []byte
	}{
		{dir, "i2_blosc_lz4", "i2_blosc_lz4/1.2", "blosc", func(b []byte) []byte { return b[:len(b)/2] }},
		{dir, "i2_blosc_lz4", "i2_blosc_lz4/1.2", "blosc", func(b []byte) []byte { b[5] ^= 0x40; return b }},
		{dir, "f4_zstd_nested", "f4_zstd_nested/0/0/0", "zstd", func(b []byte) []byte { return b[:len(b)-3] }},
		{dir, "f8_zlib_F", "f8_zlib_F/0.0", "zlib", func(b []byte) []byte { return b[:len(b)-2] }},
		{dir, "u1_gzip", "u1_gzip/0", "gzip", func(b []byte) []byte { return b[:len(b)-5] }},
		{dir, "i8_bz2", "i8_bz2/0", "bz2", func(b []byte) []byte { return b[:len(b)/2] }},
		{dir, "u4_lz4", "u4_lz4/0.0", "lz4", func(b []byte) []byte { return b[:len(b)-1] }},
		{dir, "u4_lz4", "u4_lz4/0.0", "lz4", func(b []byte) []byte { b[0]++; return b }},
		{dir, "be_i4_raw", "be_i4_raw/0", "bytes", func(b []byte) []byte { return b[:len(b)-1] }},
		{dir, "blosc2_zstd_f4", "blosc2_zstd_f4/0.0", "blosc2", func(b []byte) []byte { return b[:20] }},
		{dir, "str_vlen", "str_vlen/0", "", func(b []byte) []byte { return b[:len(b)-1] }},
		{dir3, "f8_gzip_crc", "f8_gzip_crc/c/0", "crc32c", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{dir, "crc32c_compressor", "crc32c_compressor/1", "crc32c", func(b []byte) []byte { b[2] ^= 0x10; return b }},
		{dir, "crc32_filter", "crc32_filter/0", "zstd", func(b []byte) []byte { return b[:len(b)-1] }},
		{dir3, "numcodecs_adler32", "numcodecs_adler32/c/1", "adler32", func(b []byte) []byte { b[len(b)-6] ^= 4; return b }},
		{dir3, "i2_blosc", "i2_blosc/c/0/0", "blosc", func(b []byte) []byte { return b[:10] }},
		{dir3, "sharded_end", "sharded_end/c/0/0", "sharding_indexed", func(b []byte) []byte { return b[:10] }},
		{dir3, "sharded_end", "sharded_end/c/0/0", "crc32c", func(b []byte) []byte { b[len(b)-8] ^= 1; return b }},
		{dir3, "sharded_start", "sharded_start/c/0/0", "crc32c", func(b []byte) []byte { b[3] ^= 1; return b }},
		{dir3, "sharded_nested", "sharded_nested/c/0/0", "", func(b []byte) []byte { return b[:len(b)-30] }},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			p := filepath.Join(c.dir, filepath.FromSlash(c.key))
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(p, orig, 0o644)
			if err := os.WriteFile(p, c.mutate(append([]byte(nil), orig...)), 0o644); err != nil {
				t.Fatal(err)
			}
			a := mustOpen(t, c.dir, c.path)
			wantErr(t, readAll(a), ErrCorrupt, c.key, c.codec, c.path, c.key)
		})
	}
}

// A shard index pointing outside the shard (with a valid checksum) is an error.
func TestShardIndexOutOfRange(t *testing.T) {
	a := memCopy(t, "v3.zarr", "sharded_end")
	m := a.Store.(*MemStore)
	b := append([]byte(nil), m.Data["sharded_end/c/0/0"]...)
	n := 2 * 2 // inner chunks per shard: (8,6)/(4,3)
	idx := b[len(b)-16*n-4:]
	binary.LittleEndian.PutUint64(idx[16:], uint64(len(b))+100) // offset of inner chunk 1
	binary.LittleEndian.PutUint64(idx[24:], 10)
	binary.LittleEndian.PutUint32(idx[16*n:], crc32.Checksum(idx[:16*n], crc32.MakeTable(crc32.Castagnoli)))
	m.Data["sharded_end/c/0/0"] = b
	a, err := OpenArray(m, "sharded_end")
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, readAll(a), ErrCorrupt, "sharded_end/c/0/0", "sharding_indexed")
}

func writeFile(t *testing.T, p string, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBadMetadata(t *testing.T) {
	base := `"zarr_format": 2, "shape": [4], "chunks": [2], "order": "C", "fill_value": 0`
	cases := []struct {
		name, zarray string
		words        []string
	}{
		{"filter", `{` + base + `, "dtype": "<i4", "compressor": null, "filters": [{"id": "categorize", "labels": ["a"]}]}`, []string{"unsupported filter categorize", "arr"}},
		{"compressor", `{` + base + `, "dtype": "<i4", "compressor": {"id": "lzma"}, "filters": null}`, []string{"unsupported filter lzma"}},
		{"dtype", `{` + base + `, "dtype": "<q9", "compressor": null, "filters": null}`, []string{"unsupported dtype", "<q9"}},
		{"structured", `{` + base + `, "dtype": [["a", "<i4"]], "compressor": null, "filters": null}`, []string{"structured"}},
		{"json", `{"zarr_format": 2, "shape": [4`, []string{"malformed .zarray"}},
		{"chunks", `{"zarr_format": 2, "shape": [4, 4], "chunks": [2], "dtype": "<i4", "fill_value": 0, "order": "C", "compressor": null}`, []string{"dimensions"}},
		{"zero chunk", `{"zarr_format": 2, "shape": [4], "chunks": [0], "dtype": "<i4", "fill_value": 0, "order": "C", "compressor": null}`, []string{"chunk shape"}},
		{"fill", `{` + strings.Replace(base, `"fill_value": 0`, `"fill_value": "lots"`, 1) + `, "dtype": "<i4", "compressor": null}`, []string{"fill_value"}},
		{"fill range", `{` + strings.Replace(base, `"fill_value": 0`, `"fill_value": 300`, 1) + `, "dtype": "|u1", "compressor": null}`, []string{"fill_value"}},
		{"order", `{` + strings.Replace(base, `"order": "C"`, `"order": "X"`, 1) + `, "dtype": "<i4", "compressor": null}`, []string{"order"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "arr", ".zarray"), c.zarray)
			s, _ := NewDirStore(dir)
			_, err := OpenArray(s, "arr")
			wantErr(t, err, nil, "", "", c.words...)
		})
	}
	v3 := func(codecs, dtype string) string {
		return `{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": ` + dtype +
			`, "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},` +
			`"chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": ` + codecs + `}`
	}
	cases3 := []struct {
		name, doc string
		words     []string
	}{
		{"codec", v3(`[{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "snappy9"}]`, `"int32"`), []string{"unsupported codec snappy9"}},
		{"serializer", v3(`[{"name": "zstd"}]`, `"int32"`), []string{"array->bytes"}},
		{"dtype", v3(`[{"name": "bytes", "configuration": {"endian": "little"}}]`, `"int128"`), []string{"unsupported data_type", "int128"}},
		{"extension", strings.Replace(v3(`[{"name": "bytes", "configuration": {"endian": "little"}}]`, `"int32"`), `"fill_value"`, `"fancy": {"name": "x"}, "fill_value"`, 1), []string{"fancy"}},
		{"sharding", v3(`[{"name": "sharding_indexed", "configuration": {"chunk_shape": [3], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}]`, `"int32"`), []string{"divide"}},
		{"index codecs", v3(`[{"name": "sharding_indexed", "configuration": {"chunk_shape": [1], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}]}}]`, `"int32"`), []string{"fixed size"}},
		{"transpose", v3(`[{"name": "transpose", "configuration": {"order": [1]}}, {"name": "bytes", "configuration": {"endian": "little"}}]`, `"int32"`), []string{"permutation"}},
		{"endian", v3(`[{"name": "bytes"}]`, `"int32"`), []string{"endian"}},
	}
	for _, c := range cases3 {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "arr", "zarr.json"), c.doc)
			s, _ := NewDirStore(dir)
			_, err := OpenArray(s, "arr")
			wantErr(t, err, nil, "", "", c.words...)
		})
	}
	// An unknown extension field that need not be understood is ignored.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "arr", "zarr.json"), strings.Replace(v3(`[{"name": "bytes", "configuration": {"endian": "little"}}]`, `"int32"`), `"fill_value"`, `"fancy": {"name": "x", "must_understand": false}, "fill_value"`, 1))
	s, _ := NewDirStore(dir)
	if _, err := OpenArray(s, "arr"); err != nil {
		t.Fatal(err)
	}
}

func TestNotFound(t *testing.T) {
	s, err := NewDirStore("testdata/v2.zarr")
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenArray(s, "nope")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	h, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.OpenArray("sub"); err == nil || !strings.Contains(err.Error(), "group") {
		t.Fatalf("opening a group as an array: %v", err)
	}
	if _, err := s.Get("../v3.zarr/zarr.json"); err == nil {
		t.Fatal("a key leaving the store root was accepted")
	}
	if _, err := NewDirStore("testdata/nope.zarr"); err == nil {
		t.Fatal("NewDirStore of a missing directory succeeded")
	}
}

func TestBoxErrors(t *testing.T) {
	a := openFixture(t, "v2.zarr", "i2_blosc_lz4")
	dst := make([]byte, 20*30*4)
	for _, c := range []struct{ start, stop []int }{
		{[]int{0}, []int{1}},
		{[]int{-1, 0}, []int{2, 2}},
		{[]int{0, 0}, []int{21, 2}},
		{[]int{3, 0}, []int{2, 2}},
	} {
		if err := a.ReadBox(c.start, c.stop, dst, nil); err == nil {
			t.Fatalf("box %v:%v accepted", c.start, c.stop)
		}
	}
	if err := a.ReadBox([]int{0, 0}, []int{20, 30}, dst[:100], nil); err == nil {
		t.Fatal("short destination accepted")
	}
	if err := a.ReadBox([]int{0, 0}, []int{2, 2}, dst[1:], &ReadOptions{Out: Float32}); err == nil {
		t.Fatal("misaligned destination accepted")
	}
	if err := a.ReadBox([]int{0, 0}, []int{2, 2}, dst, &ReadOptions{CF: true, Out: Int16}); err == nil {
		t.Fatal("CF into int16 accepted")
	}
	if _, err := a.DecodeChunk([]int{3, 0}, nil); err == nil {
		t.Fatal("chunk index outside the grid accepted")
	}
	s := openFixture(t, "v2.zarr", "str_vlen")
	if err := s.ReadBox([]int{0}, []int{1}, dst, nil); err == nil {
		t.Fatal("ReadBox on strings accepted")
	}
}

// One malformed zarr.json in a v3 hierarchy without consolidated metadata: Open
// succeeds, the broken node carries the error (naming its key), the rest opens.
func TestV3BrokenNodeKeepsTheRest(t *testing.T) {
	s := NewMemStore("mem")
	s.Data["zarr.json"] = []byte(`{"zarr_format": 3, "node_type": "group"}`)
	good := `{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
		"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
		"chunk_key_encoding": {"name": "default"}, "fill_value": 7,
		"codecs": [{"name": "bytes"}]}`
	s.Data["good/zarr.json"] = []byte(good)
	s.Data["bad/zarr.json"] = []byte(`{"shape": [`)
	s.Data["bad/sub/zarr.json"] = []byte(good)
	h, err := Open(s)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	a, err := h.OpenArray("good")
	if err != nil {
		t.Fatalf("good: %v", err)
	}
	dst := make([]byte, 4)
	if err := a.ReadBox([]int{0}, []int{4}, dst, nil); err != nil || dst[0] != 7 {
		t.Fatalf("good: %v %v", dst, err)
	}
	if _, err := h.OpenArray("bad/sub"); err != nil {
		t.Fatalf("bad/sub: %v", err)
	}
	n := h.Node("bad")
	if n == nil || n.Err == nil {
		t.Fatalf("bad: node %+v, want an error", n)
	}
	_, err = h.OpenArray("bad")
	if err == nil || !strings.Contains(err.Error(), "bad/zarr.json") {
		t.Fatalf("OpenArray(bad) = %v, want an error naming bad/zarr.json", err)
	}
}
