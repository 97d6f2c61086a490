package rowconv

import (
	"github.com/gobatch/gobatch/readers/zarr"
	"golang.org/x/sys/cpu"
)

// On amd64 the kernels are assembly (kernels_amd64.s), called after the callers'
// length checks (checkRows) with n and m positive and strides in bytes.

func bestPath() kernelPath {
	if cpu.X86.HasAVX2 {
		return pathAVX2
	}
	return pathSSE2
}

// availablePaths are the families this CPU can run, best last.
func availablePaths() []kernelPath {
	if cpu.X86.HasAVX2 {
		return []kernelPath{pathGo, pathSSE2, pathAVX2}
	}
	return []kernelPath{pathGo, pathSSE2}
}

// kernel is the signature of every assembly kernel: a and t may be nil where the
// kernel does not use them; flags 1 asks for non-temporal stores (2 and 4 are the
// arithmetic kernels': normalise, NaN to zero).
type kernel func(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func lut16AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func lut8AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func copyAVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func lut16SSE2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func lut8SSE2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

//go:noescape
func copySSE2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)

// copyKernels copy float32 rows, by path.
var copyKernels = [numPaths]kernel{pathSSE2: copySSE2, pathAVX2: copyAVX2}

// setKernels picks c's kernels: table lookups for the 1- and 2-byte types (replaced
// on the AVX2 path by the arithmetic kernel where newArith keeps one), copies for
// float32 that nothing changes; float32 normalised, or whose NaN becomes 0, the float32
// arithmetic kernel where CF leaves it as stored; other float32 the scalar path.
func setKernels(c *Conv, p Params) {
	c.kern, c.a, c.flags = [numPaths]kernel{}, nil, 0
	switch {
	case c.lut8 != nil:
		c.kern = [numPaths]kernel{pathSSE2: lut8SSE2, pathAVX2: lut8AVX2}
	case c.lut16 != nil:
		c.kern = [numPaths]kernel{pathSSE2: lut16SSE2, pathAVX2: lut16AVX2}
	case c.copy:
		c.kern = copyKernels
	}
	if !cpu.X86.HasAVX2 {
		c.kern[pathAVX2] = nil
	}
	switch {
	case c.tab != nil:
		newArith(c, p)
	case p.Src == zarr.Float32 && !c.copy:
		newArithF32(c, p)
	}
}

// Fence orders the non-temporal stores before it before the stores after it (SFENCE;
// nothing on other architectures): the writer calls it before it publishes a slot.
// (A goroutine moved to another CPU in between is no hole: the interrupt or system
// call that moves it drains the write-combining buffers.)
//
//go:noescape
func Fence()

// hasNT reports whether the kernels in use have non-temporal stores.
func hasNT() bool { return path != pathGo }
