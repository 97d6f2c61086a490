package rowconv

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gobatch/gobatch/readers/zarr"
)

// Params say how stored values become the float32 values of a batch.
type Params struct {
	Src zarr.Elem     // stored element type: Int8, Uint8, Int16, Uint16, Float16 or Float32
	CF  zarr.CFParams // scale, offset, masks, as zarr.NewFloat32Decoder takes them
	// Norm: then v = float32((float64(clip(v)) - Mean) / Std). Mean 0 and Std 1 change
	// nothing but quiet signalling NaNs of float32 data (the sampler skips such channels).
	Norm      bool
	Mean, Std float64
	// Clip (with Norm): clip(v) = min(max(v, ClipMin), ClipMax) first, as ocf-data-sampler
	// clips before it normalises; NaN stays NaN.
	Clip             bool
	ClipMin, ClipMax float64
	NaNFill          bool    // then NaN -> Fill (last)
	Fill             float32 // what NaNFill puts in place of NaN
}

// Conv converts rows of stored values to float32 as its Params say. A Conv is
// immutable and safe for concurrent use; its methods allocate nothing.
type Conv struct {
	size  int               // bytes per stored value
	lut8  *[1 << 8]float32  // Int8, Uint8: final value by raw bit pattern
	lut16 *[1 << 16]float32 // Int16, Uint16, Float16
	dec   *zarr.Float32Decoder
	copy  bool // float32 that nothing changes: rows are copied bit for bit
	post  post // float32 with CF or normalisation: applied after dec

	// The assembly kernels, by kernelPath (nil: the portable loops), and their
	// arguments: the table (nil for float32), the arithmetic kernel's numbers and its
	// flags (see kernel).
	kern  [numPaths]kernel
	tab   *float32
	a     *arith
	flags int
}

// post is the sampler's normalisation and NaN policy on decoded values.
type post struct {
	norm      bool
	mean, std float64
	clip      bool
	lo, hi    float64
	nanFill   bool
	fill      float32
}

// apply returns v clipped and normalised (float64 arithmetic, rounded once to float32)
// and with NaN replaced by the fill value when the policy says so.
func (p *post) apply(v float32) float32 {
	if p.norm {
		x := float64(v)
		if p.clip && x == x {
			x = min(max(x, p.lo), p.hi)
		}
		v = float32((x - p.mean) / p.std)
	}
	if p.nanFill && v != v {
		v = p.fill
	}
	return v
}

// New returns the converter for p. Src must be one of the types Params names.
func New(p Params) (*Conv, error) {
	switch p.Src {
	case zarr.Int8, zarr.Uint8, zarr.Int16, zarr.Uint16, zarr.Float16, zarr.Float32:
	default:
		return nil, fmt.Errorf("rowconv: stored type %s: want int8, uint8, int16, uint16, float16 or float32", p.Src)
	}
	dec, err := zarr.NewFloat32Decoder(p.Src, p.CF)
	if err != nil {
		return nil, fmt.Errorf("rowconv: %s: %w", p.Src, err)
	}
	c := &Conv{size: p.Src.Size(), dec: dec, post: post{norm: p.Norm, mean: p.Mean, std: p.Std,
		clip: p.Norm && p.Clip, lo: p.ClipMin, hi: p.ClipMax, nanFill: p.NaNFill, fill: p.Fill}}
	switch c.size {
	case 1:
		c.lut8 = new([1 << 8]float32)
		c.fillTable(c.lut8[:])
		c.tab = &c.lut8[0]
	case 2:
		c.lut16 = new([1 << 16]float32)
		c.fillTable(c.lut16[:])
		c.tab = &c.lut16[0]
	default:
		c.copy = p.CF.Scale == 1 && p.CF.Offset == 0 && !hasMask(p.CF.Masks) && !p.Norm && !p.NaNFill
	}
	setKernels(c, p)
	return c, nil
}

// hasMask reports whether masks hold a value the decoder masks (it ignores NaN).
func hasMask(masks []float64) bool {
	for _, m := range masks {
		if !math.IsNaN(m) {
			return true
		}
	}
	return false
}

// fillTable stores in t[b] the final value of raw bit pattern b: the decoder's value,
// then post.
func (c *Conv) fillTable(t []float32) {
	c.dec.Decode(t, patterns(c.size))
	c.postRow(t)
}

// patterns returns every raw bit pattern of a 1- or 2-byte type, in order (host byte
// order).
func patterns(size int) []byte {
	raw := make([]byte, size<<(8*size))
	for b := range 1 << (8 * size) {
		if size == 1 {
			raw[b] = byte(b)
		} else {
			*(*uint16)(unsafe.Pointer(&raw[2*b])) = uint16(b)
		}
	}
	return raw
}

// ahead is the kernels' next argument: the start of next when it holds n rows of m values
// of size bytes, srcStride values apart; nil otherwise.
func ahead(next []byte, size, srcStride, n, m int) *byte {
	if n <= 0 || len(next) < ((n-1)*srcStride+m)*size {
		return nil
	}
	return &next[0]
}

func (c *Conv) postRow(dst []float32) {
	if !c.post.norm && !c.post.nanFill {
		return
	}
	for i, v := range dst {
		dst[i] = c.post.apply(v)
	}
}

// Value converts the one stored value at the start of src.
func (c *Conv) Value(src []byte) float32 {
	switch {
	case c.lut8 != nil:
		return c.lut8[src[0]]
	case c.lut16 != nil:
		return c.lut16[*(*uint16)(unsafe.Pointer(&src[:2][0]))]
	}
	if c.dec.Identity() { // float32 as stored: read in place (a decode into a local would escape)
		return c.post.apply(*(*float32)(unsafe.Pointer(&src[:4][0])))
	}
	var v [1]float32
	c.dec.Decode(v[:], src[:4])
	return c.post.apply(v[0])
}

// Row converts len(dst) stored values from src (len(dst)*Src.Size() bytes at least,
// host byte order) into dst.
func (c *Conv) Row(dst []float32, src []byte) {
	c.Rows(dst, len(dst), src, len(dst), 1, len(dst))
}

// RowNT is Row with non-temporal stores to dst where the CPU has them (see Fence).
func (c *Conv) RowNT(dst []float32, src []byte) {
	c.RowsNT(dst, len(dst), src, len(dst), 1, len(dst))
}

// Rows converts n rows of m values: row r is read from the m stored values at element
// r*srcStride of src (strides count values, not bytes, as in the sampler's copyRows)
// and written to dst[r*dstStride : r*dstStride+m].
func (c *Conv) Rows(dst []float32, dstStride int, src []byte, srcStride, n, m int) {
	c.RowsThen(dst, dstStride, src, srcStride, n, m, false, nil)
}

// RowsNT is Rows with non-temporal stores to dst where the CPU has them.
func (c *Conv) RowsNT(dst []float32, dstStride int, src []byte, srcStride, n, m int) {
	c.RowsThen(dst, dstStride, src, srcStride, n, m, true, nil)
}

// RowsThen is Rows (RowsNT with nt) that also prefetches the rows of the call to come: next
// is that call's src from its first row on (rows srcStride values apart, as here), and its
// row r is prefetched while row r here is converted, so that a gather's next piece does
// not start on cache misses. nil or too short a next (fewer than n rows): no prefetch.
func (c *Conv) RowsThen(dst []float32, dstStride int, src []byte, srcStride, n, m int, nt bool, next []byte) {
	if !checkRows(len(dst), dstStride, len(src)/c.size, srcStride, n, m) {
		return
	}
	if k := c.kern[path]; k != nil {
		k(c.a, c.tab, &dst[0], 4*dstStride, &src[0], c.size*srcStride, n, m, c.flags|ntFlag(nt), ahead(next, c.size, srcStride, n, m))
		return
	}
	switch {
	case c.lut8 != nil:
		lut8RowsGo(c.lut8, dst, dstStride, src, srcStride, n, m)
	case c.lut16 != nil:
		lut16RowsGo(c.lut16, dst, dstStride, unsafe.Slice((*uint16)(unsafe.Pointer(&src[0])), len(src)/2), srcStride, n, m)
	case c.copy:
		copyRowsGo(dst, dstStride, unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), len(src)/4), srcStride, n, m)
	default:
		for r := 0; r < n; r++ {
			d := dst[r*dstStride : r*dstStride+m]
			c.dec.Decode(d, src[r*srcStride*4:])
			c.postRow(d)
		}
	}
}
