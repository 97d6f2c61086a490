package sampler

// The gather kernels: copy one example's window out of cached float32 chunks into slot memory.
// Everything is already decoded in the cache, so the inner loop is one copy per output row.

// box4 is a window over the last four dimensions (a, b, y, x) of an array, optionally below a
// fixed leading index (an NWP run). Along a the indices are a0 + k*aStride (time steps), or
// at[k] when at is not nil (a time window across a change of the store's time step), along b
// an explicit list (channels), along y and x contiguous ranges.
type box4 struct {
	lead            int // index along the leading dimension, or -1 for a 4-d array
	a0, aStride, na int
	at              []int // ascending indices along a; nil: a0 + k*aStride
	b               []int
	y0, h, x0, w    int
	nanFrom         int // steps k >= nanFrom along a are filled (dropout); na for none
}

// gather4 writes the box into out, C order [na, len(b), h, w].
func gather4(ps *pinSet, c *chunked, bx *box4, out []float32) error {
	d := 0 // dimension of a
	leadKey, leadOff := 0, 0
	if bx.lead >= 0 {
		d = 1
		leadKey = bx.lead / c.chunks[0] * c.gstride[0]
		leadOff = bx.lead % c.chunks[0] * c.chunks[1] * c.chunks[2] * c.chunks[3] * c.chunks[4]
	}
	ca, cb, cy, cx := c.chunks[d], c.chunks[d+1], c.chunks[d+2], c.chunks[d+3]
	sa, sb, sy, sx := c.gstride[d], c.gstride[d+1], c.gstride[d+2], c.gstride[d+3]
	h, w, nb := bx.h, bx.w, len(bx.b)
	plane := h * w
	fill := c.fillValue()
	lastKa := -1
	for k := 0; k < bx.na; k++ {
		a := bx.a0 + k*bx.aStride
		if bx.at != nil {
			a = bx.at[k]
		}
		ka, wa := a/ca, a%ca
		if ka != lastKa {
			// a only grows: the chunks of earlier a-chunks are not needed again. Unpinning
			// them bounds what one reader pins to one chunk row of (b, y, x).
			ps.releaseAll()
			lastKa = ka
		}
		for j, b := range bx.b {
			o := (k*nb + j) * plane
			if k >= bx.nanFrom {
				dst := out[o : o+plane]
				for i := range dst {
					dst[i] = fill
				}
				continue
			}
			kb, wb := b/cb, b%cb
			keyAB := leadKey + ka*sa + kb*sb
			offAB := leadOff + (wa*cb+wb)*cy*cx
			for y := bx.y0; y < bx.y0+h; {
				ky, wy := y/cy, y%cy
				ny := min(cy-wy, bx.y0+h-y)
				for x := bx.x0; x < bx.x0+w; {
					kx, wx := x/cx, x%cx
					nx := min(cx-wx, bx.x0+w-x)
					src, err := ps.get(c.key(keyAB+ky*sy+kx*sx), c.elems, c.load)
					if err != nil {
						return err
					}
					copyRows(out[o+(y-bx.y0)*w+(x-bx.x0):], w, src[offAB+wy*cx+wx:], cx, ny, nx)
					x += nx
				}
				y += ny
			}
		}
	}
	return nil
}

// copyRows copies n rows of m values, rows dstStride and srcStride apart.
func copyRows(dst []float32, dstStride int, src []float32, srcStride, n, m int) {
	if m == 32 {
		// The common crop width: a fixed-size move the compiler inlines (no call per row).
		for r := 0; r < n; r++ {
			*(*[32]float32)(dst[r*dstStride:]) = *(*[32]float32)(src[r*srcStride:])
		}
		return
	}
	for r := 0; r < n; r++ {
		copy(dst[r*dstStride:r*dstStride+m], src[r*srcStride:r*srcStride+m])
	}
}
