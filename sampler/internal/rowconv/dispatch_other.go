//go:build !amd64

package rowconv

// Elsewhere the portable loops, with ordinary stores whatever nt says: there are no
// kernels.

// kernel is the assembly kernels' signature (dispatch_amd64.go); none here.
type kernel func(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

// arith: the arithmetic kernels' numbers; none here.
type arith struct{}

var copyKernels [numPaths]kernel

func bestPath() kernelPath { return pathGo }

// availablePaths are the families this CPU can run, best last.
func availablePaths() []kernelPath { return []kernelPath{pathGo} }

func setKernels(c *Conv, p Params) {}

// Fence orders the non-temporal stores before it before the stores after it (SFENCE on
// amd64; nothing here, where there are none): the writer calls it before it publishes
// a slot.
func Fence() {}

// hasNT reports whether the kernels in use have non-temporal stores.
func hasNT() bool { return false }
