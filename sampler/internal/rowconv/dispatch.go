package rowconv

// The portable dispatch: ordinary stores whatever nt says.

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
// amd64; nothing where there are none): the writer calls it before it publishes a slot.
func Fence() {}

// UseNT reports whether writes of a batch of this many bytes should be non-temporal.
func UseNT(bytes int64) bool { return false }
