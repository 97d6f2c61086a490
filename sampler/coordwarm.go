package sampler

import (
	"slices"
	"strings"
	"sync"

	"github.com/gobatch/gobatch/readers/zarr"
)

// Coordinates from object storage. Opening a source reads its coordinate arrays (time, x, y,
// channel, ...) one after another as it needs them, each at least one request: over a store
// tens of milliseconds away that is most of the time before the first batch. So OpenZarr reads
// a remote store's one-dimensional arrays (the coordinates) all at once as it opens the store,
// into a cache of their decoded chunks that those arrays' reads then take from: one request's
// latency for all of them instead of one per chunk. Only arrays of fixed-size elements are
// read, smallest first, within coordBudget bytes decoded per store (string arrays are read whole
// and their values kept); the others are read as before. A failed read here is not an error: the source's own read of the array fails with
// its context.

// coordBudget is the most decoded bytes of one-dimensional arrays read ahead per store (a
// year of 5-minute int64 times is 0.8 MB).
const coordBudget = 16 << 20

// coordParallel is the most chunks of one array read at once.
const coordParallel = 16

// coordCache is a zarr.ChunkCache of the chunks read ahead; it keeps them for the store's life
// (at most coordBudget bytes).
type coordCache struct {
	mu     sync.Mutex
	chunks map[zarr.ChunkKey][]byte
	arrays map[string]bool     // the numeric arrays read ahead, by path
	strs   map[string][]string // the string arrays' values, by path
}

func (c *coordCache) Get(k zarr.ChunkKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.chunks[k]
	return b, ok
}

func (c *coordCache) Put(k zarr.ChunkKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chunks[k] = b
}

// holds reports whether the array at path was read ahead (its reads use the cache).
func (c *coordCache) holds(path string) bool { return c != nil && c.arrays[path] }

// warmCoords reads the one-dimensional arrays at the root of h, all at once, into a new cache.
func warmCoords(h *zarr.Hierarchy) *coordCache {
	c := &coordCache{chunks: map[zarr.ChunkKey][]byte{}, arrays: map[string]bool{}, strs: map[string][]string{}}
	var arrs []*zarr.Array
	for _, p := range h.Arrays() {
		if strings.Contains(p, "/") {
			continue
		}
		a, err := h.OpenArray(p)
		if err != nil || a.NDim() != 1 || a.Chunks[0] < 1 {
			continue
		}
		arrs = append(arrs, a)
	}
	slices.SortFunc(arrs, func(a, b *zarr.Array) int { return decodedBytes(a) - decodedBytes(b) })
	var wg sync.WaitGroup
	total := 0
	for _, a := range arrs {
		if total += decodedBytes(a); total > coordBudget {
			break
		}
		if isStrings(a) {
			wg.Go(func() {
				if v, err := a.ReadStrings(); err == nil {
					c.mu.Lock()
					c.strs[a.Path] = v
					c.mu.Unlock()
				}
			})
			continue
		}
		c.arrays[a.Path] = true
		wg.Go(func() {
			start, stop := make([]int, 1), a.Shape
			dst := make([]byte, decodedBytes(a))
			a.ReadBoxRaw(start, stop, dst, &zarr.ReadOptions{Parallel: coordParallel, Cache: c})
		})
	}
	wg.Wait()
	return c
}

// isStrings reports whether a is an array of strings (read whole by ReadStrings, which takes no
// cache: its values are kept instead).
func isStrings(a *zarr.Array) bool {
	switch a.DType.Kind {
	case zarr.KindString, zarr.KindVarBytes, zarr.KindUTF32, zarr.KindBytes:
		return true
	}
	return false
}

// decodedBytes is the size of a's chunks decoded (whole chunks: the last one is full size);
// for variable-length strings, stringBytes each.
func decodedBytes(a *zarr.Array) int {
	n := (a.Shape[0] + a.Chunks[0] - 1) / a.Chunks[0]
	size := a.DType.Size
	if size <= 0 {
		size = stringBytes
	}
	return n * a.Chunks[0] * size
}

// stringBytes is what a variable-length string counts for against coordBudget.
const stringBytes = 32

// strings returns the values of the string array at path read ahead, if it was.
func (c *coordCache) strings(path string) ([]string, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.strs[path]
	return v, ok
}
