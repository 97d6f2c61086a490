package sampler

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobatch/gobatch/readers/zarr"
	"github.com/gobatch/gobatch/sampler/chunks"
	"github.com/gobatch/gobatch/sampler/internal/rowconv"
)

// chunked is one source's data array as seen through the cache: chunk grid arithmetic, the
// cache key of a chunk, the loader that puts a decoded chunk into its cache entry, and the
// conversion of cached values to the float32 of a batch (CF decoding, then the normalisation of
// channel axis chanAxis, then the NaN policy).
//
// Where the conversion happens depends on the stored element (the cache's form of a chunk):
//   - float32 that CF leaves as it is, or narrower (int8, uint8, int16, uint16, float16:
//     stored): the entry holds the stored values, and the gather converts each row as it
//     copies it (convs). A chunk is decoded far more often than all of it is delivered (a
//     24x24 crop out of a frame of hundreds of pixels), so converting only the rows a batch
//     takes is the cheaper place; and an entry of a narrower type is half the bytes of a
//     float32 one or less, so the cache holds twice the chunks or more.
//   - wider (float64, int32, ...), or float32 with a scale, offset or mask: the entry holds
//     float32, converted once at load (conv, postprocess), and the gather copies rows.
//
// The chunk is decoded straight into the entry's block when its decoded bytes are the entry's
// form (stored, or float32, which CF and normalisation then convert in place) and its store
// order is canonical; else into a native buffer, converted or transposed into the block.
//
// Shapes, chunks and chunk grid positions are in canonical order (dimMap): the cache holds
// every chunk transposed once, in its cached width, when it is decoded, so that the gather
// stays a row copy whatever the store's order. A canonical axis the store lacks (channel) has
// size 1.
type chunked struct {
	id      uint64 // the source's index, the high bits of its cache keys
	what    string // "source[0] (satellite.zarr/data)", for messages
	arr     Array
	shape   []int // canonical
	chunks  []int // canonical
	grid    []int // chunks along each canonical dimension
	gstride []int // linear chunk index strides
	elems   int   // values per chunk
	conv    *zarr.Float32Decoder
	itemLen int
	elem    zarr.Elem // the stored element type

	// stored: the cache holds the stored values (itemLen bytes each; the gather converts with
	// convs, one per store channel of chanAxis, or one); else float32 (width 4).
	stored bool
	width  int
	convs  []*rowconv.Conv
	direct bool // the chunk decodes straight into its entry (no transposition, entry's form)

	perm      []int // store axis of each canonical axis, -1 when absent
	storeRank int
	transpose bool      // the canonical order differs from the store's memory order
	tstride   []int     // transpose: stride in the store-order chunk of each canonical axis (0: absent)
	fpool     sync.Pool // *[]float32 of elems: the converted chunk in store order (transpose)
	// f64: the cache holds float64 values (width 8), for a points source whose float64
	// quotient must see its values unrounded (keepFloat64, capacity.go); conv64 decodes them.
	f64     bool
	conv64  *zarr.Float64Decoder
	f64pool sync.Pool // *[]float64 of elems: the converted chunk in store order (transpose)

	chanAxis int       // -1: normalise with mean[0], std[0] (or not at all)
	normMean []float64 // per channel of the store (identity where unselected); nil: none
	normStd  []float64
	// normLo, normHi: the clip bounds applied before the normalisation, per channel as normMean
	// (-Inf, +Inf: none).
	normLo, normHi []float64
	nanFill        bool    // NaN becomes fill after the normalisation
	fill           float32 // (nan_policy "zero": 0; nan_fill: its value)

	// Chunk reads: refuse chunks that are not stored (missing_chunks = "error"), the deadline of
	// one read (0: none), and the counts of chunks decoded and of those that were absent.
	refuseMissing    bool
	deadline         time.Duration
	decoded, missing atomic.Uint64
	// The time spent reading chunks' stored bytes and decoding them into the cache's form,
	// summed over every goroutine that did (Stats.ReadNS, DecodeNS).
	readNS, decodeNS atomic.Uint64
	// Loads (fetch.go): at most depth reads in flight (reads; nil: no bound), for a remote
	// store fewer as its window adapts (chunks/window.go), their buffers (rawBufs), the job's decode
	// slots (decodes), and whether the store is in object storage.
	depth   int
	reads   chan struct{}
	window  *chunks.ReadWindow // remote stores; nil: local
	rawBufs chan []byte
	decodes chan struct{}
	remote  bool

	// For the plan: the mapping of the store's dimensions ("time=time channel=variable ...")
	// and the direction of the coordinates along y and x, as the roles found them.
	axes   string
	orders map[string]string
	// from: the stores (resolved) and the variable, for the decoding identity (shared.go).
	from string

	scratch sync.Pool // *[]byte of elems * itemLen: the native chunk
	load    chunks.Loader
	idxPool sync.Pool // *[]int: chunk coordinates
}

const keyShift = 48

// newChunked sees arr through the cache in the canonical order of m (nil: the store's own).
func newChunked(id int, what string, arr Array, m *dimMap) (*chunked, error) {
	shape, chunks := arr.Shape(), arr.Chunks()
	if len(shape) != len(chunks) {
		return nil, fmt.Errorf("%s: shape %v and chunks %v differ in rank", what, shape, chunks)
	}
	c := &chunked{id: uint64(id), what: what, arr: arr, shape: shape, chunks: chunks, chanAxis: -1, storeRank: len(shape)}
	if m != nil {
		c.canonical(m)
		c.axes = m.String()
	}
	conv, elem, err := newDecoder(arr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.conv, c.elem = conv, elem
	_, c.itemLen = arr.Native()
	c.stored, c.width = c.itemLen < 4 || elem == zarr.Float32 && conv.Identity(), 4
	if c.stored {
		c.width = c.itemLen
	}
	c.direct = !c.transpose && c.stored
	n := len(c.shape)
	c.grid = make([]int, n)
	c.gstride = make([]int, n)
	c.elems = 1
	total := 1
	for d := n - 1; d >= 0; d-- {
		if c.chunks[d] < 1 || c.shape[d] < 0 {
			return nil, fmt.Errorf("%s: invalid chunk shape %v", what, c.chunks)
		}
		c.grid[d] = (c.shape[d] + c.chunks[d] - 1) / c.chunks[d]
		c.gstride[d] = total
		total *= max(c.grid[d], 1)
		c.elems *= c.chunks[d]
	}
	if total >= 1<<keyShift {
		return nil, fmt.Errorf("%s: %d chunks; at most 2^%d are supported", what, total, keyShift)
	}
	c.load = c.loadChunk
	return c, nil
}

// canonical sets the canonical shape and chunks of m's order, and the strides of the
// transposition when the order differs from the store's.
func (c *chunked) canonical(m *dimMap) {
	shape, chunks := c.shape, c.chunks
	n := len(m.perm)
	c.perm = m.perm
	c.shape, c.chunks = make([]int, n), make([]int, n)
	for d, p := range m.perm {
		c.shape[d], c.chunks[d] = 1, 1
		if p >= 0 {
			c.shape[d], c.chunks[d] = shape[p], chunks[p]
		}
	}
	if m.identity() {
		return
	}
	c.transpose = true
	store := make([]int, len(chunks)) // C-order strides of the store's chunk
	st := 1
	for d := len(chunks) - 1; d >= 0; d-- {
		store[d] = st
		st *= chunks[d]
	}
	c.tstride = make([]int, n)
	for d, p := range m.perm {
		if p >= 0 {
			c.tstride[d] = store[p]
		}
	}
}

// storeIndex writes the store-order grid position of canonical position idx into dst.
func (c *chunked) storeIndex(idx, dst []int) []int {
	if c.perm == nil {
		return idx
	}
	for d, p := range c.perm {
		if p >= 0 {
			dst[p] = idx[d]
		}
	}
	return dst
}

// transposeChunk writes src (a chunk in store order) into dst in canonical order, values of
// any width (the cache's: stored or float32). tstride is
// the stride in src of each canonical axis. When the last canonical axis is contiguous in src
// too, every row is a copy. Otherwise (channel last: x is strided, channel contiguous) the walk
// goes by tiles of 16 values of the last axis by every value of the axis that src holds
// contiguously, so that the strided reads of a tile stay in the L1 cache while each output row
// is written in order.
func transposeChunk[T any](dst, src []T, chunks, tstride []int) {
	n := len(chunks)
	var dstr [8]int // C-order strides of dst; canonical roles have at most 5 axes
	st := 1
	for d := n - 1; d >= 0; d-- {
		dstr[d] = st
		st *= chunks[d]
	}
	last, ls := chunks[n-1], tstride[n-1]
	k := -1 // the canonical axis src holds contiguously, when it is not the last
	for d := 0; d < n-1; d++ {
		if tstride[d] == 1 && chunks[d] > 1 {
			k = d
		}
	}
	if ls == 1 || k < 0 {
		k = -1 // rows: a copy (ls 1) or a strided read each
	}
	const tile = 16
	var pos [8]int
	dOff, sOff := 0, 0
	for {
		switch {
		case k >= 0:
			kn, kd := chunks[k], dstr[k]
			for x0 := 0; x0 < last; x0 += tile {
				x1 := min(x0+tile, last)
				for kk := 0; kk < kn; kk++ {
					row := dst[dOff+kk*kd+x0 : dOff+kk*kd+x1]
					for i, s := 0, sOff+kk+x0*ls; i < len(row); i, s = i+1, s+ls {
						row[i] = src[s]
					}
				}
			}
		case ls == 1:
			copy(dst[dOff:dOff+last], src[sOff:sOff+last])
		default:
			row := dst[dOff : dOff+last]
			for i, s := 0, sOff; i < last; i, s = i+1, s+ls {
				row[i] = src[s]
			}
		}
		// Advance over the leading axes but k (odometer), keeping both offsets in step.
		d := n - 2
		for ; d >= 0; d-- {
			if d == k {
				continue
			}
			pos[d]++
			dOff += dstr[d]
			sOff += tstride[d]
			if pos[d] < chunks[d] {
				break
			}
			dOff -= pos[d] * dstr[d]
			sOff -= pos[d] * tstride[d]
			pos[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// chunkBytes is the size of one chunk in the cache (its entry's block): stored or float32.
func (c *chunked) chunkBytes() int64 { return int64(c.elems) * int64(c.width) }

// key is the cache key of the chunk with linear grid index lin.
func (c *chunked) key(lin int) uint64 { return c.id<<keyShift | uint64(lin) }

// loadChunk is the cache's loader (chunks.Loader) of the source's chunks: dst is the entry's
// block, of chunkBytes.
// indices returns the grid index of the chunk of key in canonical order (idx) and in store
// order (sidx), both in ip, a buffer from idxPool that the caller puts back when done with them.
func (c *chunked) indices(key uint64) (ip *[]int, idx, sidx []int) {
	lin := int(key & (1<<keyShift - 1))
	ip, _ = c.idxPool.Get().(*[]int)
	if ip == nil {
		s := make([]int, len(c.shape)+c.storeRank) // canonical, then store order
		ip = &s
	}
	idx = (*ip)[:len(c.shape)]
	for d := range idx {
		idx[d] = lin / c.gstride[d] % c.grid[d]
	}
	return ip, idx, c.storeIndex(idx, (*ip)[len(c.shape):])
}

func (c *chunked) loadChunk(key uint64, dst []byte) (func(), error) {
	ip, idx, sidx := c.indices(key)
	var bp *[]byte // the native buffer, when the chunk does not decode into dst
	buf := dst
	if !c.direct {
		bp = c.nativeBuf()
		buf = *bp
	}
	found, err, wait := c.decode(sidx, buf)
	if err == nil {
		c.decoded.Add(1)
		if !found {
			c.missing.Add(1)
			if c.refuseMissing {
				err = fmt.Errorf("%s: %w (missing_chunks = %q)", c.what, c.arr.(presenceArray).MissingChunkError(sidx), MissingError)
			}
		}
	}
	if err == nil {
		start := time.Now()
		c.finish(idx, dst, buf)
		c.decodeNS.Add(uint64(time.Since(start)))
	} else if !errors.Is(err, zarr.ErrMissingChunk) {
		err = fmt.Errorf("%s: chunk %v: %w", c.what, sidx, err)
	}
	if wait != nil {
		// A read still blocked owns sidx and buf: they never go back to the pools, and when buf
		// is the entry's block the cache keeps it until the read returns.
		if c.direct {
			return wait, err
		}
		return nil, err
	}
	if bp != nil {
		c.scratch.Put(bp)
	}
	c.idxPool.Put(ip)
	return nil, err
}

// finish turns a decoded chunk (native, in store order) into the entry's form in dst: the
// stored values transposed, or float32 converted (transposed), normalised, NaN policy applied.
// When the chunk was decoded into dst (direct), native is dst.
func (c *chunked) finish(idx []int, dst, native []byte) {
	switch {
	case c.stored && c.direct:
	case c.stored && c.width == 1:
		transposeChunk(dst, native, c.chunks, c.tstride)
	case c.stored && c.width == 2:
		transposeChunk(bytesAsUint16(dst), bytesAsUint16(native), c.chunks, c.tstride)
	case c.stored:
		transposeChunk(bytesAsFloat32(dst), bytesAsFloat32(native), c.chunks, c.tstride)
	case c.f64:
		c.finish64(idx, bytesAsFloat64(dst), native)
	default:
		f := bytesAsFloat32(dst)
		if !c.direct || !c.conv.Identity() {
			c.convert(f, native) // in place when direct: float32 to float32, value by value
		}
		c.postprocess(idx, f)
	}
}

// presenceArray is implemented by arrays that tell a chunk that is not stored (read as the
// fill value) from one that is: the store-backed arrays. The others count no missing chunk.
type presenceArray interface {
	DecodeChunkFound(idx []int, dst []byte) (found bool, err error)
	MissingChunkError(idx []int) error
	ChunkError(idx []int, err error) error
}

// ErrChunkDeadline is wrapped by the error of a chunk read that did not finish in time.
var ErrChunkDeadline = errors.New("chunk read deadline passed")

// nativeBuf returns a buffer for one chunk's native bytes, from the pool when it has one.
func (c *chunked) nativeBuf() *[]byte {
	if bp, _ := c.scratch.Get().(*[]byte); bp != nil {
		return bp
	}
	b := make([]byte, c.elems*c.itemLen)
	return &b
}

// decode reads chunk sidx (store order) into dst (an entry's block or a native buffer); found
// is false when it was not stored. With a deadline the read runs on its own goroutine: a read
// that blocks for ever (a hung mount) cannot be interrupted, but the loader returns an error
// naming the chunk when the deadline passes, and wait (nil otherwise) says that the goroutine
// still owns sidx and dst: it returns once the read has returned and no longer writes dst.
func (c *chunked) decode(sidx []int, dst []byte) (found bool, err error, wait func()) {
	if c.deadline <= 0 {
		found, err = c.decodeNow(sidx, dst)
		return found, err, nil
	}
	call, _ := deadlineCalls.Get().(*deadlineCall)
	if call == nil {
		call = &deadlineCall{done: make(chan deadlineResult, 1), t: time.NewTimer(time.Hour)}
		call.t.Stop()
	}
	go func() {
		f, e := c.decodeNow(sidx, dst)
		call.done <- deadlineResult{f, e}
	}()
	call.t.Reset(c.deadline)
	select {
	case r := <-call.done:
		call.t.Stop()
		deadlineCalls.Put(call)
		return r.found, r.err, nil
	case <-call.t.C:
		// The goroutine will still send on call.done: the call is never reused.
	}
	err = fmt.Errorf("read did not finish within %v (a hung mount or a file that never delivers?): %w", c.deadline, ErrChunkDeadline)
	if p, ok := c.arr.(presenceArray); ok {
		err = p.ChunkError(sidx, err)
	}
	return false, err, func() { <-call.done }
}

// deadlineCall is the channel and timer of a read under a deadline, reused from one read to
// the next (a miss allocates only the goroutine's closure).
type deadlineCall struct {
	done chan deadlineResult
	t    *time.Timer
}

type deadlineResult struct {
	found bool
	err   error
}

var deadlineCalls sync.Pool

func (c *chunked) decodeNow(sidx []int, dst []byte) (bool, error) {
	if f, ok := c.arr.(fetchingArray); ok && c.reads != nil {
		return c.fetchDecode(f, sidx, dst)
	}
	defer slot(c.reads)()
	start := time.Now()
	defer func() { c.decodeNS.Add(uint64(time.Since(start))) }() // the read and the decode in one call
	return c.decodeWhole(sidx, dst)
}

// chunkCounts are the chunks decoded since the start and those among them that were not stored.
func (c *chunked) chunkCounts() (decoded, missing uint64) { return c.decoded.Load(), c.missing.Load() }

// convert CF-decodes native chunk bytes into dst in canonical order.
func (c *chunked) convert(dst []float32, native []byte) {
	if !c.transpose {
		c.conv.Decode(dst, native)
		return
	}
	fp, _ := c.fpool.Get().(*[]float32)
	if fp == nil {
		f := make([]float32, c.elems)
		fp = &f
	}
	c.conv.Decode(*fp, native)
	transposeChunk(dst, *fp, c.chunks, c.tstride)
	c.fpool.Put(fp)
}

// keepFloat64 makes the cache hold c's chunks as float64 (CF-decoded in float64, then
// normalised and NaN-filled in float64), for a points source whose values a float64 quotient
// is computed from (capacity.go). Call it before the cache sizes are taken.
func (c *chunked) keepFloat64() error {
	d, err := zarr.NewFloat64Decoder(c.elem, cfParams(c.arr))
	if err != nil {
		return fmt.Errorf("%s: %w", c.what, err)
	}
	c.f64, c.conv64, c.width, c.stored, c.direct = true, d, 8, false, false
	return nil
}

// finish64 turns native chunk bytes into the float64 entry dst, in canonical order.
func (c *chunked) finish64(idx []int, dst []float64, native []byte) {
	if c.transpose {
		fp, _ := c.f64pool.Get().(*[]float64)
		if fp == nil {
			f := make([]float64, c.elems)
			fp = &f
		}
		c.conv64.Decode(*fp, native)
		transposeChunk(dst, *fp, c.chunks, c.tstride)
		c.f64pool.Put(fp)
	} else {
		c.conv64.Decode(dst, native)
	}
	for i, v := range dst { // one channel: a points source's (time, id)
		if c.normMean != nil {
			v = normalise64(v, c.normMean[0], c.normStd[0], c.normLo[0], c.normHi[0])
		}
		if c.nanFill && v != v {
			v = float64(c.fill)
		}
		dst[i] = v
	}
}

// postprocess applies the normalisation and the NaN policy to a converted chunk.
func (c *chunked) postprocess(idx []int, dst []float32) {
	if c.normMean != nil {
		if c.chanAxis < 0 {
			for i, v := range dst {
				dst[i] = c.normalise(0, v)
			}
		} else {
			outer, inner := 1, 1
			for d := 0; d < c.chanAxis; d++ {
				outer *= c.chunks[d]
			}
			for d := c.chanAxis + 1; d < len(c.chunks); d++ {
				inner *= c.chunks[d]
			}
			cc := c.chunks[c.chanAxis]
			ch0 := idx[c.chanAxis] * cc
			for o := 0; o < outer; o++ {
				for k := 0; k < cc; k++ {
					ch := ch0 + k
					if ch >= len(c.normMean) {
						break // past the array's edge: never read
					}
					if c.identity(ch) {
						continue
					}
					blk := dst[(o*cc+k)*inner : (o*cc+k+1)*inner]
					for i, v := range blk {
						blk[i] = c.normalise(ch, v)
					}
				}
			}
		}
	}
	if c.nanFill {
		for i, v := range dst {
			if v != v {
				dst[i] = c.fill
			}
		}
	}
}

// prepareConvs makes the gather's converters of a source whose cache holds stored values,
// once its normalisation and NaN policy are set: one per store channel along chanAxis when the
// normalisation is per channel (channels of equal mean and std share one), else one.
func (c *chunked) prepareConvs() error {
	if !c.stored {
		return nil
	}
	cf := cfParams(c.arr)
	made := map[[4]float64]*rowconv.Conv{}
	conv := func(ch int, norm bool) (*rowconv.Conv, error) {
		k := [4]float64{0, 1, math.Inf(-1), math.Inf(1)}
		if norm {
			k = [4]float64{c.normMean[ch], c.normStd[ch], c.normLo[ch], c.normHi[ch]}
		}
		if cv := made[k]; cv != nil {
			return cv, nil
		}
		clip := !math.IsInf(k[2], -1) || !math.IsInf(k[3], 1)
		cv, err := rowconv.New(rowconv.Params{Src: c.elem, CF: cf, Norm: norm, Mean: k[0], Std: k[1],
			Clip: clip, ClipMin: k[2], ClipMax: k[3], NaNFill: c.nanFill, Fill: c.fill})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.what, err)
		}
		made[k] = cv
		return cv, nil
	}
	if c.normMean == nil || c.chanAxis < 0 {
		cv, err := conv(0, c.normMean != nil)
		c.convs = []*rowconv.Conv{cv}
		return err
	}
	c.convs = make([]*rowconv.Conv, len(c.normMean))
	for ch := range c.convs {
		// As postprocess: a channel whose normalisation is the identity is left as CF decodes it.
		cv, err := conv(ch, !c.identity(ch))
		if err != nil {
			return err
		}
		c.convs[ch] = cv
	}
	return nil
}

// rowConv is the gather's converter of store channel ch (along chanAxis), nil when the cache
// holds float32.
func (c *chunked) rowConv(ch int) *rowconv.Conv {
	switch {
	case c.convs == nil:
		return nil
	case c.chanAxis < 0 || len(c.convs) == 1:
		return c.convs[0]
	}
	return c.convs[ch]
}

// setNormalisation installs per-channel mean, std and clip bounds (nil: none; ±Inf for a
// missing bound) for the selected store channels.
func (c *chunked) setNormalisation(chanAxis int, selected []int, mean, std, lo, hi []float64) {
	if mean == nil {
		return
	}
	if chanAxis < 0 {
		c.normMean, c.normStd = mean[:1], std[:1]
		c.normLo, c.normHi = []float64{math.Inf(-1)}, []float64{math.Inf(1)}
		if lo != nil {
			c.normLo, c.normHi = lo[:1], hi[:1]
		}
		return
	}
	n := c.shape[chanAxis]
	c.chanAxis = chanAxis
	c.normMean, c.normStd = make([]float64, n), make([]float64, n)
	c.normLo, c.normHi = make([]float64, n), make([]float64, n)
	for i := range n {
		c.normStd[i], c.normLo[i], c.normHi[i] = 1, math.Inf(-1), math.Inf(1)
	}
	for j, ch := range selected {
		c.normMean[ch], c.normStd[ch] = mean[j], std[j]
		if lo != nil {
			c.normLo[ch], c.normHi[ch] = lo[j], hi[j]
		}
	}
}

// identity reports whether channel ch's normalisation changes nothing: mean 0, std 1, no clip.
func (c *chunked) identity(ch int) bool {
	return c.normMean[ch] == 0 && c.normStd[ch] == 1 && math.IsInf(c.normLo[ch], -1) && math.IsInf(c.normHi[ch], 1)
}

// normalise is channel ch's normalisation of v: clip, then (v - mean) /
// std in float64; NaN stays NaN.
func (c *chunked) normalise(ch int, v float32) float32 {
	return normaliseValue(v, c.normMean[ch], c.normStd[ch], c.normLo[ch], c.normHi[ch])
}

// normaliseValue is the normalisation of v: clip to [lo, hi], then
// (v - mean) / std in float64; NaN stays NaN.
func normaliseValue(v float32, mean, std, lo, hi float64) float32 {
	return float32(normalise64(float64(v), mean, std, lo, hi))
}

// normalise64 is normaliseValue in float64 (a float64 cache's values, keepFloat64).
func normalise64(x, mean, std, lo, hi float64) float64 {
	if x == x {
		x = min(max(x, lo), hi)
	}
	return (x - mean) / std
}

// fillValue is what a dropped-out (or otherwise absent) value becomes.
func (c *chunked) fillValue() float32 {
	if c.nanFill {
		return c.fill
	}
	return float32(math.NaN())
}

// noteOrder records the direction of the coordinate along canonical axis ax.
func (c *chunked) noteOrder(ax string, coord []float64) {
	if c.orders == nil {
		c.orders = map[string]string{}
	}
	switch {
	case len(coord) < 2:
		c.orders[ax] = "single"
	case coord[len(coord)-1] > coord[0]:
		c.orders[ax] = "ascending"
	default:
		c.orders[ax] = "descending"
	}
}
