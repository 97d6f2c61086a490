package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
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

// buildV2Pipeline builds the pipeline of a v2 array.
func buildV2Pipeline(m *arrayMeta) (*pipeline, error) {
	p := &pipeline{dtype: m.dtype, shape: m.chunks, fill: m.fill, big: m.dtype.BigEndian && m.dtype.swapUnit() > 0}
	p.nelem = prod(m.chunks)
	// The codecs are the filters then the compressor. Bytes-to-bytes codecs
	// (compressors, checksums) at the end of the list decode first.
	nb := len(m.codecs)
	for nb > 0 {
		if _, ok := newBytesCodec(m.codecs[nb-1].Name, m.codecs[nb-1].Config); !ok || strings.HasPrefix(m.codecs[nb-1].Name, "numcodecs.") {
			break
		}
		nb--
	}
	for _, c := range m.codecs[nb:] {
		bc, _ := newBytesCodec(c.Name, c.Config)
		p.b2b = append(p.b2b, bc)
	}
	for _, c := range m.codecs[:nb] {
		if _, ok := newBytesCodec(c.Name, c.Config); ok {
			return nil, fmt.Errorf("filter %s before an array filter: %w", c.Name, ErrUnsupported)
		}
		if c.Name == "vlen-utf8" || c.Name == "vlen-bytes" {
			if (c.Name == "vlen-utf8") != (m.dtype.Kind == KindString) || !m.dtype.variable() {
				return nil, fmt.Errorf("filter %s on dtype %s", c.Name, m.dtype)
			}
			if p.ser == serVlen || len(p.filters) > 0 {
				return nil, fmt.Errorf("filter %s must be the only filter: %w", c.Name, ErrUnsupported)
			}
			p.ser = serVlen
			continue
		}
		if m.dtype.variable() {
			return nil, fmt.Errorf("unsupported filter %s on an object array: %w", c.Name, ErrUnsupported)
		}
		f, err := newFlatFilter(c, m.dtype)
		if err != nil {
			return nil, err
		}
		p.filters = append(p.filters, f)
	}
	if m.dtype.variable() && p.ser != serVlen {
		return nil, fmt.Errorf("object dtype without a vlen-utf8 or vlen-bytes filter: %w", ErrUnsupported)
	}
	// Filter sizes must chain.
	want := m.dtype.Size
	for _, f := range p.filters {
		if f.decSize() != want {
			return nil, fmt.Errorf("filter %s decodes to %d-byte elements, want %d", f.name(), f.decSize(), want)
		}
		want = f.encSize()
	}
	p.encSize = p.nelem * want
	if p.ser == serVlen {
		p.encSize = -1
	}
	p.setWants()
	if m.order == 'F' && len(m.chunks) > 1 && p.ser == serBytes {
		p.strides = make([]int, len(m.chunks))
		s := 1
		for d := range m.chunks {
			p.strides[d] = s
			s *= m.chunks[d]
		}
	}
	return p, nil
}

// buildV3Pipeline builds the pipeline for codecs decoding chunks of shape and dtype.
func buildV3Pipeline(codecs []CodecInfo, shape []int, dtype DType, fill []byte) (*pipeline, error) {
	p := &pipeline{dtype: dtype, shape: shape, nelem: prod(shape), fill: fill, encSize: -1}
	var order []int // composite transpose
	i := 0
	for ; i < len(codecs); i++ {
		c := codecs[i]
		if isV3FlatFilter(c.Name) {
			// numcodecs' array->array codecs (numcodecs.zarr3) work on the chunk
			// flattened in C order, as the v2 filters do.
			if order != nil {
				return nil, fmt.Errorf("codec %s after transpose: %w", c.Name, ErrUnsupported)
			}
			cfg := c
			if len(cfg.Config) == 0 || isJSONNull(cfg.Config) {
				cfg.Config = json.RawMessage("{}")
			}
			f, err := newFlatFilter(cfg, dtype)
			if err != nil {
				return nil, err
			}
			dec, enc := flatFilterTypes(f)
			for _, d := range []DType{dec, enc} {
				if d.BigEndian && d.swapUnit() > 0 {
					return nil, fmt.Errorf("codec %s: big-endian dtype %s: %w", c.Name, d, ErrUnsupported)
				}
			}
			p.filters = append(p.filters, f)
			continue
		}
		if c.Name != "transpose" {
			break
		}
		if len(p.filters) > 0 {
			return nil, fmt.Errorf("codec transpose after %s: %w", p.filters[len(p.filters)-1].name(), ErrUnsupported)
		}
		o, err := transposeOrder(c.Config, len(shape))
		if err != nil {
			return nil, fmt.Errorf("codec transpose: %w", err)
		}
		if order == nil {
			order = o
		} else {
			comp := make([]int, len(o))
			for k := range o {
				comp[k] = order[o[k]]
			}
			order = comp
		}
	}
	if i == len(codecs) {
		return nil, fmt.Errorf("codecs: no array->bytes codec")
	}
	c := codecs[i]
	// The serializer stores the elements the last filter encodes to.
	stored := dtype
	if len(p.filters) > 0 {
		if c.Name != "bytes" && c.Name != "endian" {
			return nil, fmt.Errorf("codec %s after numcodecs array filters: %w", c.Name, ErrUnsupported)
		}
		want := dtype.Size
		for _, f := range p.filters {
			if f.decSize() != want {
				return nil, fmt.Errorf("codec %s decodes to %d-byte elements, want %d", f.name(), f.decSize(), want)
			}
			want = f.encSize()
		}
		_, stored = flatFilterTypes(p.filters[len(p.filters)-1])
	}
	switch c.Name {
	case "bytes", "endian":
		var cfg struct {
			Endian *string `json:"endian"`
		}
		if len(c.Config) > 0 {
			if err := json.Unmarshal(c.Config, &cfg); err != nil {
				return nil, fmt.Errorf("codec bytes: %w", err)
			}
		}
		if cfg.Endian != nil {
			switch *cfg.Endian {
			case "little":
			case "big":
				if len(p.filters) == 0 {
					p.big = dtype.swapUnit() > 0
				} else if stored.swapUnit() > 0 {
					return nil, fmt.Errorf("codec bytes: big endian after numcodecs array filters: %w", ErrUnsupported)
				}
			default:
				return nil, fmt.Errorf("codec bytes: bad endian %q", *cfg.Endian)
			}
		} else if stored.Size > 1 && stored.swapUnit() > 0 {
			return nil, fmt.Errorf("codec bytes: endian is required for %s", stored)
		}
		if dtype.variable() {
			return nil, fmt.Errorf("codec bytes cannot encode %s", dtype)
		}
		p.encSize = p.nelem * stored.Size
	case "vlen-utf8", "vlen-bytes":
		if (c.Name == "vlen-utf8") != (dtype.Kind == KindString) || !dtype.variable() {
			return nil, fmt.Errorf("codec %s on data_type %s", c.Name, dtype)
		}
		p.ser = serVlen
	case "sharding_indexed":
		if dtype.variable() {
			return nil, fmt.Errorf("sharding of variable-length strings: %w", ErrUnsupported)
		}
		sh, err := newShardCodec(c, permuteShape(shape, order), dtype, fill)
		if err != nil {
			return nil, fmt.Errorf("codec sharding_indexed: %w", err)
		}
		p.ser, p.shard = serShard, sh
	default:
		if _, ok := newBytesCodec(c.Name, c.Config); ok {
			return nil, fmt.Errorf("codec %s is bytes->bytes, but an array->bytes codec must come first", c.Name)
		}
		return nil, fmt.Errorf("unsupported codec %s: %w", c.Name, ErrUnsupported)
	}
	for _, c := range codecs[i+1:] {
		bc, ok := newBytesCodec(c.Name, c.Config)
		if !ok {
			return nil, fmt.Errorf("unsupported codec %s (after the array->bytes codec): %w", c.Name, ErrUnsupported)
		}
		p.b2b = append(p.b2b, bc)
	}
	p.setWants()
	if order != nil && !isIdentity(order) {
		if p.ser == serVlen {
			return nil, fmt.Errorf("transpose of variable-length strings: %w", ErrUnsupported)
		}
		// Stored array B has shape B[k] = A[order[k]] in C order; decoded dim order[k]
		// has B's stride k.
		bshape := permuteShape(shape, order)
		bstr := cStrides(bshape)
		p.strides = make([]int, len(shape))
		for k, d := range order {
			p.strides[d] = bstr[k]
		}
	}
	return p, nil
}

// isV3FlatFilter reports whether name is one of numcodecs' array->array codecs in
// their zarr v3 form, which decode like the v2 filters of the same id.
func isV3FlatFilter(name string) bool {
	switch name {
	case "numcodecs.delta", "numcodecs.fixedscaleoffset", "numcodecs.quantize", "numcodecs.bitround", "numcodecs.astype":
		return true
	}
	return false
}

// flatFilterTypes returns the element types a filter decodes to and from.
func flatFilterTypes(f flatFilter) (dec, enc DType) {
	switch f := f.(type) {
	case deltaFilter:
		return f.dtype, f.astype
	case fsoFilter:
		return f.dtype, f.astype
	case castFilter:
		return f.dtype, f.astype
	}
	panic(fmt.Sprintf("zarr: flatFilterTypes: filter %s", f.name()))
}

func transposeOrder(cfg json.RawMessage, ndim int) ([]int, error) {
	var c struct {
		Order json.RawMessage `json:"order"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, err
	}
	var s string
	if json.Unmarshal(c.Order, &s) == nil {
		o := make([]int, ndim)
		for k := range o {
			switch s {
			case "C":
				o[k] = k
			case "F":
				o[k] = ndim - 1 - k
			default:
				return nil, fmt.Errorf("bad order %q", s)
			}
		}
		return o, nil
	}
	var o []int
	if err := json.Unmarshal(c.Order, &o); err != nil {
		return nil, fmt.Errorf("bad order %s", string(c.Order))
	}
	if len(o) != ndim {
		return nil, fmt.Errorf("order %v for %d dimensions", o, ndim)
	}
	seen := make([]bool, ndim)
	for _, v := range o {
		if v < 0 || v >= ndim || seen[v] {
			return nil, fmt.Errorf("order %v is not a permutation", o)
		}
		seen[v] = true
	}
	return o, nil
}

func permuteShape(shape, order []int) []int {
	if order == nil {
		return shape
	}
	out := make([]int, len(shape))
	for k, d := range order {
		out[k] = shape[d]
	}
	return out
}

func isIdentity(o []int) bool {
	for k, v := range o {
		if k != v {
			return false
		}
	}
	return true
}

func cStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = acc
		acc *= shape[d]
	}
	return s
}

func prod(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
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

// byteSwap reverses the bytes of every unit-sized group of b.
func byteSwap(b []byte, unit int) {
	switch unit {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	default:
		for i := 0; i+unit <= len(b); i += unit {
			for l, r := i, i+unit-1; l < r; l, r = l+1, r-1 {
				b[l], b[r] = b[r], b[l]
			}
		}
	}
}

// gatherStrided writes the C-order array of shape into dst, reading element idx of
// src at sum(idx[d]*strides[d]).
func gatherStrided(dst, src []byte, shape, strides []int, es int) {
	nd := len(shape)
	if prod(shape) == 0 {
		return
	}
	var idx [MaxDims]int
	last := nd - 1
	n := shape[last]
	st := strides[last] * es
	o := 0
	for {
		base := 0
		for d := 0; d < last; d++ {
			base += idx[d] * strides[d]
		}
		base *= es
		row := dst[o : o+n*es]
		switch es {
		case 1:
			for k := 0; k < n; k++ {
				row[k] = src[base+k*st]
			}
		case 2:
			for k := 0; k < n; k++ {
				copy(row[2*k:2*k+2], src[base+k*st:])
			}
		case 4:
			for k := 0; k < n; k++ {
				binary.LittleEndian.PutUint32(row[4*k:], binary.LittleEndian.Uint32(src[base+k*st:]))
			}
		case 8:
			for k := 0; k < n; k++ {
				binary.LittleEndian.PutUint64(row[8*k:], binary.LittleEndian.Uint64(src[base+k*st:]))
			}
		default:
			for k := 0; k < n; k++ {
				copy(row[k*es:(k+1)*es], src[base+k*st:])
			}
		}
		o += n * es
		d := last - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// fillElems repeats the element e over dst.
func fillElems(dst, e []byte) {
	zero := true
	for _, c := range e {
		if c != 0 {
			zero = false
			break
		}
	}
	if zero || len(e) == 0 {
		clear(dst)
		return
	}
	if len(dst) < len(e) {
		return
	}
	copy(dst, e)
	for n := len(e); n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
}

// copyBox copies the C-order block src (shape bshape) into dst (C-order, shape
// dshape) at origin; the block lies inside dst.
func copyBox(dst []byte, dshape []int, src []byte, bshape []int, origin []int, es int) {
	nd := len(dshape)
	if prod(bshape) == 0 {
		return
	}
	dstr := cStrides(dshape)
	var idx [MaxDims]int
	last := nd - 1
	run := bshape[last] * es
	so := 0
	for {
		do := 0
		for d := 0; d < nd; d++ {
			do += (origin[d] + idx[d]) * dstr[d]
		}
		do *= es
		copy(dst[do:do+run], src[so:so+run])
		so += run
		d := last - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < bshape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// shardCodec is sharding_indexed.
type shardCodec struct {
	shape   []int // shard shape (as the codec sees it)
	inner   []int // inner chunk shape
	cps     []int // inner chunks per shard, per dim
	n       int   // inner chunks per shard
	inPipe  *pipeline
	idxPipe *pipeline
	idxSize int
	atEnd   bool
	es      int
	fill    []byte
}

const shardEmpty = math.MaxUint64

func newShardCodec(c CodecInfo, shape []int, dtype DType, fill []byte) (*shardCodec, error) {
	var cfg struct {
		ChunkShape    []int  `json:"chunk_shape"`
		IndexLocation string `json:"index_location"`
	}
	if err := json.Unmarshal(c.Config, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.ChunkShape) != len(shape) {
		return nil, fmt.Errorf("chunk_shape %v for a %d-d shard", cfg.ChunkShape, len(shape))
	}
	s := &shardCodec{shape: shape, inner: cfg.ChunkShape, cps: make([]int, len(shape)), n: 1, es: dtype.Size, fill: fill}
	for d := range shape {
		if s.inner[d] <= 0 || shape[d]%s.inner[d] != 0 {
			return nil, fmt.Errorf("chunk_shape %v does not divide the shard shape %v", s.inner, shape)
		}
		s.cps[d] = shape[d] / s.inner[d]
		s.n *= s.cps[d]
	}
	if s.n > 1<<28 {
		return nil, fmt.Errorf("%d inner chunks per shard: too many", s.n)
	}
	switch cfg.IndexLocation {
	case "", "end":
		s.atEnd = true
	case "start":
	default:
		return nil, fmt.Errorf("bad index_location %q", cfg.IndexLocation)
	}
	if len(c.Inner) == 0 {
		return nil, fmt.Errorf("no inner codecs")
	}
	var err error
	if s.inPipe, err = buildV3Pipeline(c.Inner, s.inner, dtype, fill); err != nil {
		return nil, fmt.Errorf("inner codecs: %w", err)
	}
	idxShape := append(append([]int{}, s.cps...), 2)
	u64 := DType{Kind: KindUint, Size: 8, name: "uint64"}
	if len(c.IndexCodecs) == 0 {
		return nil, fmt.Errorf("no index_codecs")
	}
	if s.idxPipe, err = buildV3Pipeline(c.IndexCodecs, idxShape, u64, make([]byte, 8)); err != nil {
		return nil, fmt.Errorf("index_codecs: %w", err)
	}
	if s.idxPipe.ser != serBytes {
		return nil, fmt.Errorf("index_codecs: %w (only bytes, transpose and crc32c)", ErrUnsupported)
	}
	s.idxSize = 16 * s.n
	for _, bc := range s.idxPipe.b2b {
		if _, ok := bc.(checksumCodec); !ok {
			return nil, fmt.Errorf("index codec %s: %w (the index must have a fixed size)", bc.name(), ErrUnsupported)
		}
		s.idxSize += 4
	}
	return s, nil
}

// readIndex decodes the shard index held in raw (exactly idxSize bytes) into idx.
func (s *shardCodec) readIndex(raw []byte, idx []uint64) ([]uint64, error) {
	if len(raw) != s.idxSize {
		return nil, corruptf("shard index is %d bytes, want %d", len(raw), s.idxSize)
	}
	if cap(idx) < 2*s.n {
		idx = make([]uint64, 2*s.n)
	}
	idx = idx[:2*s.n]
	// The index pipeline writes host-order uint64 bytes straight into idx.
	if err := s.idxPipe.decode(raw, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(idx))), 16*s.n)); err != nil {
		return nil, fmt.Errorf("shard index: %w", err)
	}
	return idx, nil
}

// indexBytes returns the part of a whole shard holding its index.
func (s *shardCodec) indexBytes(shard []byte) ([]byte, error) {
	if len(shard) < s.idxSize {
		return nil, corruptf("shard is %d bytes, shorter than its %d-byte index", len(shard), s.idxSize)
	}
	if s.atEnd {
		return shard[len(shard)-s.idxSize:], nil
	}
	return shard[:s.idxSize], nil
}

// innerRange checks the index entry k against a shard of size total (or -1 when the
// size is unknown) and returns (offset, length, present).
func (s *shardCodec) innerRange(idx []uint64, k int, total int64) (int64, int64, bool, error) {
	off, n := idx[2*k], idx[2*k+1]
	if off == shardEmpty && n == shardEmpty {
		return 0, 0, false, nil
	}
	if off > math.MaxInt64/2 || n > math.MaxInt64/2 || (total >= 0 && (off > uint64(total) || n > uint64(total)-off)) {
		return 0, 0, false, corruptf("inner chunk %d at offset %d length %d lies outside the shard (%d bytes)", k, off, n, total)
	}
	return int64(off), int64(n), true, nil
}

// decodeShard decodes a whole shard into dst (C order, s.shape).
func (s *shardCodec) decodeShard(shard, dst []byte) error {
	ib, err := s.indexBytes(shard)
	if err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	idx, err := s.readIndex(ib, sc.idx)
	if err != nil {
		return err
	}
	sc.idx = idx
	innerBytes := s.inPipe.decodedSize()
	var tmp []byte
	if s.n > 1 {
		tmp = make([]byte, innerBytes)
	}
	var pos [MaxDims]int
	origin := make([]int, len(s.shape))
	for k := 0; k < s.n; k++ {
		for d := range origin {
			origin[d] = pos[d] * s.inner[d]
		}
		off, n, ok, err := s.innerRange(idx, k, int64(len(shard)))
		if err != nil {
			return err
		}
		target := dst
		if s.n > 1 {
			target = tmp
		}
		if !ok {
			fillElems(target, s.fill)
		} else {
			if err := s.inPipe.decode(shard[off:off+n], target); err != nil {
				return fmt.Errorf("inner chunk %v: %w", pos[:len(s.shape)], err)
			}
		}
		if s.n > 1 {
			copyBox(dst, s.shape, tmp, s.inner, origin, s.es)
		}
		for d := len(s.shape) - 1; d >= 0; d-- {
			pos[d]++
			if pos[d] < s.cps[d] {
				break
			}
			pos[d] = 0
		}
	}
	return nil
}
