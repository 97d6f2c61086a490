package rowconv

// CopyNT copies the float32 row src into dst (min of the lengths, as copy) with
// non-temporal stores where the CPU has them (see Fence).
func CopyNT(dst, src []float32) {
	n := min(len(dst), len(src))
	CopyRowsNT(dst, n, src, n, 1, n)
}

// CopyRows copies n rows of m float32 values, rows dstStride and srcStride apart.
func CopyRows(dst []float32, dstStride int, src []float32, srcStride, n, m int) {
	checkRows(len(dst), dstStride, len(src), srcStride, n, m)
	copyRows(dst, dstStride, src, srcStride, n, m, false)
}

// CopyRowsNT is CopyRows with non-temporal stores where the CPU has them.
func CopyRowsNT(dst []float32, dstStride int, src []float32, srcStride, n, m int) {
	checkRows(len(dst), dstStride, len(src), srcStride, n, m)
	copyRows(dst, dstStride, src, srcStride, n, m, true)
}

// checkRows panics (index out of range, a caller bug) unless n rows of m values fit in
// both slices.
func checkRows(dstLen, dstStride, srcLen, srcStride, n, m int) {
	if n <= 0 || m <= 0 {
		return
	}
	if (n-1)*dstStride+m > dstLen || (n-1)*srcStride+m > srcLen {
		panic("rowconv: rows past the end of a slice")
	}
}
