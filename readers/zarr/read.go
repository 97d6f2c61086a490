package zarr

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// ReadOptions control ReadBox. The zero value (or nil) reads the stored element type.
type ReadOptions struct {
	// Out is the element type written to dst. ElemNone means the array's own numeric
	// type. datetime64/timedelta64 read as Int64 counts of their unit (ReadTimes and
	// ReadDurations give nanoseconds). With CF it defaults to Float32.
	Out Elem
	// CF applies CF decoding: raw values equal to _FillValue (for v2 arrays the zarr
	// fill_value) or missing_value become NaN, the others raw*scale_factor+add_offset
	// (computed in float64, then rounded to Out). Out must be Float32 or Float64.
	CF bool
	// Parallel is the number of chunks decoded at once (<= 1: one at a time, in the
	// calling goroutine). A negative value means GOMAXPROCS.
	Parallel int
	// Cache overrides the array's ChunkCache for this call.
	Cache ChunkCache
	// NoCache disables the cache for this call.
	NoCache bool
}

// float32Bytes and friends view a typed slice as bytes (no copy).
func float32Bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
func float64Bytes(s []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}
func int64Bytes(s []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}

// ReadBoxFloat32 is ReadBox into a []float32 (opt.Out is forced to Float32).
func (a *Array) ReadBoxFloat32(start, stop []int, dst []float32, opt *ReadOptions) error {
	o := ReadOptions{}
	if opt != nil {
		o = *opt
	}
	o.Out = Float32
	return a.ReadBox(start, stop, float32Bytes(dst), &o)
}

// OutElem is the element type ReadBox writes for opt.
func (a *Array) OutElem(opt *ReadOptions) Elem {
	if opt != nil && opt.Out != ElemNone {
		return opt.Out
	}
	if opt != nil && opt.CF {
		return Float32
	}
	return a.DType.Elem()
}

// ReadBox reads the box [start, stop) of the array into dst, C order, converting each
// element to opt.Out (see ReadOptions). dst must hold at least prod(stop-start)
// elements of the output type and be aligned to the element size. Chunks that are
// not stored read as the fill value. ReadBox is safe for concurrent use.
func (a *Array) ReadBox(start, stop []int, dst []byte, opt *ReadOptions) error {
	var o ReadOptions
	if opt != nil {
		o = *opt
	}
	src := a.DType.Elem()
	if src == ElemNone {
		return a.fail(fmt.Errorf("ReadBox on a %s array (use ReadStrings): %w", a.DType, ErrUnsupported))
	}
	out := a.OutElem(&o)
	var cfp *CFParams
	if o.CF {
		if a.cf.Err != nil {
			return a.fail(fmt.Errorf("CF decoding: %w", a.cf.Err))
		}
		cfp = &a.cfp
		if a.cf.Unsigned {
			src = unsignedOf(src)
		}
	}
	conv, copyBytes, err := newConverter(src, out, cfp)
	if err != nil {
		return a.fail(err)
	}
	os := out.Size()
	total, err := a.checkBox(start, stop, dst, os)
	if err != nil || total == 0 {
		return err
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%uintptr(os) != 0 {
		return a.fail(fmt.Errorf("destination is not aligned to %d bytes", os))
	}
	return a.readBox(boxRead{a: a, start: start, stop: stop, dst: dst, conv: conv, copyBytes: copyBytes,
		os: os, es: a.DType.Size}, &o)
}

// ReadBoxRaw reads the box [start, stop) of the array into dst as the elements' bytes:
// DType.Size bytes each, host byte order (as DecodeChunk gives them), C order. It
// serves every fixed-size type, ReadBox's numeric ones and those it does not convert
// (complex numbers, fixed-length strings and bytes). Of opt only Parallel, Cache and
// NoCache apply; Out and CF are refused. dst needs no alignment.
func (a *Array) ReadBoxRaw(start, stop []int, dst []byte, opt *ReadOptions) error {
	var o ReadOptions
	if opt != nil {
		o = *opt
	}
	switch {
	case o.CF || o.Out != ElemNone:
		return a.fail(fmt.Errorf("ReadBoxRaw copies the stored elements: CF and Out do not apply"))
	case a.DType.variable() || a.DType.Size <= 0:
		return a.fail(fmt.Errorf("ReadBoxRaw on a %s array (use ReadBoxStrings): %w", a.DType, ErrUnsupported))
	}
	es := a.DType.Size
	total, err := a.checkBox(start, stop, dst, es)
	if err != nil || total == 0 {
		return err
	}
	return a.readBox(boxRead{a: a, start: start, stop: stop, dst: dst, conv: converter{fn: convCopy},
		copyBytes: true, os: es, es: es}, &o)
}

func (a *Array) fail(err error) error {
	return &Error{Store: a.Store.String(), Path: a.Path, Err: err}
}

// checkBox checks the box [start, stop) against the array's shape and dst (elements of
// os bytes) and returns the box's element count.
func (a *Array) checkBox(start, stop []int, dst []byte, os int) (int, error) {
	total, err := a.boxLen(start, stop)
	if err != nil {
		return 0, err
	}
	if len(dst) < total*os {
		return 0, a.fail(fmt.Errorf("destination holds %d bytes, the box needs %d", len(dst), total*os))
	}
	return total, nil
}

// boxLen checks the box [start, stop) against the array's shape and returns its
// element count.
func (a *Array) boxLen(start, stop []int) (int, error) {
	nd := len(a.Shape)
	if len(start) != nd || len(stop) != nd {
		return 0, a.fail(fmt.Errorf("box %v:%v for a %d-d array", start, stop, nd))
	}
	total := 1
	for d := 0; d < nd; d++ {
		if start[d] < 0 || stop[d] < start[d] || stop[d] > a.Shape[d] {
			return 0, a.fail(fmt.Errorf("box %v:%v outside the array shape %v", start, stop, a.Shape))
		}
		total *= stop[d] - start[d]
	}
	return total, nil
}

// chunkRange is the part [lo, hi) of the chunk grid that the non-empty box
// [start, stop) touches, and its number of chunks.
func (a *Array) chunkRange(start, stop []int) (lo, hi [MaxDims]int, n int) {
	n = 1
	for d := range start {
		lo[d] = start[d] / a.Chunks[d]
		hi[d] = (stop[d]-1)/a.Chunks[d] + 1
		n *= hi[d] - lo[d]
	}
	return lo, hi, n
}

// readBox is the box walk behind ReadBox and ReadBoxRaw: each chunk the (checked,
// non-empty) box touches is decoded, or taken from the cache, and its part of the box
// converted into r.dst, by up to o.Parallel goroutines.
func (a *Array) readBox(r boxRead, o *ReadOptions) error {
	nd := len(a.Shape)
	r.cache = a.cache
	if o.Cache != nil {
		r.cache = o.Cache
	}
	if o.NoCache || nd > CacheDims {
		r.cache = nil
	}
	lo, hi, nchunks := a.chunkRange(r.start, r.stop)
	par := o.Parallel
	if par < 0 {
		par = runtime.GOMAXPROCS(0)
	}
	if par > nchunks {
		par = nchunks
	}
	if par <= 1 {
		var idx [MaxDims]int
		copy(idx[:nd], lo[:nd])
		for {
			if err := r.chunk(idx[:nd]); err != nil {
				return err
			}
			if !nextIndex(idx[:nd], lo[:nd], hi[:nd]) {
				return nil
			}
		}
	}
	rp := r // a copy, so that only the parallel path puts it on the heap
	return readParallel(&rp, par, nchunks, lo, hi)
}

// readParallel decodes the chunks of the box with par workers taking chunk numbers
// from a shared counter. (A separate function keeps the serial path free of heap
// allocations.)
func readParallel(r *boxRead, par, nchunks int, lo, hi [MaxDims]int) error {
	nd := len(r.start)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		next  int
		first error
	)
	worker := func() {
		defer wg.Done()
		var idx [MaxDims]int
		for {
			mu.Lock()
			if first != nil || next >= nchunks {
				mu.Unlock()
				return
			}
			k := next
			next++
			mu.Unlock()
			for d := nd - 1; d >= 0; d-- {
				w := hi[d] - lo[d]
				idx[d] = lo[d] + k%w
				k /= w
			}
			if err := r.chunk(idx[:nd]); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
		}
	}
	wg.Add(par)
	for i := 0; i < par; i++ {
		go worker()
	}
	wg.Wait()
	return first
}

func unsignedOf(e Elem) Elem {
	switch e {
	case Int8:
		return Uint8
	case Int16:
		return Uint16
	case Int32:
		return Uint32
	case Int64:
		return Uint64
	}
	return e
}

type boxRead struct {
	a           *Array
	start, stop []int
	dst         []byte
	conv        converter
	copyBytes   bool
	os, es      int
	cache       ChunkCache
}

// chunk decodes (or fetches) one chunk and copies its part of the box into dst.
func (r *boxRead) chunk(idx []int) error {
	a := r.a
	var data []byte
	var key ChunkKey
	if r.cache != nil {
		key.Array = a.id
		for d, v := range idx {
			key.Index[d] = int32(v)
		}
		if b, ok := r.cache.Get(key); ok && len(b) == a.ChunkBytes() {
			data = b
		}
	}
	if data == nil && r.cache == nil && r.copyBytes {
		if off, ok := r.contiguous(idx); ok {
			// The chunk is a contiguous run of dst: decode straight into it.
			n := a.ChunkBytes()
			return a.decodeChunk(idx, r.dst[off:off+n:off+n])
		}
	}
	var bp *[]byte
	if data == nil {
		bp = a.getBuf()
		data = *bp
		if err := a.decodeChunk(idx, data); err != nil {
			a.putBuf(bp)
			return err
		}
		if r.cache != nil {
			r.cache.Put(key, data)
			bp = nil // the cache owns it now
		}
	}
	r.copyOut(idx, data)
	if bp != nil {
		a.putBuf(bp)
	}
	return nil
}

// contiguous reports whether chunk idx lies wholly inside the box and covers one
// contiguous run of dst, and returns the run's byte offset.
func (r *boxRead) contiguous(idx []int) (int, bool) {
	ch := r.a.Chunks
	nd := len(idx)
	if nd == 0 {
		return 0, false
	}
	off, stride := 0, 1
	full := true // dims after the current one span the whole box
	for d := nd - 1; d >= 0; d-- {
		c0 := idx[d] * ch[d]
		if c0 < r.start[d] || c0+ch[d] > r.stop[d] {
			return 0, false
		}
		if !full && ch[d] != 1 {
			return 0, false
		}
		bw := r.stop[d] - r.start[d]
		if ch[d] != bw {
			full = false
		}
		off += (c0 - r.start[d]) * stride
		stride *= bw
	}
	return off * r.os, true
}

// copyOut copies the intersection of chunk idx with the box, row by row.
func (r *boxRead) copyOut(idx []int, data []byte) {
	a := r.a
	nd := len(idx)
	if nd == 0 {
		n := 1
		if r.copyBytes {
			n = r.os
		}
		r.conv.fn(r.conv.args, unsafe.Pointer(unsafe.SliceData(r.dst)), unsafe.Pointer(unsafe.SliceData(data)), n)
		return
	}
	ch := a.Chunks
	// Intersection in array coordinates.
	var lo, hi, cstr, bstr [MaxDims]int
	for d := 0; d < nd; d++ {
		c0 := idx[d] * ch[d]
		lo[d] = max(r.start[d], c0)
		hi[d] = min(r.stop[d], c0+ch[d])
	}
	// Strides in elements: chunk (full chunk shape) and box.
	cs, bs := 1, 1
	for d := nd - 1; d >= 0; d-- {
		cstr[d], bstr[d] = cs, bs
		cs *= ch[d]
		bs *= r.stop[d] - r.start[d]
	}
	last := nd - 1
	// Merge trailing dimensions while both the chunk rows and the box rows are
	// contiguous, so that whole planes copy in one call.
	run := hi[last] - lo[last]
	inner := last
	for inner > 0 && hi[inner]-lo[inner] == ch[inner] && hi[inner]-lo[inner] == r.stop[inner]-r.start[inner] {
		inner--
		run *= hi[inner] - lo[inner]
	}
	var pos [MaxDims]int
	copy(pos[:nd], lo[:nd])
	dstBase := unsafe.Pointer(unsafe.SliceData(r.dst))
	srcBase := unsafe.Pointer(unsafe.SliceData(data))
	n := run
	if r.copyBytes {
		n = run * r.os
	}
	for {
		so, do := 0, 0
		for d := 0; d < nd; d++ {
			so += (pos[d] - idx[d]*ch[d]) * cstr[d]
			do += (pos[d] - r.start[d]) * bstr[d]
		}
		r.conv.fn(r.conv.args, unsafe.Add(dstBase, do*r.os), unsafe.Add(srcBase, so*r.es), n)
		// Advance over dims [0, inner).
		d := inner - 1
		for ; d >= 0; d-- {
			pos[d]++
			if pos[d] < hi[d] {
				break
			}
			pos[d] = lo[d]
		}
		if d < 0 {
			return
		}
	}
}
