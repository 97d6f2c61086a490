//go:build !amd64

package rowconv

// arithState: no arithmetic kernels here; the tables do it all.
type arithState struct{}

func newArith(c *Conv, p Params) {}

func arithRows(c *Conv, dst []float32, dstStride int, src []byte, srcStride, n, m int, nt bool) bool {
	return false
}
