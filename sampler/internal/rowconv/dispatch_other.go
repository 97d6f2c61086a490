//go:build !amd64

package rowconv

// Elsewhere the portable loops, with ordinary stores whatever nt says.

func bestPath() kernelPath { return pathGo }

// availablePaths are the families this CPU can run, best last.
func availablePaths() []kernelPath { return []kernelPath{pathGo} }

func lut8Rows(t *[1 << 8]float32, dst []float32, dstStride int, src []byte, srcStride, n, m int, nt bool) {
	lut8RowsGo(t, dst, dstStride, src, srcStride, n, m)
}

func lut16Rows(t *[1 << 16]float32, dst []float32, dstStride int, src []uint16, srcStride, n, m int, nt bool) {
	lut16RowsGo(t, dst, dstStride, src, srcStride, n, m)
}

func copyRows(dst []float32, dstStride int, src []float32, srcStride, n, m int, nt bool) {
	copyRowsGo(dst, dstStride, src, srcStride, n, m)
}

// Fence orders the non-temporal stores before it before the stores after it (SFENCE on
// amd64; nothing here, where there are none): the writer calls it before it publishes
// a slot.
func Fence() {}

// hasNT reports whether the kernels in use have non-temporal stores.
func hasNT() bool { return false }
