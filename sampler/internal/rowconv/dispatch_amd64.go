package rowconv

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// On amd64 the kernels are assembly (kernels_amd64.s). The wrappers run after the
// callers' length checks (checkRows), with n and m positive; strides go to the
// assembly in bytes.

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

// kernel is the signature of every assembly kernel (kernels_amd64.s): a and t may be
// nil where the kernel does not use them; flags 1 asks for non-temporal stores (2 and
// 4 are the arithmetic kernels').
type kernel func(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

//go:noescape
func lut16AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

//go:noescape
func lut8AVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

//go:noescape
func copyAVX2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

//go:noescape
func lut16SSE2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

//go:noescape
func lut8SSE2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

//go:noescape
func copySSE2(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)

// ntFlag is the kernels' flag for nt.
func ntFlag(nt bool) int {
	if nt {
		return 1
	}
	return 0
}

func lut8Rows(t *[1 << 8]float32, dst []float32, dstStride int, src []byte, srcStride, n, m int, nt bool) {
	switch path {
	case pathAVX2:
		lut8AVX2(nil, &t[0], &dst[0], 4*dstStride, &src[0], srcStride, n, m, ntFlag(nt))
	case pathSSE2:
		lut8SSE2(nil, &t[0], &dst[0], 4*dstStride, &src[0], srcStride, n, m, ntFlag(nt))
	default:
		lut8RowsGo(t, dst, dstStride, src, srcStride, n, m)
	}
}

func lut16Rows(t *[1 << 16]float32, dst []float32, dstStride int, src []uint16, srcStride, n, m int, nt bool) {
	s := (*byte)(unsafe.Pointer(&src[0]))
	switch path {
	case pathAVX2:
		lut16AVX2(nil, &t[0], &dst[0], 4*dstStride, s, 2*srcStride, n, m, ntFlag(nt))
	case pathSSE2:
		lut16SSE2(nil, &t[0], &dst[0], 4*dstStride, s, 2*srcStride, n, m, ntFlag(nt))
	default:
		lut16RowsGo(t, dst, dstStride, src, srcStride, n, m)
	}
}

func copyRows(dst []float32, dstStride int, src []float32, srcStride, n, m int, nt bool) {
	s := (*byte)(unsafe.Pointer(&src[0]))
	switch path {
	case pathAVX2:
		copyAVX2(nil, nil, &dst[0], 4*dstStride, s, 4*srcStride, n, m, ntFlag(nt))
	case pathSSE2:
		copySSE2(nil, nil, &dst[0], 4*dstStride, s, 4*srcStride, n, m, ntFlag(nt))
	default:
		copyRowsGo(dst, dstStride, src, srcStride, n, m)
	}
}

// Fence orders the non-temporal stores before it before the stores after it (SFENCE;
// nothing on other architectures): the writer calls it before it publishes a slot.
//
//go:noescape
func Fence()

// hasNT reports whether the kernels in use have non-temporal stores.
func hasNT() bool { return path != pathGo }
