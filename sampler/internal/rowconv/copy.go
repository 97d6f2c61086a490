package rowconv

import "unsafe"

// CopyNT copies the float32 row src into dst (min of the lengths, as copy) with
// non-temporal stores where the CPU has them (see Fence).
func CopyNT(dst, src []float32) {
	n := min(len(dst), len(src))
	CopyRowsNT(dst, n, src, n, 1, n)
}

// CopyRows copies n rows of m float32 values, rows dstStride and srcStride apart.
func CopyRows(dst []float32, dstStride int, src []float32, srcStride, n, m int) {
	CopyRowsThen(dst, dstStride, src, srcStride, n, m, false, nil)
}

// CopyRowsNT is CopyRows with non-temporal stores where the CPU has them.
func CopyRowsNT(dst []float32, dstStride int, src []float32, srcStride, n, m int) {
	CopyRowsThen(dst, dstStride, src, srcStride, n, m, true, nil)
}

// CopyRowsThen is CopyRows (CopyRowsNT with nt) that prefetches the next call's rows as
// Conv.RowsThen does.
func CopyRowsThen(dst []float32, dstStride int, src []float32, srcStride, n, m int, nt bool, next []float32) {
	if !checkRows(len(dst), dstStride, len(src), srcStride, n, m) {
		return
	}
	if k := copyKernels[path]; k != nil {
		k(nil, nil, &dst[0], 4*dstStride, (*byte)(unsafe.Pointer(&src[0])), 4*srcStride, n, m, ntFlag(nt),
			ahead(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(next))), 4*len(next)), 4, srcStride, n, m))
		return
	}
	copyRowsGo(dst, dstStride, src, srcStride, n, m)
}

// checkRows reports whether there is anything to do (n and m positive), and panics
// (a caller bug) when n rows of m values, strides apart, do not fit in both slices.
func checkRows(dstLen, dstStride, srcLen, srcStride, n, m int) bool {
	if n <= 0 || m <= 0 {
		return false
	}
	if dstStride < 0 || srcStride < 0 || (n-1)*dstStride+m > dstLen || (n-1)*srcStride+m > srcLen {
		panic("rowconv: rows past the end of a slice")
	}
	return true
}

// ntFlag is the kernels' flag for non-temporal stores.
func ntFlag(nt bool) int {
	if nt {
		return 1
	}
	return 0
}
