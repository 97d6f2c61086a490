package rowconv

// The portable loops: every architecture's fallback, and the reference the assembly
// kernels are tested against besides the scalar decoder.

func lut8RowsGo(t *[1 << 8]float32, dst []float32, dstStride int, src []byte, srcStride, n, m int) {
	for r := 0; r < n; r++ {
		d, s := dst[r*dstStride:r*dstStride+m], src[r*srcStride:r*srcStride+m]
		for i, v := range s {
			d[i] = t[v]
		}
	}
}

func lut16RowsGo(t *[1 << 16]float32, dst []float32, dstStride int, src []uint16, srcStride, n, m int) {
	for r := 0; r < n; r++ {
		d, s := dst[r*dstStride:r*dstStride+m], src[r*srcStride:r*srcStride+m]
		for i, v := range s {
			d[i] = t[v]
		}
	}
}

func copyRowsGo(dst []float32, dstStride int, src []float32, srcStride, n, m int) {
	if m == 32 {
		// The common crop width: a fixed-size move the compiler inlines.
		for r := 0; r < n; r++ {
			*(*[32]float32)(dst[r*dstStride:]) = *(*[32]float32)(src[r*srcStride:])
		}
		return
	}
	for r := 0; r < n; r++ {
		copy(dst[r*dstStride:r*dstStride+m], src[r*srcStride:r*srcStride+m])
	}
}
