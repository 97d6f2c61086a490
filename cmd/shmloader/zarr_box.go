package main

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/gobatch/gobatch/readers/zarr"
)

// boxRequest is one `shmloader read`: a box of an array, raw or CF-decoded.
type boxRequest struct {
	a           *zarr.Array
	start, stop []int
	cf          bool
	parallel    int
}

// boxResult is what goes into the .npy file: numpy descr, shape and C-order bytes.
type boxResult struct {
	descr string
	shape []int
	data  []byte
}

func (r *boxRequest) shape() []int {
	s := make([]int, len(r.start))
	for d := range s {
		s[d] = r.stop[d] - r.start[d]
	}
	return s
}

func (r *boxRequest) count() int {
	n := 1
	for _, v := range r.shape() {
		n *= v
	}
	return n
}

// nativeDescr is the numpy descr of the array's type in little-endian byte order.
func nativeDescr(d zarr.DType) string {
	d.BigEndian = false
	return d.NumpyStr()
}

// read performs the request.
func (r *boxRequest) read() (*boxResult, error) {
	a := r.a
	d := a.DType
	cf := a.CF()
	isTime := d.Kind == zarr.KindDatetime || d.Kind == zarr.KindTimedelta || cf.IsTime || cf.IsDuration
	res := &boxResult{shape: r.shape()}
	switch {
	case d.Kind == zarr.KindString: // --cf does not apply to strings
		return r.readStrings(res)
	case d.Kind == zarr.KindVarBytes:
		return r.readVarBytes(res)
	case r.cf && d.Numeric() && isTime:
		return r.readTimes(res)
	case r.cf && d.Numeric():
		res.descr = "<f4"
		res.data = alignedBytes(r.count() * 4)
		return res, a.ReadBox(r.start, r.stop, res.data, &zarr.ReadOptions{CF: true, Out: zarr.Float32, Parallel: r.parallel})
	case d.Elem() != zarr.ElemNone:
		res.descr = nativeDescr(d)
		res.data = alignedBytes(r.count() * d.Size)
		return res, a.ReadBox(r.start, r.stop, res.data, &zarr.ReadOptions{Parallel: r.parallel})
	case r.cf && d.Kind == zarr.KindComplex:
		return nil, fmt.Errorf("array %s: --cf does not support %s data", arrayName(a), d)
	case d.Size > 0:
		// Complex, fixed-length strings, raw bytes: copied as decoded.
		res.descr = nativeDescr(d)
		res.data = alignedBytes(r.count() * d.Size)
		return res, r.readRaw(res.data)
	}
	return nil, fmt.Errorf("array %s: dtype %s cannot be read", arrayName(a), d)
}

// alignedBytes allocates n bytes aligned to 8 (ReadBox wants element alignment).
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8)[:n:n]
}

// readRaw copies the box out of decoded chunks (DecodeChunk: host byte order, C order,
// full chunk shape), for element types ReadBox does not convert.
func (r *boxRequest) readRaw(dst []byte) error {
	a := r.a
	nd := len(a.Shape)
	es := a.DType.Size
	buf := make([]byte, a.ChunkBytes())
	if nd == 0 {
		chunk, err := a.DecodeChunk(nil, buf)
		if err != nil {
			return err
		}
		copy(dst, chunk[:es])
		return nil
	}
	if r.count() == 0 {
		return nil
	}
	ch := a.Chunks
	lo, hi := make([]int, nd), make([]int, nd)
	for d := range nd {
		lo[d] = r.start[d] / ch[d]
		hi[d] = (r.stop[d]-1)/ch[d] + 1
	}
	bshape := r.shape()
	idx := append([]int(nil), lo...)
	for {
		chunk, err := a.DecodeChunk(idx, buf)
		if err != nil {
			return err
		}
		copyChunkPart(dst, bshape, r.start, chunk, ch, idx, r.stop, es)
		if !advance(idx, lo, hi) {
			return nil
		}
	}
}

// copyChunkPart copies the intersection of chunk idx (shape ch) with the box that
// starts at start (shape bshape, ends at stop) into dst, one innermost row at a time.
func copyChunkPart(dst []byte, bshape, start []int, chunk []byte, ch, idx, stop []int, es int) {
	nd := len(ch)
	lo, hi := make([]int, nd), make([]int, nd)
	for d := range nd {
		c0 := idx[d] * ch[d]
		lo[d] = max(start[d], c0)
		hi[d] = min(stop[d], c0+ch[d])
	}
	row := (hi[nd-1] - lo[nd-1]) * es
	pos := append([]int(nil), lo...)
	for {
		so, do := 0, 0
		for d := range nd {
			so = so*ch[d] + pos[d] - idx[d]*ch[d]
			do = do*bshape[d] + pos[d] - start[d]
		}
		copy(dst[do*es:do*es+row], chunk[so*es:so*es+row])
		// Advance over all but the innermost dimension.
		d := nd - 2
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

// advance steps idx through [lo, hi) in C order; false when done.
func advance(idx, lo, hi []int) bool {
	for d := len(idx) - 1; d >= 0; d-- {
		idx[d]++
		if idx[d] < hi[d] {
			return true
		}
		idx[d] = lo[d]
	}
	return false
}

// boxIndices calls fn with the C-order flat index (in the whole array) of every
// element of the box, in box order.
func (r *boxRequest) boxIndices(fn func(i int)) {
	shape := r.a.Shape
	nd := len(shape)
	if nd == 0 {
		fn(0)
		return
	}
	if r.count() == 0 {
		return
	}
	pos := append([]int(nil), r.start...)
	for {
		flat := 0
		for d := range nd {
			flat = flat*shape[d] + pos[d]
		}
		fn(flat)
		d := nd - 1
		for ; d >= 0; d-- {
			pos[d]++
			if pos[d] < r.stop[d] {
				break
			}
			pos[d] = r.start[d]
		}
		if d < 0 {
			return
		}
	}
}

// readStrings writes strings as fixed-width numpy unicode '<U<n>', n the longest
// string of the box in code points (at least 1, as numpy does).
func (r *boxRequest) readStrings(res *boxResult) (*boxResult, error) {
	all, err := r.a.ReadStrings()
	if err != nil {
		return nil, err
	}
	strs := make([]string, 0, r.count())
	r.boxIndices(func(i int) { strs = append(strs, all[i]) })
	width := 1
	for _, s := range strs {
		width = max(width, utf8.RuneCountInString(s))
	}
	res.descr = fmt.Sprintf("<U%d", width)
	res.data = make([]byte, len(strs)*width*4)
	for i, s := range strs {
		p := i * width * 4
		for _, c := range s {
			binary.LittleEndian.PutUint32(res.data[p:], uint32(c))
			p += 4
		}
	}
	return res, nil
}

// readVarBytes writes variable-length bytes as fixed-width numpy bytes '|S<n>', n the
// longest value of the box (at least 1, as numpy does). Like numpy's |S, trailing NUL
// bytes of a value do not survive.
func (r *boxRequest) readVarBytes(res *boxResult) (*boxResult, error) {
	all, err := r.a.ReadStrings()
	if err != nil {
		return nil, err
	}
	vals := make([]string, 0, r.count())
	r.boxIndices(func(i int) { vals = append(vals, all[i]) })
	width := 1
	for _, v := range vals {
		width = max(width, len(v))
	}
	res.descr = fmt.Sprintf("|S%d", width)
	res.data = make([]byte, len(vals)*width)
	for i, v := range vals {
		copy(res.data[i*width:], v)
	}
	return res, nil
}

// readTimes decodes times (datetime64, or numbers with CF "<unit> since <epoch>") to
// datetime64[ns] and durations (timedelta64, or numbers with a CF time unit) to
// timedelta64[ns].
func (r *boxRequest) readTimes(res *boxResult) (*boxResult, error) {
	a := r.a
	var all []int64
	var err error
	if a.DType.Kind == zarr.KindDatetime || (a.DType.Kind != zarr.KindTimedelta && a.CF().IsTime) {
		res.descr = "<M8[ns]"
		all, err = a.ReadTimes()
	} else {
		res.descr = "<m8[ns]"
		all, err = a.ReadDurations()
	}
	if err != nil {
		return nil, err
	}
	res.data = make([]byte, 0, r.count()*8)
	r.boxIndices(func(i int) { res.data = binary.LittleEndian.AppendUint64(res.data, uint64(all[i])) })
	return res, nil
}
