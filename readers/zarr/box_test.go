package zarr

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
			if !nextIndex(local, make([]int, nd), chunks) {
				break
			}
		}
		key := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(idx)), "."), "[]")
		if err := os.WriteFile(filepath.Join(dir, key), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if !nextIndex(idx, make([]int, nd), grid) {
			break
		}
	}
	return dir
}

func jsonInts(v []int) string {
	return "[" + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(v)), ","), "[]") + "]"
}

// boxIndices calls fn with the C-order flat index (in an array of the given shape) of
// every element of the box [start, stop), in box order.
func boxIndices(shape, start, stop []int, fn func(i int)) {
	nd := len(shape)
	for d := range nd {
		if stop[d] <= start[d] {
			return
		}
	}
	pos := append([]int(nil), start...)
	for {
		flat := 0
		for d := range nd {
			flat = flat*shape[d] + pos[d]
		}
		fn(flat)
		if !nextIndex(pos, start, stop) {
			return
		}
	}
}

// TestReadRawBoxes reads random boxes of a complex64 array, which ReadBox does not
// convert, through ReadBoxRaw and checks every element.
func TestReadRawBoxes(t *testing.T) {
	shape, chunks := []int{7, 9, 11}, []int{3, 4, 5}
	elem := func(flat int) []byte {
		return binary.LittleEndian.AppendUint64(nil, uint64(flat)*0x9E3779B97F4A7C15)
	}
	dir := writeRawV2(t, "<c8", shape, chunks, 8, elem)
	a, err := OpenArrayPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.DType.Kind != KindComplex || a.DType.Size != 8 {
		t.Fatalf("dtype %s", a.DType)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		start, stop := make([]int, 3), make([]int, 3)
		n := 1
		for d := range 3 {
			start[d] = rng.IntN(shape[d])
			stop[d] = start[d] + 1 + rng.IntN(shape[d]-start[d])
			n *= stop[d] - start[d]
		}
		data := make([]byte, n*8)
		if err := a.ReadBoxRaw(start, stop, data, &ReadOptions{Parallel: trial % 3}); err != nil {
			t.Fatal(err)
		}
		k := 0
		boxIndices(shape, start, stop, func(flat int) {
			if got, want := data[8*k:8*k+8], elem(flat); !bytes.Equal(got, want) {
				t.Fatalf("trial %d box %v:%v element %d (flat %d): %x, want %x", trial, start, stop, k, flat, got, want)
			}
			k++
		})
		if k*8 != len(data) {
			t.Fatalf("box %v:%v: %d bytes for %d elements", start, stop, len(data), k)
		}
	}
	if err := a.ReadBoxRaw([]int{0, 0, 0}, []int{1, 1, 1}, make([]byte, 8), &ReadOptions{CF: true}); err == nil {
		t.Error("ReadBoxRaw took CF")
	}
}

// TestReadFixedStrings reads a box of a big-endian unicode array raw (host-order
// UTF-32, 12 bytes an element) and as strings.
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
	a, err := OpenArrayPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	start, stop := []int{1}, []int{7}
	if a.DType.Kind != KindUTF32 || a.DType.Size != 12 {
		t.Fatalf("dtype %s", a.DType)
	}
	data := make([]byte, 6*12)
	if err := a.ReadBoxRaw(start, stop, data, nil); err != nil {
		t.Fatal(err)
	}
	strs, err := a.ReadBoxStrings(start, stop)
	if err != nil {
		t.Fatal(err)
	}
	if len(strs) != 6 {
		t.Fatalf("%d strings", len(strs))
	}
	for i := range 6 {
		var got []rune
		for j := range 3 {
			if r := rune(binary.LittleEndian.Uint32(data[12*i+4*j:])); r != 0 {
				got = append(got, r)
			}
		}
		if want := words[(i+1)%len(words)]; string(got) != want || strs[i] != want {
			t.Errorf("element %d: %q (string %q), want %q", i, string(got), strs[i], want)
		}
	}
}

func TestSplitPath(t *testing.T) {
	dir := writeRawV2(t, "<i2", []int{4}, []int{4}, 2, func(int) []byte { return []byte{1, 0} })
	root, node, err := SplitPath(filepath.Join(dir, "grp", "arr"))
	if err != nil || root != dir || node != "grp/arr" {
		t.Fatalf("SplitPath = %q %q %v", root, node, err)
	}
	if _, _, err := SplitPath(filepath.Dir(dir)); err == nil || !strings.Contains(err.Error(), "not a Zarr store") {
		t.Fatalf("a plain directory: %v", err)
	}
	if _, err := OpenArrayPath(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("a missing array opened")
	}
}
