package blosc

// SSE2 kernels (shuffle_amd64.s) for the typesizes that dominate: 2 (int16
// satellite data), 4 (float32) and 8 (ocf_blosc2 writes float16 data with
// typesize 8). The
// wrappers check every length before handing pointers to assembly, and finish
// the last n%16 elements with the portable loops. FuzzUnshuffle compares them
// with the portable code.

//go:noescape
func unshuffle2x16(dst, p0, p1 *byte, groups int)

//go:noescape
func unshuffle4x16(dst, src *byte, n, groups int)

//go:noescape
func unshuffle8x16(dst, src *byte, n, groups int)

func unshuffle2(dst, src []byte, n int) {
	g := n / 16
	if g > 0 && len(src) >= 2*n && len(dst) >= 2*n {
		unshuffle2x16(&dst[0], &src[0], &src[n], g)
	} else {
		g = 0
	}
	done := 16 * g
	unshuffle2Go(dst[2*done:], src[done:n], src[n+done:2*n], n-done)
}

func unshuffle8(dst, src []byte, n int) {
	g := n / 16
	if g > 0 && len(src) >= 8*n && len(dst) >= 8*n {
		unshuffle8x16(&dst[0], &src[0], n, g)
	} else {
		g = 0
	}
	unshuffle8Go(dst, src, n, 16*g)
}

func unshuffle4(dst, src []byte, n int) {
	g := n / 16
	if g > 0 && len(src) >= 4*n && len(dst) >= 4*n {
		unshuffle4x16(&dst[0], &src[0], n, g)
	} else {
		g = 0
	}
	unshuffle4Go(dst, src, n, 16*g)
}
