package sampler

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/readers/zarr"
)

// OpenDeadline bounds the opening of a store (its metadata, and a remote store's coordinates)
// and each read of a whole coordinate array: a store that has not answered by then (a hung
// network mount) fails naming the store, as a chunk read past chunk_deadline_s does, instead
// of hanging the plan or the Loader's start.
var OpenDeadline = 2 * time.Minute

// OpenZarr opens the Zarr store at path (a directory, a zip archive or a URL, opened by
// readers/objstore): its hierarchy from the consolidated metadata when present. Nothing but
// metadata is read, within OpenDeadline. A store that can neither list its keys nor has
// consolidated metadata (an https:// store written without consolidation) opens its arrays one
// by one, by name.
func OpenZarr(path string) (Dataset, error) {
	return withDeadline(OpenDeadline, func() (Dataset, error) { return openZarr(path) }, func() error {
		return fmt.Errorf("open zarr store %s: no answer within %v (a hung mount or a server that never answers?)", objstore.Redact(path), OpenDeadline)
	})
}

// withDeadline returns f's result, or late's error when f has not returned within d (f goes on
// in the background; its result is dropped).
func withDeadline[T any](d time.Duration, f func() (T, error), late func() error) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
		var zero T
		return zero, late()
	}
}

func openZarr(path string) (Dataset, error) {
	store, err := objstore.OpenStore(path, objstore.Options{})
	if err != nil {
		return nil, fmt.Errorf("open zarr store %s: %w", objstore.Redact(path), err)
	}
	d := &zarrDataset{path: path, store: store}
	if d.h, err = zarr.Open(store); err != nil {
		if _, lists := store.(zarr.Lister); lists || !errors.Is(err, zarr.ErrUnsupported) {
			zarr.CloseStore(store)
			return nil, fmt.Errorf("open zarr store %s: %w", objstore.Redact(path), err)
		}
		d.h = nil
	}
	if d.h != nil && d.remote() {
		d.coords = warmCoords(d.h) // coordwarm.go
	}
	return d, nil
}

type zarrDataset struct {
	path   string
	store  zarr.Store
	h      *zarr.Hierarchy // nil: arrays are opened by name (no listing, no consolidated metadata)
	coords *coordCache     // a remote store's coordinates, read as it opened (nil: none)
}

// String names the store in messages, logs and the plan: its path, a URL's credentials
// redacted (objstore.Redact).
func (d *zarrDataset) String() string { return objstore.Redact(d.path) }

// remote reports whether the store is in object storage (chunk reads are I/O-bound).
func (d *zarrDataset) remote() bool { return objstore.IsRemote(d.store) }

// ArrayNames lists the arrays at the store's root (not in groups).
func (d *zarrDataset) ArrayNames() ([]string, error) {
	if d.h == nil {
		return nil, errors.New("the store has neither consolidated metadata nor a listing")
	}
	var out []string
	for _, p := range d.h.Arrays() {
		if !strings.Contains(p, "/") {
			out = append(out, p)
		}
	}
	return out, nil
}

func (d *zarrDataset) Array(name string) (Array, error) {
	var a *zarr.Array
	var err error
	if d.h != nil {
		a, err = d.h.OpenArray(name)
	} else {
		a, err = zarr.OpenArray(d.store, name)
	}
	if err != nil {
		if errors.Is(err, zarr.ErrNotFound) && d.h != nil {
			return nil, fmt.Errorf("%w; the arrays in %s are: %s", err, d.path, strings.Join(d.h.Arrays(), ", "))
		}
		return nil, err
	}
	if d.coords.holds(a.Path) {
		a.SetCache(d.coords)
	}
	cf := a.CF()
	z := &zarrArray{a: a, cf: cf.Params(), coords: d.coords, store: d.String()}
	if masks := z.cf.Masks; len(masks) > 1 {
		return nil, fmt.Errorf("%s/%s: %d distinct _FillValue/missing_value values %v; the sampler supports one", d.path, name, len(masks), masks)
	}
	if cf.Unsigned {
		return nil, fmt.Errorf("%s/%s: _Unsigned integer data is not supported", d.path, name)
	}
	return z, nil
}

type zarrArray struct {
	a      *zarr.Array
	cf     zarr.CFParams
	coords *coordCache // the store's coordinates read ahead (nil: none)
	store  string      // the store, as messages name it
}

// whole reads the whole array with read, within OpenDeadline: a local store's files can hang
// (a network mount) as a remote store's objects can, and these reads are part of opening.
func whole[T any](z *zarrArray, read func() (T, error)) (T, error) {
	return withDeadline(OpenDeadline, read, func() error {
		return fmt.Errorf("read %s/%s: no answer within %v (a hung mount or a server that never answers?)", z.store, z.a.Path, OpenDeadline)
	})
}

func (z *zarrArray) Shape() []int   { return z.a.Shape }
func (z *zarrArray) Chunks() []int  { return z.a.Chunks }
func (z *zarrArray) Dims() []string { return z.a.DimNames }

func (z *zarrArray) TypeName() string { return z.a.DType.Name() }

func (z *zarrArray) Native() (byte, int) {
	switch z.a.DType.Kind {
	case zarr.KindInt:
		return 'i', z.a.DType.Size
	case zarr.KindUint:
		return 'u', z.a.DType.Size
	case zarr.KindFloat:
		return 'f', z.a.DType.Size
	}
	return '?', z.a.DType.Size
}

// CF reduces the reader's CF parameters to one fill value (Array refuses several).
func (z *zarrArray) CF() (scale, offset, fill float64, hasFill bool) {
	if len(z.cf.Masks) > 0 {
		return z.cf.Scale, z.cf.Offset, z.cf.Masks[0], true
	}
	return z.cf.Scale, z.cf.Offset, math.NaN(), false
}

func (z *zarrArray) DecodeChunk(idx []int, dst []byte) error {
	out, err := z.a.DecodeChunk(idx, dst)
	if err != nil {
		return err
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		return fmt.Errorf("chunk %v: decoded into a new buffer of %d bytes (expected %d)", idx, len(out), len(dst))
	}
	return nil
}

// DecodeChunkFound is DecodeChunk that reports whether the chunk is stored (presenceArray).
func (z *zarrArray) DecodeChunkFound(idx []int, dst []byte) (bool, error) {
	out, found, err := z.a.DecodeChunkFound(idx, dst)
	if err != nil {
		return found, err
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		return found, fmt.Errorf("chunk %v: decoded into a new buffer of %d bytes (expected %d)", idx, len(out), len(dst))
	}
	return found, nil
}

// ReadAhead asks the store to start reading chunk idx (readAheadArray; fetch.go).
func (z *zarrArray) ReadAhead(idx []int) { z.a.ReadAhead(idx) }

// FetchChunk reads chunk idx's stored bytes without decoding them (fetchingArray).
func (z *zarrArray) FetchChunk(idx []int, buf []byte) ([]byte, bool, error) {
	return z.a.FetchChunk(idx, buf)
}

// DecodeFetched decodes FetchChunk's bytes into dst (fetchingArray).
func (z *zarrArray) DecodeFetched(idx []int, raw []byte, found bool, dst []byte) error {
	return z.a.DecodeFetched(idx, raw, found, dst)
}

// rawChunkBytes bounds a chunk's stored size for the read buffers (fetchingArray): what its
// codecs can encode (a remote store refuses more), else its decoded size and a margin.
func (z *zarrArray) rawChunkBytes() int {
	if n := z.a.MaxStoredBytes(); n >= 0 {
		return int(n)
	}
	n := z.a.ChunkBytes()
	return n + n/16 + 4096
}

// MissingChunkError names the store, the array and the key of chunk idx, which is not stored.
func (z *zarrArray) MissingChunkError(idx []int) error { return z.a.ChunkError(idx, nil) }

// ChunkError wraps err with the store, the array and the key of chunk idx.
func (z *zarrArray) ChunkError(idx []int, err error) error { return z.a.ChunkError(idx, err) }

// storedChunks counts the chunk objects on the store's listing (no chunk is read) and those
// the array has when complete (storeLister).
func (z *zarrArray) storedChunks() (stored, total int, err error) {
	stored, _, err = z.a.StoredChunks()
	return stored, z.a.NumObjects(), err
}

func (z *zarrArray) all() (start, stop []int) {
	return make([]int, len(z.a.Shape)), z.a.Shape
}

func (z *zarrArray) Int64s() ([]int64, error) { return whole(z, z.readInt64s) }

func (z *zarrArray) Float64s() ([]float64, error) { return whole(z, z.readFloat64s) }

func (z *zarrArray) Strings() ([]string, error) { return whole(z, z.readStrings) }

func (z *zarrArray) Times() ([]int64, error) { return whole(z, z.readTimes) }

func (z *zarrArray) Durations() ([]int64, error) { return whole(z, z.readDurations) }

func (z *zarrArray) readInt64s() ([]int64, error) {
	out := make([]int64, z.a.Len())
	start, stop := z.all()
	if len(out) == 0 {
		return out, nil
	}
	err := z.a.ReadBox(start, stop, bytesOfInt64(out), &zarr.ReadOptions{Out: zarr.Int64})
	return out, err
}

func (z *zarrArray) readFloat64s() ([]float64, error) {
	out := make([]float64, z.a.Len())
	start, stop := z.all()
	if len(out) == 0 {
		return out, nil
	}
	err := z.a.ReadBox(start, stop, bytesOfFloat64(out), &zarr.ReadOptions{Out: zarr.Float64})
	return out, err
}

func (z *zarrArray) readStrings() ([]string, error) {
	if v, ok := z.coords.strings(z.a.Path); ok {
		return slices.Clone(v), nil
	}
	return z.a.ReadStrings()
}

func (z *zarrArray) readTimes() ([]int64, error) {
	ns, err := z.a.ReadTimes()
	if err != nil {
		return nil, err
	}
	return nanosToSeconds(ns, "time")
}

func (z *zarrArray) readDurations() ([]int64, error) {
	ns, err := z.a.ReadDurations()
	if err != nil {
		return nil, err
	}
	return nanosToSeconds(ns, "duration")
}

func nanosToSeconds(ns []int64, what string) ([]int64, error) {
	out := make([]int64, len(ns))
	for i, v := range ns {
		if v == math.MinInt64 {
			return nil, fmt.Errorf("%s %d is missing (NaT); expected a complete coordinate", what, i)
		}
		if v%1e9 != 0 {
			return nil, fmt.Errorf("%s %d is not a whole second (%d ns)", what, i, v)
		}
		out[i] = v / 1e9
	}
	return out, nil
}

func (z *zarrArray) Attr(name string) string {
	raw, ok := z.a.Attrs[name]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
