package zarr

import "encoding/binary"

// Index and element layout helpers shared by the pipelines and the box reads: index
// walks, strides, byte order, strided gathers, fills and block copies.

// nextIndex advances idx in C order within [lo, hi); false when done.
func nextIndex(idx, lo, hi []int) bool {
	for d := len(idx) - 1; d >= 0; d-- {
		idx[d]++
		if idx[d] < hi[d] {
			return true
		}
		idx[d] = lo[d]
	}
	return false
}

// zeroIndex is the origin of an index space, for nextIndex.
var zeroIndex [MaxDims]int

func cStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = acc
		acc *= shape[d]
	}
	return s
}

func prod(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
}

// byteSwap reverses the bytes of every unit-sized group of b.
func byteSwap(b []byte, unit int) {
	switch unit {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	default:
		for i := 0; i+unit <= len(b); i += unit {
			for l, r := i, i+unit-1; l < r; l, r = l+1, r-1 {
				b[l], b[r] = b[r], b[l]
			}
		}
	}
}

// gatherStrided writes the C-order array of shape into dst, reading element idx of
// src at sum(idx[d]*strides[d]).
func gatherStrided(dst, src []byte, shape, strides []int, es int) {
	nd := len(shape)
	if prod(shape) == 0 {
		return
	}
	var idx [MaxDims]int
	last := nd - 1
	n := shape[last]
	st := strides[last] * es
	o := 0
	for {
		base := 0
		for d := 0; d < last; d++ {
			base += idx[d] * strides[d]
		}
		base *= es
		row := dst[o : o+n*es]
		switch es {
		case 1:
			for k := 0; k < n; k++ {
				row[k] = src[base+k*st]
			}
		case 2:
			for k := 0; k < n; k++ {
				copy(row[2*k:2*k+2], src[base+k*st:])
			}
		case 4:
			for k := 0; k < n; k++ {
				binary.LittleEndian.PutUint32(row[4*k:], binary.LittleEndian.Uint32(src[base+k*st:]))
			}
		case 8:
			for k := 0; k < n; k++ {
				binary.LittleEndian.PutUint64(row[8*k:], binary.LittleEndian.Uint64(src[base+k*st:]))
			}
		default:
			for k := 0; k < n; k++ {
				copy(row[k*es:(k+1)*es], src[base+k*st:])
			}
		}
		o += n * es
		// The next row: advance over all but the innermost dimension.
		if !nextIndex(idx[:last], zeroIndex[:last], shape[:last]) {
			return
		}
	}
}

// fillElems repeats the element e over dst.
func fillElems(dst, e []byte) {
	zero := true
	for _, c := range e {
		if c != 0 {
			zero = false
			break
		}
	}
	if zero || len(e) == 0 {
		clear(dst)
		return
	}
	if len(dst) < len(e) {
		return
	}
	copy(dst, e)
	for n := len(e); n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
}

// copyBox copies the C-order block src (shape bshape) into dst (C-order, shape
// dshape) at origin; the block lies inside dst.
func copyBox(dst []byte, dshape []int, src []byte, bshape []int, origin []int, es int) {
	nd := len(dshape)
	if prod(bshape) == 0 {
		return
	}
	dstr := cStrides(dshape)
	var idx [MaxDims]int
	last := nd - 1
	run := bshape[last] * es
	so := 0
	for {
		do := 0
		for d := 0; d < nd; d++ {
			do += (origin[d] + idx[d]) * dstr[d]
		}
		do *= es
		copy(dst[do:do+run], src[so:so+run])
		so += run
		// The next row: advance over all but the innermost dimension.
		if !nextIndex(idx[:last], zeroIndex[:last], bshape[:last]) {
			return
		}
	}
}
