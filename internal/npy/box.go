package npy

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/gobatch/gobatch/readers/zarr"
)

// Box is a box of a Zarr array to read as a NumPy array: raw, or with CF decoded.
type Box struct {
	A           *zarr.Array
	Start, Stop []int // the box, Stop exclusive
	CF          bool  // scale, offset and fill values to float32 with NaN, CF times to datetime64[ns]
	Parallel    int   // zarr.ReadOptions.Parallel
}

// Array is what goes into the .npy file: numpy descr, shape and C-order bytes.
type Array struct {
	Descr string
	Shape []int
	Data  []byte
}

func (r *Box) shape() []int {
	s := make([]int, len(r.Start))
	for d := range s {
		s[d] = r.Stop[d] - r.Start[d]
	}
	return s
}

func (r *Box) count() int {
	n := 1
	for _, v := range r.shape() {
		n *= v
	}
	return n
}

// Descr is the numpy descr of a Zarr type in little-endian byte order.
func Descr(d zarr.DType) string {
	d.BigEndian = false
	return d.NumpyStr()
}

// Read reads the box with the Zarr reader's box reads, choosing the numpy type the .npy
// file gets.
func (r *Box) Read() (*Array, error) {
	a := r.A
	d := a.DType
	cf := a.CF()
	isTime := d.Kind == zarr.KindDatetime || d.Kind == zarr.KindTimedelta || cf.IsTime || cf.IsDuration
	res := &Array{Shape: r.shape()}
	opt := &zarr.ReadOptions{Parallel: r.Parallel}
	switch {
	case d.Kind == zarr.KindString: // --cf does not apply to strings
		return r.readStrings(res)
	case d.Kind == zarr.KindVarBytes:
		return r.readVarBytes(res)
	case r.CF && d.Numeric() && isTime:
		return r.readTimes(res)
	case r.CF && d.Numeric():
		res.Descr = "<f4"
		res.Data = alignedBytes(r.count() * 4)
		return res, a.ReadBox(r.Start, r.Stop, res.Data, &zarr.ReadOptions{CF: true, Out: zarr.Float32, Parallel: r.Parallel})
	case d.Elem() != zarr.ElemNone:
		res.Descr = Descr(d)
		res.Data = alignedBytes(r.count() * d.Size)
		return res, a.ReadBox(r.Start, r.Stop, res.Data, opt)
	case r.CF && d.Kind == zarr.KindComplex:
		return nil, fmt.Errorf("array %s: --cf does not support %s data", a.Name(), d)
	case d.Size > 0:
		// Complex, fixed-length strings, raw bytes: copied as decoded.
		res.Descr = Descr(d)
		res.Data = make([]byte, r.count()*d.Size)
		return res, a.ReadBoxRaw(r.Start, r.Stop, res.Data, opt)
	}
	return nil, fmt.Errorf("array %s: dtype %s cannot be read", a.Name(), d)
}

// alignedBytes allocates n bytes aligned to 8 (ReadBox wants element alignment).
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8)[:n:n]
}

// readStrings writes strings as fixed-width numpy unicode '<U<n>', n the longest
// string of the box in code points (at least 1, as numpy does).
func (r *Box) readStrings(res *Array) (*Array, error) {
	strs, err := r.A.ReadBoxStrings(r.Start, r.Stop)
	if err != nil {
		return nil, err
	}
	width := 1
	for _, s := range strs {
		width = max(width, utf8.RuneCountInString(s))
	}
	res.Descr = fmt.Sprintf("<U%d", width)
	res.Data = make([]byte, len(strs)*width*4)
	for i, s := range strs {
		p := i * width * 4
		for _, c := range s {
			binary.LittleEndian.PutUint32(res.Data[p:], uint32(c))
			p += 4
		}
	}
	return res, nil
}

// readVarBytes writes variable-length bytes as fixed-width numpy bytes '|S<n>', n the
// longest value of the box (at least 1, as numpy does). Like numpy's |S, trailing NUL
// bytes of a value do not survive.
func (r *Box) readVarBytes(res *Array) (*Array, error) {
	vals, err := r.A.ReadBoxStrings(r.Start, r.Stop)
	if err != nil {
		return nil, err
	}
	width := 1
	for _, v := range vals {
		width = max(width, len(v))
	}
	res.Descr = fmt.Sprintf("|S%d", width)
	res.Data = make([]byte, len(vals)*width)
	for i, v := range vals {
		copy(res.Data[i*width:], v)
	}
	return res, nil
}

// readTimes decodes times (datetime64, or numbers with CF "<unit> since <epoch>") to
// datetime64[ns] and durations (timedelta64, or numbers with a CF time unit) to
// timedelta64[ns].
func (r *Box) readTimes(res *Array) (*Array, error) {
	a := r.A
	var ns []int64
	var err error
	if a.DType.Kind == zarr.KindDatetime || (a.DType.Kind != zarr.KindTimedelta && a.CF().IsTime) {
		res.Descr = "<M8[ns]"
		ns, err = a.ReadBoxTimes(r.Start, r.Stop)
	} else {
		res.Descr = "<m8[ns]"
		ns, err = a.ReadBoxDurations(r.Start, r.Stop)
	}
	if err != nil {
		return nil, err
	}
	res.Data = make([]byte, 0, len(ns)*8)
	for _, v := range ns {
		res.Data = binary.LittleEndian.AppendUint64(res.Data, uint64(v))
	}
	return res, nil
}
