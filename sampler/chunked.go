package sampler

import (
	"fmt"
	"math"
	"sync"

	"github.com/gobatch/gobatch/readers/zarr"
)

// chunked is one source's data array as seen through the cache: chunk grid arithmetic, the
// cache key of a chunk, and the loader that decodes a chunk into float32 (CF decoding, then the
// normalisation of channel axis chanAxis, then the NaN policy).
type chunked struct {
	id      uint64 // the source's index, the high bits of its cache keys
	what    string // "source[0] (satellite.zarr/data)", for messages
	arr     Array
	shape   []int
	chunks  []int
	grid    []int // chunks along each dimension
	gstride []int // linear chunk index strides
	elems   int   // values per chunk
	conv    *zarr.Float32Decoder
	itemLen int

	chanAxis  int       // -1: normalise with mean[0], std[0] (or not at all)
	normMean  []float64 // per channel of the store (identity where unselected); nil: none
	normStd   []float64
	nanToZero bool

	scratch sync.Pool // *[]byte of elems * itemLen: the native chunk
	load    chunkLoader
	idxPool sync.Pool // *[]int: chunk coordinates
}

const keyShift = 48

func newChunked(id int, what string, arr Array) (*chunked, error) {
	c := &chunked{id: uint64(id), what: what, arr: arr, shape: arr.Shape(), chunks: arr.Chunks(), chanAxis: -1}
	if len(c.shape) != len(c.chunks) {
		return nil, fmt.Errorf("%s: shape %v and chunks %v differ in rank", what, c.shape, c.chunks)
	}
	conv, err := newDecoder(arr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.conv = conv
	_, c.itemLen = arr.Native()
	n := len(c.shape)
	c.grid = make([]int, n)
	c.gstride = make([]int, n)
	c.elems = 1
	total := 1
	for d := n - 1; d >= 0; d-- {
		if c.chunks[d] < 1 || c.shape[d] < 0 {
			return nil, fmt.Errorf("%s: invalid chunk shape %v", what, c.chunks)
		}
		c.grid[d] = (c.shape[d] + c.chunks[d] - 1) / c.chunks[d]
		c.gstride[d] = total
		total *= max(c.grid[d], 1)
		c.elems *= c.chunks[d]
	}
	if total >= 1<<keyShift {
		return nil, fmt.Errorf("%s: %d chunks; at most 2^%d are supported", what, total, keyShift)
	}
	c.load = c.loadChunk
	return c, nil
}

// chunkBytes is the decoded (float32) size of one chunk.
func (c *chunked) chunkBytes() int64 { return int64(c.elems) * 4 }

// key is the cache key of the chunk with linear grid index lin.
func (c *chunked) key(lin int) uint64 { return c.id<<keyShift | uint64(lin) }

func (c *chunked) loadChunk(key uint64, dst []float32) error {
	lin := int(key & (1<<keyShift - 1))
	ip, _ := c.idxPool.Get().(*[]int)
	if ip == nil {
		s := make([]int, len(c.shape))
		ip = &s
	}
	idx := *ip
	for d := range idx {
		idx[d] = lin / c.gstride[d] % c.grid[d]
	}
	bp, _ := c.scratch.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, c.elems*c.itemLen)
		bp = &b
	}
	err := c.arr.DecodeChunk(idx, *bp)
	if err == nil {
		c.conv.Decode(dst, *bp)
		c.postprocess(idx, dst)
	} else {
		err = fmt.Errorf("%s: chunk %v: %w", c.what, idx, err)
	}
	c.scratch.Put(bp)
	c.idxPool.Put(ip)
	return err
}

// postprocess applies the normalisation and the NaN policy to a converted chunk.
func (c *chunked) postprocess(idx []int, dst []float32) {
	if c.normMean != nil {
		if c.chanAxis < 0 {
			m, s := c.normMean[0], c.normStd[0]
			for i, v := range dst {
				dst[i] = float32((float64(v) - m) / s)
			}
		} else {
			outer, inner := 1, 1
			for d := 0; d < c.chanAxis; d++ {
				outer *= c.chunks[d]
			}
			for d := c.chanAxis + 1; d < len(c.chunks); d++ {
				inner *= c.chunks[d]
			}
			cc := c.chunks[c.chanAxis]
			ch0 := idx[c.chanAxis] * cc
			for o := 0; o < outer; o++ {
				for k := 0; k < cc; k++ {
					ch := ch0 + k
					if ch >= len(c.normMean) {
						break // past the array's edge: never read
					}
					m, s := c.normMean[ch], c.normStd[ch]
					if m == 0 && s == 1 {
						continue
					}
					blk := dst[(o*cc+k)*inner : (o*cc+k+1)*inner]
					for i, v := range blk {
						blk[i] = float32((float64(v) - m) / s)
					}
				}
			}
		}
	}
	if c.nanToZero {
		for i, v := range dst {
			if v != v {
				dst[i] = 0
			}
		}
	}
}

// setNormalisation installs per-channel mean and std for the selected store channels.
func (c *chunked) setNormalisation(chanAxis int, selected []int, mean, std []float64) {
	if mean == nil {
		return
	}
	if chanAxis < 0 {
		c.normMean, c.normStd = mean[:1], std[:1]
		return
	}
	n := c.shape[chanAxis]
	c.chanAxis = chanAxis
	c.normMean = make([]float64, n)
	c.normStd = make([]float64, n)
	for i := range c.normStd {
		c.normStd[i] = 1
	}
	for j, ch := range selected {
		c.normMean[ch], c.normStd[ch] = mean[j], std[j]
	}
}

// fillValue is what a dropped-out (or otherwise absent) value becomes.
func (c *chunked) fillValue() float32 {
	if c.nanToZero {
		return 0
	}
	return float32(math.NaN())
}
