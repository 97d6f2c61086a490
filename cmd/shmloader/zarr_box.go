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

// read performs the request with the reader's box reads, choosing the numpy type the
// .npy file gets.
func (r *boxRequest) read() (*boxResult, error) {
	a := r.a
	d := a.DType
	cf := a.CF()
	isTime := d.Kind == zarr.KindDatetime || d.Kind == zarr.KindTimedelta || cf.IsTime || cf.IsDuration
	res := &boxResult{shape: r.shape()}
	opt := &zarr.ReadOptions{Parallel: r.parallel}
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
		return res, a.ReadBox(r.start, r.stop, res.data, opt)
	case r.cf && d.Kind == zarr.KindComplex:
		return nil, fmt.Errorf("array %s: --cf does not support %s data", arrayName(a), d)
	case d.Size > 0:
		// Complex, fixed-length strings, raw bytes: copied as decoded.
		res.descr = nativeDescr(d)
		res.data = make([]byte, r.count()*d.Size)
		return res, a.ReadBoxRaw(r.start, r.stop, res.data, opt)
	}
	return nil, fmt.Errorf("array %s: dtype %s cannot be read", arrayName(a), d)
}

// alignedBytes allocates n bytes aligned to 8 (ReadBox wants element alignment).
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8)[:n:n]
}

// readStrings writes strings as fixed-width numpy unicode '<U<n>', n the longest
// string of the box in code points (at least 1, as numpy does).
func (r *boxRequest) readStrings(res *boxResult) (*boxResult, error) {
	strs, err := r.a.ReadBoxStrings(r.start, r.stop)
	if err != nil {
		return nil, err
	}
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
	vals, err := r.a.ReadBoxStrings(r.start, r.stop)
	if err != nil {
		return nil, err
	}
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
	var ns []int64
	var err error
	if a.DType.Kind == zarr.KindDatetime || (a.DType.Kind != zarr.KindTimedelta && a.CF().IsTime) {
		res.descr = "<M8[ns]"
		ns, err = a.ReadBoxTimes(r.start, r.stop)
	} else {
		res.descr = "<m8[ns]"
		ns, err = a.ReadBoxDurations(r.start, r.stop)
	}
	if err != nil {
		return nil, err
	}
	res.data = make([]byte, 0, len(ns)*8)
	for _, v := range ns {
		res.data = binary.LittleEndian.AppendUint64(res.data, uint64(v))
	}
	return res, nil
}
