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
// dtypes. src is not modified.
func (p *pipeline) decode(src, dst []byte) error {
	if p.ser == serVlen {
		return fmt.Errorf("variable-length strings decode with ReadStrings: %w", ErrUnsupported)
	}
	if len(dst) != p.decodedSize() {
		return fmt.Errorf("decode: destination is %d bytes, chunk is %d", len(dst), p.decodedSize())
	}
	sc := getScratch()
	defer putScratch(sc)
	post := len(p.filters) > 0 || p.strides != nil
	b := src
	cur := -1 // which sc.buf holds b (-1: src or dst)
	for i := len(p.b2b) - 1; i >= 0; i-- {
		want := p.wants[i]
		var out []byte
		j := 0
		if cur == 0 {
			j = 1
		}
		if i == 0 && !post && p.ser == serBytes {
			out, j = dst, -1
		} else {
			out = sc.buf[j]
		}
		r, err := p.b2b[i].decode(out, b, want)
		if err != nil {
			return wrapCodec(p.b2b[i].name(), err)
		}
		if !within(r, b) {
			if j >= 0 {
				sc.buf[j] = r
			}
			cur = j
		}
		b = r
	}
	switch p.ser {
	case serShard:
		target := dst
		if post {
			j := 0
			if cur == 0 {
				j = 1
			}
			sc.buf[j] = grow(sc.buf[j], p.nelem*p.dtype.Size)
			target, cur = sc.buf[j], j
		}
		if err := p.shard.decodeShard(b, target); err != nil {
			return wrapCodec("sharding_indexed", err)
		}
		b = target
	case serBytes:
		if len(b) != p.encSize {
			name := "bytes"
			if len(p.b2b) > 0 {
				name = p.b2b[0].name()
			}
			return wrapCodec(name, corruptf("chunk holds %d bytes, want %d", len(b), p.encSize))
		}
	}
	for i := len(p.filters) - 1; i >= 0; i-- {
		f := p.filters[i]
		var out []byte
		if i == 0 && p.strides == nil {
			out = dst
		} else {
			j := 0
			if cur == 0 {
				j = 1
			}
			sc.buf[j] = grow(sc.buf[j], p.nelem*f.decSize())
			out, cur = sc.buf[j], j
		}
		if err := f.decode(out, b, p.nelem); err != nil {
			return wrapCodec(f.name(), err)
		}
		b = out
	}
	if p.big && p.ser == serBytes {
		if within(b, src) {
			// Never write into the caller's (or the store's) bytes.
			target := dst
			if p.strides != nil {
				j := 0
				if cur == 0 {
					j = 1
				}
				sc.buf[j] = grow(sc.buf[j], len(b))
				target = sc.buf[j]
			}
			copy(target, b)
			b = target[:len(b)]
		}
		byteSwap(b, p.dtype.swapUnit())
	}
	if p.strides != nil {
		gatherStrided(dst, b, p.shape, p.strides, p.dtype.Size)
		return nil
	}
	if !sameBase(b, dst) {
		copy(dst, b)
	}
	return nil
}
