package zarr

import (
	"fmt"
	"runtime"
	"unsafe"
)

type serializer uint8

const (
	serBytes serializer = iota // fixed-size elements, optionally byte-swapped
	serVlen                    // vlen-utf8 strings
	serShard                   // sharding_indexed
)

// pipeline decodes one stored chunk of a fixed shape into elements of dtype in host
// byte order and C order.
type pipeline struct {
	dtype   DType
	shape   []int
	nelem   int
	b2b     []bytesCodec // encode order
	filters []flatFilter // v2 filters, encode order
	ser     serializer
	big     bool        // serBytes: stored big-endian
	shard   *shardCodec // serShard
	strides []int       // non-nil: stored layout strides (elements) per decoded dim (F order, transpose)
	encSize int         // bytes the serializer reads (-1 unknown)
	wants   []int       // decoded size of each b2b codec's output (-1 unknown)
	fill    []byte      // one fill element, host order
}

func (p *pipeline) decodedSize() int { return p.nelem * p.dtype.Size }

// maxEncoded bounds the size of one object this pipeline decodes (a chunk, or a shard with
// its index), or is -1 when nothing bounds it (variable-length strings). It starts from the
// serializer's size and adds each bytes codec's worst case: a checksum its fixed overhead, a
// compressor the framing it adds to data that does not compress, which n/16 + 1 KiB covers
// for every compressor read here (blosc adds 16 or 32 bytes, lz4 and zstd about n/255,
// zlib and gzip 5 bytes per 16 KiB block, bz2 1% and 600 bytes). A store refuses a value
// larger than this before reading it (LimitedStore).
func (p *pipeline) maxEncoded() int64 {
	var n int64
	switch p.ser {
	case serBytes:
		n = int64(p.encSize)
	case serShard:
		inner := p.shard.inPipe.maxEncoded()
		if inner < 0 {
			return -1
		}
		n = int64(p.shard.n)*inner + int64(p.shard.idxSize)
	default:
		return -1
	}
	for _, c := range p.b2b {
		if f, ok := c.(fixedOverhead); ok {
			n += int64(f.overhead())
		} else {
			n += n/16 + 1024
		}
	}
	return n
}

// setWants works out the size each bytes codec decodes to, from the serializer's
// size outwards, through codecs that change the size by a fixed amount (checksums).
func (p *pipeline) setWants() {
	p.wants = make([]int, len(p.b2b))
	n := p.encSize
	for i, c := range p.b2b {
		p.wants[i] = n
		if n >= 0 {
			if f, ok := c.(fixedOverhead); ok {
				n += f.overhead()
			} else {
				n = -1
			}
		}
	}
}

// chainFilters checks that each filter decodes to the element size the next one (or
// the array) wants, and returns the element size the filters store (what the last
// one encodes to). Messages call the filters noun ("filter" in v2, "codec" in v3).
func (p *pipeline) chainFilters(noun string) (int, error) {
	want := p.dtype.Size
	for _, f := range p.filters {
		if f.decSize() != want {
			return 0, fmt.Errorf("%s %s decodes to %d-byte elements, want %d", noun, f.name(), f.decSize(), want)
		}
		want = f.encSize()
	}
	return want, nil
}

// scratch buffers, pooled.
type scratch struct {
	buf [2][]byte
	idx []uint64
}

// scratches is a bounded free list rather than a sync.Pool: a sync.Pool is emptied
// by every garbage collection, and re-allocating chunk-sized buffers then costs more
// than keeping a few.
var scratches = make(chan *scratch, 4*runtime.GOMAXPROCS(0))

func getScratch() *scratch {
	select {
	case sc := <-scratches:
		return sc
	default:
		return new(scratch)
	}
}

func putScratch(sc *scratch) {
	select {
	case scratches <- sc:
	default:
	}
}

func sameBase(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && unsafe.SliceData(a[:1]) == unsafe.SliceData(b[:1])
}

// within reports whether a's data lies in b's backing array (a codec such as a
// checksum returned a sub-slice of its input).
func within(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a[:1])))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
	return pa >= pb && pa < pb+uintptr(cap(b))
}

// decode decodes the stored chunk src into dst (len == decodedSize()) for fixed-size
// dtypes. src is not modified. The steps run in decode order: bytes codecs, the
// serializer, v2 filters, byte order, then the layout into dst.
func (p *pipeline) decode(src, dst []byte) error {
	if p.ser == serVlen {
		return fmt.Errorf("variable-length strings decode with ReadStrings: %w", ErrUnsupported)
	}
	if len(dst) != p.decodedSize() {
		return fmt.Errorf("decode: destination is %d bytes, chunk is %d", len(dst), p.decodedSize())
	}
	sc := getScratch()
	defer putScratch(sc)
	bufs := chunkBufs{sc: sc, cur: -1}
	b, err := p.decodeBytesCodecs(&bufs, src, dst)
	if err != nil {
		return err
	}
	if b, err = p.deserialize(&bufs, b, dst); err != nil {
		return err
	}
	if b, err = p.decodeFilters(&bufs, b, dst); err != nil {
		return err
	}
	if p.big && p.ser == serBytes {
		b = p.toHostOrder(&bufs, b, src, dst)
	}
	p.place(b, dst)
	return nil
}

// chunkBufs tracks where one decode's intermediate bytes live, so that each step
// writes into the scratch buffer the bytes it reads are not in.
type chunkBufs struct {
	sc  *scratch
	cur int // which sc.buf holds the current bytes (-1: src or dst)
}

// spare returns the index of the scratch buffer that does not hold the current bytes.
func (c *chunkBufs) spare() int {
	if c.cur == 0 {
		return 1
	}
	return 0
}

// take sizes the spare scratch buffer to n bytes and makes it the current one.
func (c *chunkBufs) take(n int) []byte {
	j := c.spare()
	c.sc.buf[j] = grow(c.sc.buf[j], n)
	c.cur = j
	return c.sc.buf[j]
}

// rewritesAfterSerializer reports whether v2 filters or a transpose still rewrite the
// serializer's output: then no earlier step may write it into dst.
func (p *pipeline) rewritesAfterSerializer() bool {
	return len(p.filters) > 0 || p.strides != nil
}

// decodeBytesCodecs runs the bytes-to-bytes codecs on src, last (outermost) first. The
// innermost one writes straight into dst when its output is the array's bytes as they
// are; the others write into scratch. A codec may return a sub-slice of its input (a
// checksum does); the current buffer then stays what it was.
func (p *pipeline) decodeBytesCodecs(bufs *chunkBufs, src, dst []byte) ([]byte, error) {
	direct := !p.rewritesAfterSerializer() && p.ser == serBytes
	b := src
	for i := len(p.b2b) - 1; i >= 0; i-- {
		var out []byte
		j := bufs.spare()
		if i == 0 && direct {
			out, j = dst, -1
		} else {
			out = bufs.sc.buf[j]
		}
		r, err := p.b2b[i].decode(out, b, p.wants[i])
		if err != nil {
			return nil, wrapCodec(p.b2b[i].name(), err)
		}
		if !within(r, b) {
			if j >= 0 {
				bufs.sc.buf[j] = r // keep what the codec grew
			}
			bufs.cur = j
		}
		b = r
	}
	return b, nil
}

// deserialize runs the array-to-bytes codec on b. A shard decodes its inner chunks into
// dst, or into scratch when later steps still rewrite them; plain bytes only have their
// size checked, named after the codec that produced them.
func (p *pipeline) deserialize(bufs *chunkBufs, b, dst []byte) ([]byte, error) {
	switch p.ser {
	case serShard:
		target := dst
		if p.rewritesAfterSerializer() {
			target = bufs.take(p.nelem * p.dtype.Size)
		}
		if err := p.shard.decodeShard(b, target); err != nil {
			return nil, wrapCodec("sharding_indexed", err)
		}
		return target, nil
	case serBytes:
		if len(b) != p.encSize {
			name := "bytes"
			if len(p.b2b) > 0 {
				name = p.b2b[0].name()
			}
			return nil, wrapCodec(name, corruptf("chunk holds %d bytes, want %d", len(b), p.encSize))
		}
	}
	return b, nil
}

// decodeFilters runs the v2 filters on b, last first. The first filter writes into dst
// unless a transpose still has to reorder its output.
func (p *pipeline) decodeFilters(bufs *chunkBufs, b, dst []byte) ([]byte, error) {
	for i := len(p.filters) - 1; i >= 0; i-- {
		f := p.filters[i]
		var out []byte
		if i == 0 && p.strides == nil {
			out = dst
		} else {
			out = bufs.take(p.nelem * f.decSize())
		}
		if err := f.decode(out, b, p.nelem); err != nil {
			return nil, wrapCodec(f.name(), err)
		}
		b = out
	}
	return b, nil
}

// toHostOrder byte-swaps big-endian elements in place. Bytes that are still src's (no
// codec copied them) are copied out first: the caller's, or the store's, bytes are
// never written.
func (p *pipeline) toHostOrder(bufs *chunkBufs, b, src, dst []byte) []byte {
	if within(b, src) {
		target := dst
		if p.strides != nil {
			target = bufs.take(len(b))
		}
		copy(target, b)
		b = target[:len(b)]
	}
	byteSwap(b, p.dtype.swapUnit())
	return b
}

// place puts the decoded elements b into dst in C order: gathered through the stored
// strides, copied, or left where they are when a step already wrote them into dst.
func (p *pipeline) place(b, dst []byte) {
	if p.strides != nil {
		gatherStrided(dst, b, p.shape, p.strides, p.dtype.Size)
		return
	}
	if !sameBase(b, dst) {
		copy(dst, b)
	}
}
