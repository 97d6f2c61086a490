package npy

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobatch/gobatch/readers/zarr"
)

// TestReadDescr checks the numpy type and bytes `read` gives the types that go through
// ReadBoxRaw (the box walks themselves are tested in readers/zarr): complex64 as
// stored, big-endian unicode as little-endian '<U3', also with --cf.
func TestReadDescr(t *testing.T) {
	be := func(s string) []byte { // one >U3 element
		out := make([]byte, 12)
		for i, r := range []rune(s) {
			binary.BigEndian.PutUint32(out[4*i:], uint32(r))
		}
		return out
	}
	le := func(s string) []byte { // the same as <U3
		out := make([]byte, 12)
		for i, r := range []rune(s) {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(r))
		}
		return out
	}
	c8 := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, c := range []struct {
		dtype string
		chunk []byte
		cf    bool
		descr string
		want  []byte
	}{
		{"<c8", c8, false, "<c8", c8[8:]},
		{">U3", append(be("ab"), be("ünï")...), false, "<U3", le("ünï")},
		{">U3", append(be("ab"), be("ünï")...), true, "<U3", le("ünï")},
	} {
		dir := filepath.Join(t.TempDir(), "a.zarr")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := `{"zarr_format":2,"shape":[2],"chunks":[2],"dtype":"` + c.dtype + `","compressor":null,"filters":null,"fill_value":null,"order":"C"}`
		if err := os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0"), c.chunk, 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := zarr.OpenArrayPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := (&Box{A: a, Start: []int{1}, Stop: []int{2}, CF: c.cf}).Read()
		if err != nil {
			t.Fatal(err)
		}
		if res.Descr != c.descr || !bytes.Equal(res.Data, c.want) || len(res.Shape) != 1 || res.Shape[0] != 1 {
			t.Errorf("%s cf=%v: descr %q shape %v data %x, want %q [1] %x", c.dtype, c.cf, res.Descr, res.Shape, res.Data, c.descr, c.want)
		}
	}
}
