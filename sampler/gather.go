package sampler

import (
	"github.com/gobatch/gobatch/sampler/chunks"
	"github.com/gobatch/gobatch/sampler/internal/rowconv"
)

// The gather kernels: copy one example's window out of cached chunks into slot memory. Chunks
// are decoded in the cache, so the inner loop is one call per output row run: a copy of
// float32 rows, or rows of stored values converted to float32 as they are copied (chunked.go
// says which a source's entries hold).

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
	nanFrom, nanTo  int // steps nanFrom <= k < nanTo along a are filled (dropout); na, na for none
}

// gather4 writes the box into out, C order [na, len(b), h, w]; nt: with non-temporal stores.
func gather4(ps *chunks.Pins, c *chunked, bx *box4, out []float32, nt bool) error {
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
	q := pieces{c: c, nt: nt}
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
			q.flush()
			ps.ReleaseAll()
			lastKa = ka
		}
		for j, b := range bx.b {
			o := (k*nb + j) * plane
			if k >= bx.nanFrom && k < bx.nanTo {
				dst := out[o : o+plane]
				for i := range dst {
					dst[i] = fill
				}
				continue
			}
			cv := c.rowConv(b)
			kb, wb := b/cb, b%cb
			keyAB := leadKey + ka*sa + kb*sb
			offAB := leadOff + (wa*cb+wb)*cy*cx
			for y := bx.y0; y < bx.y0+h; {
				ky, wy := y/cy, y%cy
				ny := min(cy-wy, bx.y0+h-y)
				for x := bx.x0; x < bx.x0+w; {
					kx, wx := x/cx, x%cx
					nx := min(cx-wx, bx.x0+w-x)
					if ps.Full() {
						q.flush() // get releases every pin, the queued piece's block with them
					}
					src, err := ps.Get(c.key(keyAB+ky*sy+kx*sx), c.chunkBytes(), c.load)
					if err != nil {
						return err
					}
					q.push(piece{cv, out[o+(y-bx.y0)*w+(x-bx.x0):], w, src, offAB + wy*cx + wx, cx, ny, nx})
					x += nx
				}
				y += ny
			}
		}
	}
	q.flush()
	return nil
}

// piece is one call of chunked.rows: n rows of m values from one cached chunk.
type piece struct {
	cv                   *rowconv.Conv
	dst                  []float32
	dstStride            int
	block                []byte
	off, srcStride, n, m int
}

// pieces runs the pieces of a gather one behind, so that each piece's rows are prefetched
// while the piece before it is converted (row r of the next with row r of this one): a
// piece is a few rows of one channel plane, its first rows are cache misses, and the
// kernels' own prefetch runs only a few rows ahead. The queued piece's block stays pinned
// until flush.
type pieces struct {
	c      *chunked
	nt     bool
	queued piece
	has    bool
}

func (q *pieces) push(p piece) {
	q.run(p.block[p.off*q.c.width:])
	q.queued, q.has = p, true
}

// flush converts the queued piece, if any.
func (q *pieces) flush() { q.run(nil) }

// run converts the queued piece, if any, prefetching next (the rows of the piece after it).
func (q *pieces) run(next []byte) {
	if q.has {
		p := &q.queued
		q.c.rows(p.cv, q.nt, p.dst, p.dstStride, p.block, p.off, p.srcStride, p.n, p.m, next)
		q.queued, q.has = piece{}, false
	}
}

// rows writes n rows of m float32 values, rows dstStride apart, from block (a cached chunk)
// from value off on, rows srcStride values apart: a copy of float32 entries (cv nil), else
// stored values converted by cv. nt: with stores that bypass the CPU caches. next: the rows
// of the call to come (see pieces), prefetched meanwhile; nil for none.
func (c *chunked) rows(cv *rowconv.Conv, nt bool, dst []float32, dstStride int, block []byte, off, srcStride, n, m int, next []byte) {
	if cv == nil {
		rowconv.CopyRowsThen(dst, dstStride, bytesAsFloat32(block)[off:], srcStride, n, m, nt, bytesAsFloat32(next))
		return
	}
	cv.RowsThen(dst, dstStride, block[off*c.width:], srcStride, n, m, nt, next)
}

// value is value i of block (a cached chunk) as float32.
func (c *chunked) value(cv *rowconv.Conv, block []byte, i int) float32 {
	if cv == nil {
		return bytesAsFloat32(block)[i]
	}
	return cv.Value(block[i*c.width:])
}
