package zarr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every stored object of the zarr-python fixtures (chunks and shards, every codec, random and
// constant data) fits the bound its metadata gives (pipeline.maxEncoded), and an inner chunk
// fits its inner codecs' bound: the bound a remote store enforces refuses no legitimate value.
func TestStoredObjectsWithinTheirBound(t *testing.T) {
	checked := 0
	for _, store := range []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr"} {
		dir := filepath.Join("testdata", store)
		h, err := OpenPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range h.Arrays() {
			a, err := h.OpenArray(p)
			if err != nil {
				continue // an array the reader refuses
			}
			most := a.pipe.maxEncoded()
			if most < 0 {
				if !a.DType.variable() {
					t.Fatalf("%s/%s: no bound for a fixed-size dtype", store, p)
				}
				continue
			}
			if a.shard != nil && a.MaxStoredBytes() != a.shard.inPipe.maxEncoded() {
				t.Fatalf("%s/%s: MaxStoredBytes %d is not the inner chunk's bound", store, p, a.MaxStoredBytes())
			}
			for _, key := range chunkFiles(t, filepath.Join(dir, p), a.ZarrFormat) {
				st, err := os.Stat(key)
				if err != nil {
					t.Fatal(err)
				}
				if st.Size() > most {
					t.Fatalf("%s: %d bytes stored, over the bound %d of its codecs %v", key, st.Size(), most, a.Codecs)
				}
				checked++
			}
			if a.shard != nil {
				// Every inner chunk the shards index is within the inner bound (innerRange
				// refuses the others): reading the whole array succeeds.
				out := make([]byte, a.Len()*a.DType.Size)
				if err := a.ReadBox(make([]int, len(a.Shape)), a.Shape, out, nil); err != nil {
					t.Fatalf("%s/%s: %v", store, p, err)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d stored objects checked", checked)
	}
}

// chunkFiles lists the chunk (or shard) files of the array in dir.
func chunkFiles(t *testing.T, dir string, format int) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, ".z") || name == "zarr.json" {
			return nil
		}
		if rel, _ := filepath.Rel(dir, p); format == 3 && !strings.HasPrefix(rel, "c/") && !strings.HasPrefix(rel, "c.") && rel != "c" {
			return nil // a nested array's files, or something else
		}
		out = append(out, p)
		return nil
	})
	return out
}

// An index entry longer than the inner codecs can encode is corrupt, refused before the read.
func TestInnerChunkOverItsBound(t *testing.T) {
	h, err := OpenPath(filepath.Join("testdata", "v3.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.OpenArray("sharded_end")
	if err != nil {
		t.Fatal(err)
	}
	s := a.shard
	idx := make([]uint64, 2*s.n)
	most := uint64(s.inPipe.maxEncoded())
	idx[0], idx[1] = 0, most
	if _, _, ok, err := s.innerRange(idx, 0, -1); !ok || err != nil {
		t.Fatalf("an entry of exactly the bound: ok %v, %v", ok, err)
	}
	idx[1] = most + 1
	_, _, _, err = s.innerRange(idx, 0, -1)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "encode at most") {
		t.Fatalf("an entry over the bound: %v; want a corrupt-data error naming the bound", err)
	}
}
