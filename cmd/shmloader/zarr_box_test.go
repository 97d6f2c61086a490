package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRawV2 writes an uncompressed v2 array (C order, "." keys) holding elem(i) for
// element i of the array, es bytes each, and returns its directory.
func writeRawV2(t *testing.T, dtype string, shape, chunks []int, es int, elem func(flat int) []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "a.zarr")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf(`{"zarr_format":2,"shape":%s,"chunks":%s,"dtype":%q,"compressor":null,"filters":null,"fill_value":null,"order":"C"}`,
		jsonInts(shape), jsonInts(chunks), dtype)
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	nd := len(shape)
	grid := make([]int, nd)
	for d := range nd {
		grid[d] = (shape[d] + chunks[d] - 1) / chunks[d]
	}
	idx := make([]int, nd)
	for {
		var buf bytes.Buffer
		local := make([]int, nd)
		for {
			flat, inside := 0, true
			for d := range nd {
				p := idx[d]*chunks[d] + local[d]
				inside = inside && p < shape[d]
				flat = flat*shape[d] + p
			}
			if inside {
				buf.Write(elem(flat))
			} else {
				buf.Write(make([]byte, es))
			}
			if !advance(local, make([]int, nd), chunks) {
				break
			}
		}
		key := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(idx)), "."), "[]")
		if err := os.WriteFile(filepath.Join(dir, key), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if !advance(idx, make([]int, nd), grid) {
			break
		}
	}
	return dir
}

func jsonInts(v []int) string {
	return "[" + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(v)), ","), "[]") + "]"
}

// TestReadRawBoxes reads random boxes of a complex64 array, which goes through
// readRaw (DecodeChunk + copyChunkPart), and checks every element.
func TestReadRawBoxes(t *testing.T) {
	shape, chunks := []int{7, 9, 11}, []int{3, 4, 5}
	elem := func(flat int) []byte {
		return binary.LittleEndian.AppendUint64(nil, uint64(flat)*0x9E3779B97F4A7C15)
	}
	dir := writeRawV2(t, "<c8", shape, chunks, 8, elem)
	a, err := openArrayPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		start, stop := make([]int, 3), make([]int, 3)
		for d := range 3 {
			start[d] = rng.IntN(shape[d])
			stop[d] = start[d] + 1 + rng.IntN(shape[d]-start[d])
		}
		req := boxRequest{a: a, start: start, stop: stop}
		res, err := req.read()
		if err != nil {
			t.Fatal(err)
		}
		if res.descr != "<c8" {
			t.Fatalf("descr %q", res.descr)
		}
		k := 0
		req.boxIndices(func(flat int) {
			if got, want := res.data[8*k:8*k+8], elem(flat); !bytes.Equal(got, want) {
				t.Fatalf("trial %d box %v:%v element %d (flat %d): %x, want %x", trial, start, stop, k, flat, got, want)
			}
			k++
		})
		if k*8 != len(res.data) {
			t.Fatalf("box %v:%v: %d bytes for %d elements", start, stop, len(res.data), k)
		}
	}
}

// TestReadFixedStrings checks '<U' output of a big-endian unicode array.
func TestReadFixedStrings(t *testing.T) {
	words := []string{"", "a", "ünï", "abc"}
	elem := func(flat int) []byte {
		out := make([]byte, 12)
		i := 0
		for _, r := range words[flat%len(words)] {
			binary.BigEndian.PutUint32(out[4*i:], uint32(r))
			i++
		}
		return out
	}
	dir := writeRawV2(t, ">U3", []int{10}, []int{4}, 12, elem)
	a, err := openArrayPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	start, stop, err := parseBox("1:7", a.Shape)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&boxRequest{a: a, start: start, stop: stop, cf: true}).read()
	if err != nil {
		t.Fatal(err)
	}
	if res.descr != "<U3" || len(res.data) != 6*12 {
		t.Fatalf("descr %q, %d bytes", res.descr, len(res.data))
	}
	for i := range 6 {
		var got []rune
		for j := range 3 {
			if r := rune(binary.LittleEndian.Uint32(res.data[12*i+4*j:])); r != 0 {
				got = append(got, r)
			}
		}
		if want := words[(i+1)%len(words)]; string(got) != want {
			t.Errorf("element %d: %q, want %q", i, string(got), want)
		}
	}
}

func TestLocateStore(t *testing.T) {
	dir := writeRawV2(t, "<i2", []int{4}, []int{4}, 2, func(int) []byte { return []byte{1, 0} })
	root, node, err := locateStore(filepath.Join(dir, "grp", "arr"))
	if err != nil || root != dir || node != "grp/arr" {
		t.Fatalf("locateStore = %q %q %v", root, node, err)
	}
	if _, _, err := locateStore(filepath.Dir(dir)); err == nil || !strings.Contains(err.Error(), "not a Zarr store") {
		t.Fatalf("a plain directory: %v", err)
	}
	if _, err := openArrayPath(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("a missing array opened")
	}
}
