package sampler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// A source whose store is a list of stores (a satellite store per year, an NWP store per
// period) reads them as one: each array along the source's time dimension (time, or an
// NWP's init_time) is the stores' arrays concatenated in list order, as ocf-data-sampler's
// open_zarrs concatenates them with xarray; every other array (x, y, channel, step) is the
// first store's. The rules are ocf-data-sampler's: the times must be strictly increasing
// across the stores (an overlap or a store out of order is refused, naming both stores), the
// arrays must agree in everything but their length along time (dimensions, dtype, CF
// decoding, chunking), and a coordinate of another dimension that differs between the stores
// is the first store's, with a warning (ocf-data-sampler's join="override" fallback).
//
// Only metadata and coordinates are read to open it. The concatenated array keeps the first
// store's chunk grid: where a store's length along time is a multiple of its chunk length,
// as a year of 5-minute steps is of 12, a chunk of the concatenation is one stored chunk and
// decodes into place; a chunk that straddles stored chunks is assembled from them.

// concatDataset is several datasets read as one along dimension dim.
type concatDataset struct {
	parts    []Dataset
	dim      string
	warnings []string

	mu     sync.Mutex
	arrays map[string]Array
}

// concatenate returns parts as one dataset along dim (the time dimension's name in the
// stores). The time coordinate named dim is checked here: strictly increasing across the
// stores.
func concatenate(parts []Dataset, dim string) (*concatDataset, error) {
	d := &concatDataset{parts: parts, dim: dim, arrays: map[string]Array{}}
	if _, err := d.Array(dim); err != nil {
		return nil, err
	}
	return d, nil
}

// String names the stores in messages: the first and how many more.
func (d *concatDataset) String() string {
	return fmt.Sprintf("%s (+%d more stores along %s)", d.parts[0], len(d.parts)-1, d.dim)
}

// Warnings are what opening found and accepted (coordinates that differ between the stores).
func (d *concatDataset) Warnings() []string { return d.warnings }

// ArrayNames lists the first store's arrays (every store must hold those read).
func (d *concatDataset) ArrayNames() ([]string, error) {
	l, ok := d.parts[0].(interface{ ArrayNames() ([]string, error) })
	if !ok {
		return nil, errors.New("the store has neither consolidated metadata nor a listing")
	}
	return l.ArrayNames()
}

func (d *concatDataset) Array(name string) (Array, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.arrays[name]; ok {
		return a, nil
	}
	arrs := make([]Array, len(d.parts))
	for i, p := range d.parts {
		a, err := p.Array(name)
		if err != nil {
			return nil, fmt.Errorf("store %d of %d (%s): %w", i+1, len(d.parts), p, err)
		}
		arrs[i] = a
	}
	var a Array
	var err error
	if axis := slices.Index(arrs[0].Dims(), d.dim); axis >= 0 {
		a, err = d.joinAlong(name, arrs, axis)
	} else {
		a, err = d.firstOf(name, arrs)
	}
	if err != nil {
		return nil, err
	}
	d.arrays[name] = a
	return a, nil
}

// joinAlong checks that arrs agree in all but their length along axis and joins them.
func (d *concatDataset) joinAlong(name string, arrs []Array, axis int) (Array, error) {
	first := arrs[0]
	c := &concatArray{parts: arrs, axis: axis, names: make([]string, len(arrs)), offs: make([]int, len(arrs)+1)}
	for i, a := range arrs {
		c.names[i] = d.parts[i].String()
		if err := sameButLength(first, a, axis); err != nil {
			return nil, fmt.Errorf("%s/%s and %s/%s: %v; the stores of a source must agree in all but their length along %s",
				d.parts[0], name, d.parts[i], name, err, d.dim)
		}
		c.offs[i+1] = c.offs[i] + a.Shape()[axis]
	}
	c.shape = slices.Clone(first.Shape())
	c.shape[axis] = c.offs[len(arrs)]
	if name == d.dim && len(c.shape) == 1 {
		if err := d.checkIncreasing(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkIncreasing refuses a time coordinate that does not increase from one store to the next
// (ocf-data-sampler's check_time_unique_increasing on the concatenation), naming the two
// stores; within a store the sampler's time axis checks it, and it reports a coordinate that
// cannot be read as times. The joined times are kept for the sampler's read (Times).
func (d *concatDataset) checkIncreasing(c *concatArray) error {
	v, err := joinWhole(c, Array.Times)
	if err != nil {
		return nil
	}
	c.times = v
	last := -1 // the index of the last time of the stores before part i
	for i := range c.parts {
		if first := c.offs[i]; first < c.offs[i+1] {
			if last >= 0 && v[first] <= v[last] {
				return fmt.Errorf("%s/%s starts at %s, not after %s, where %s/%s ends: the stores of a source must be listed in time order without overlap (ocf-data-sampler refuses them too)",
					d.parts[i], d.dim, fmtTime(v[first]), fmtTime(v[last]), d.parts[i-1], d.dim)
			}
			last = c.offs[i+1] - 1
		}
	}
	return nil
}

// firstOf is the first store's array; a one-dimensional coordinate that differs in another
// store is a warning, as ocf-data-sampler's override of mismatched coordinates is.
func (d *concatDataset) firstOf(name string, arrs []Array) (Array, error) {
	first := arrs[0]
	if len(first.Shape()) != 1 {
		return first, nil
	}
	want, werr := coordValues(first)
	for i, a := range arrs[1:] {
		got, err := coordValues(a)
		if werr != nil || err != nil {
			break // not a coordinate the sampler reads as numbers or strings
		}
		if !slices.Equal(got, want) {
			d.warnings = append(d.warnings, fmt.Sprintf("%s/%s differs from %s/%s; the first store's is used (as ocf-data-sampler overrides mismatched coordinates)",
				d.parts[i+1], name, d.parts[0], name))
		}
	}
	return first, nil
}

// coordValues reads a coordinate as comparable strings.
func coordValues(a Array) ([]string, error) {
	if s, err := a.Strings(); err == nil && len(s) == a.Shape()[0] {
		return s, nil
	}
	f, err := a.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(f))
	for i, v := range f {
		out[i] = fmt.Sprint(math.Float64bits(v))
	}
	return out, nil
}

// sameButLength says how b differs from a except in its length along axis ("" when it does not).
func sameButLength(a, b Array, axis int) error {
	as, bs := a.Shape(), b.Shape()
	switch {
	case !slices.Equal(a.Dims(), b.Dims()):
		return fmt.Errorf("dimensions %v and %v", a.Dims(), b.Dims())
	case a.TypeName() != b.TypeName():
		return fmt.Errorf("dtypes %s and %s", a.TypeName(), b.TypeName())
	case len(as) != len(bs):
		return fmt.Errorf("shapes %v and %v", as, bs)
	}
	ac, bc := a.Chunks(), b.Chunks()
	for i := range as {
		if i != axis && as[i] != bs[i] {
			return fmt.Errorf("shapes %v and %v", as, bs)
		}
		if i != axis && ac[i] != bc[i] {
			return fmt.Errorf("chunks %v and %v (they may differ along time only)", ac, bc)
		}
	}
	s1, o1, f1, h1 := a.CF()
	s2, o2, f2, h2 := b.CF()
	if s1 != s2 || o1 != o2 || h1 != h2 || (h1 && f1 != f2 && !(math.IsNaN(f1) && math.IsNaN(f2))) {
		return fmt.Errorf("CF decoding (scale, offset, fill) (%v, %v, %v) and (%v, %v, %v)", s1, o1, f1, s2, o2, f2)
	}
	return nil
}

// concatArray is arrays joined along axis, read through the first one's chunk grid.
type concatArray struct {
	parts []Array
	names []string // each part's store, for messages
	axis  int
	offs  []int // part i covers [offs[i], offs[i+1]) along axis
	shape []int
	times []int64 // a time coordinate's joined values, read once at open (checkIncreasing)

	scratch sync.Pool // a stored chunk's bytes, for chunks assembled from several
}

func (c *concatArray) Shape() []int                          { return c.shape }
func (c *concatArray) Chunks() []int                         { return c.parts[0].Chunks() }
func (c *concatArray) Dims() []string                        { return c.parts[0].Dims() }
func (c *concatArray) Native() (byte, int)                   { return c.parts[0].Native() }
func (c *concatArray) TypeName() string                      { return c.parts[0].TypeName() }
func (c *concatArray) Attr(name string) string               { return c.parts[0].Attr(name) }
func (c *concatArray) CF() (float64, float64, float64, bool) { return c.parts[0].CF() }

// joinPiece is the rows [lo, hi) of a concatenated chunk that stored chunk idx of part holds,
// from its row from.
type joinPiece struct {
	part, chunk, from, lo, hi int
}

// pieces maps the rows of concatenated chunk k along the axis to stored chunks (each store's
// chunks along time may be of another length than the first store's, which the concatenation
// has).
func (c *concatArray) pieces(k int) []joinPiece {
	n := c.Chunks()[c.axis]
	lo, hi := k*n, min((k+1)*n, c.shape[c.axis])
	var out []joinPiece
	for r := lo; r < hi; {
		p := partOf(c.offs, r)
		pn := c.parts[p].Chunks()[c.axis]
		local := r - c.offs[p]
		ch, from := local/pn, local%pn
		end := min(hi, r+(pn-from), c.offs[p+1])
		out = append(out, joinPiece{part: p, chunk: ch, from: from, lo: r - lo, hi: end - lo})
		r = end
	}
	return out
}

// partOf returns the part that holds row r.
func partOf(offs []int, r int) int {
	i, _ := slices.BinarySearch(offs, r+1)
	return i - 1
}

func (c *concatArray) DecodeChunk(idx []int, dst []byte) error {
	_, err := c.decode(idx, dst, false)
	return err
}

// DecodeChunkFound reports a chunk found when every stored chunk it is made of is.
func (c *concatArray) DecodeChunkFound(idx []int, dst []byte) (bool, error) {
	return c.decode(idx, dst, true)
}

func (c *concatArray) decode(idx []int, dst []byte, presence bool) (bool, error) {
	ps := c.pieces(idx[c.axis])
	at := slices.Clone(idx)
	decode := func(p joinPiece, buf []byte) (bool, error) {
		at[c.axis] = p.chunk
		if pa, ok := c.parts[p.part].(presenceArray); ok && presence {
			return pa.DecodeChunkFound(at, buf)
		}
		return true, c.parts[p.part].DecodeChunk(at, buf)
	}
	n := c.Chunks()[c.axis]
	if p := ps[0]; len(ps) == 1 && p.from == 0 && p.hi-p.lo == n && c.parts[p.part].Chunks()[c.axis] == n {
		return decode(p, dst) // a stored chunk: in place
	}
	clear(dst)
	found := true
	outer, inner := c.strides(len(dst))
	for _, p := range ps {
		pn := c.parts[p.part].Chunks()[c.axis]
		buf := c.buffer(outer * pn * inner)
		ok, err := decode(p, *buf)
		if err == nil {
			rows := (p.hi - p.lo) * inner
			for o := range outer {
				src := (*buf)[(o*pn+p.from)*inner:]
				copy(dst[(o*n+p.lo)*inner:(o*n+p.lo)*inner+rows], src[:rows])
			}
		}
		c.scratch.Put(buf)
		if err != nil {
			return false, err
		}
		found = found && ok
	}
	return found, nil
}

// FetchChunk reads chunk idx's stored bytes without decoding them when the chunk is one
// stored chunk of one part that reads that way (fetchingArray): every chunk but those a
// store boundary cuts, whose parts are read and decoded together in the decode step
// (errWhole).
func (c *concatArray) FetchChunk(idx []int, buf []byte) ([]byte, bool, error) {
	f, at, ok := c.single(idx)
	if !ok {
		return nil, false, errWhole
	}
	return f.FetchChunk(at, buf)
}

// DecodeFetched decodes FetchChunk's bytes into dst (fetchingArray).
func (c *concatArray) DecodeFetched(idx []int, raw []byte, found bool, dst []byte) error {
	f, at, ok := c.single(idx)
	if !ok {
		return fmt.Errorf("chunk %v: no stored chunk of one part to decode (a store boundary cuts it)", idx)
	}
	return f.DecodeFetched(at, raw, found, dst)
}

// rawChunkBytes bounds a stored chunk's size over the parts (fetchingArray).
func (c *concatArray) rawChunkBytes() int {
	n := 0
	for _, p := range c.parts {
		if f, ok := p.(fetchingArray); ok {
			n = max(n, f.rawChunkBytes())
		}
	}
	return n
}

// single is the part's array and index of chunk idx when it is one whole stored chunk of a
// part that fetches in two steps.
func (c *concatArray) single(idx []int) (fetchingArray, []int, bool) {
	ps := c.pieces(idx[c.axis])
	n := c.Chunks()[c.axis]
	p := ps[0]
	if len(ps) != 1 || p.from != 0 || p.hi-p.lo != n || c.parts[p.part].Chunks()[c.axis] != n {
		return nil, nil, false
	}
	f, ok := c.parts[p.part].(fetchingArray)
	if !ok {
		return nil, nil, false
	}
	at := slices.Clone(idx)
	at[c.axis] = p.chunk
	return f, at, true
}

// strides returns how many slabs lie outside the axis in a chunk of size bytes, and the bytes
// of one row along it within a slab.
func (c *concatArray) strides(size int) (outer, inner int) {
	ch := c.Chunks()
	outer = 1
	for d := range c.axis {
		outer *= ch[d]
	}
	return outer, size / outer / ch[c.axis]
}

// buffer is a scratch buffer of size bytes (a stored chunk's), from the pool when one fits.
func (c *concatArray) buffer(size int) *[]byte {
	if b, ok := c.scratch.Get().(*[]byte); ok && cap(*b) >= size {
		*b = (*b)[:size]
		return b
	}
	b := make([]byte, size)
	return &b
}

// MissingChunkError and ChunkError name the store and the stored chunk of the concatenated
// chunk idx's first joinPiece (presenceArray).
func (c *concatArray) MissingChunkError(idx []int) error { return c.ChunkError(idx, nil) }

func (c *concatArray) ChunkError(idx []int, err error) error {
	p := c.pieces(idx[c.axis])[0]
	at := slices.Clone(idx)
	at[c.axis] = p.chunk
	if pa, ok := c.parts[p.part].(presenceArray); ok {
		if err == nil {
			return pa.MissingChunkError(at)
		}
		return pa.ChunkError(at, err)
	}
	if err == nil {
		err = errors.New("chunk not stored")
	}
	return fmt.Errorf("store %s: chunk %v: %w", c.names[p.part], at, err)
}

// Whole reads: a one-dimensional array along the axis is its parts' values in turn.
func (c *concatArray) Int64s() ([]int64, error)     { return joinWhole(c, Array.Int64s) }
func (c *concatArray) Float64s() ([]float64, error) { return joinWhole(c, Array.Float64s) }
func (c *concatArray) Strings() ([]string, error)   { return joinWhole(c, Array.Strings) }
func (c *concatArray) Times() ([]int64, error) {
	if c.times != nil {
		return slices.Clone(c.times), nil
	}
	return joinWhole(c, Array.Times)
}
func (c *concatArray) Durations() ([]int64, error) { return joinWhole(c, Array.Durations) }

func joinWhole[T any](c *concatArray, read func(Array) ([]T, error)) ([]T, error) {
	if len(c.shape) != 1 {
		return nil, fmt.Errorf("a whole read of a %d-dimensional array joined from %d stores", len(c.shape), len(c.parts))
	}
	var out []T
	for i, a := range c.parts {
		v, err := read(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.names[i], err)
		}
		out = append(out, v...)
	}
	return out, nil
}
