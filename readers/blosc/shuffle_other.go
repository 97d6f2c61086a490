//go:build !amd64

package blosc

func unshuffle2(dst, src []byte, n int) { unshuffle2Go(dst, src[:n], src[n:2*n], n) }

func unshuffle4(dst, src []byte, n int) { unshuffle4Go(dst, src, n, 0) }

func unshuffle8(dst, src []byte, n int) { unshuffle8Go(dst, src, n, 0) }
