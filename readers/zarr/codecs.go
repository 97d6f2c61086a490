package zarr

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxVariableChunkBytes bounds the decoded size of a chunk whose size the metadata
// does not fix (variable-length strings, chained compressors), so that a damaged
// header cannot make the reader allocate without limit. Set it before reading.
var MaxVariableChunkBytes = 256 << 20

// zstdOpenLimit is the same bound for the zstd decoder, fixed when it is created.
const zstdOpenLimit = 256 << 20

// bytesCodec is a bytes-to-bytes codec (a v2 compressor, a v3 bytes->bytes codec).
type bytesCodec interface {
	name() string
	// decode decodes src. want is the exact decoded length, or -1 when unknown.
	// The result is built in buf (grown if needed) or is a sub-slice of src.
	decode(buf, src []byte, want int) ([]byte, error)
}

func grow(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, n)
	}
	return buf[:n]
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrCorrupt)...)
}

// zstd

type zstdCodec struct{}

var (
	zstdOnce            sync.Once
	zstdExact, zstdOpen *zstd.Decoder
	zstdErr             error
)

func zstdDecoders() (*zstd.Decoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		n := runtime.GOMAXPROCS(0)
		zstdExact, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(n), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(1<<40))
		if zstdErr != nil {
			return
		}
		zstdOpen, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(n), zstd.WithDecoderMaxMemory(zstdOpenLimit))
	})
	return zstdExact, zstdOpen, zstdErr
}

func (zstdCodec) name() string { return "zstd" }

func (zstdCodec) decode(buf, src []byte, want int) ([]byte, error) {
	exact, open, err := zstdDecoders()
	if err != nil {
		return nil, err
	}
	if want >= 0 {
		if cap(buf) < want {
			buf = make([]byte, 0, want)
		}
		out, err := exact.DecodeAll(src, buf[:0:want])
		if err != nil {
			return nil, corruptf("%v", err)
		}
		if len(out) != want {
			return nil, corruptf("decoded %d bytes, want %d", len(out), want)
		}
		return out, nil
	}
	out, err := open.DecodeAll(src, buf[:0])
	if err != nil {
		return nil, corruptf("%v", err)
	}
	return out, nil
}

// zlib and gzip

type inflater struct {
	br   bytes.Reader
	zr   io.ReadCloser // zlib, lazily created
	gr   *gzip.Reader
	peek [1]byte
}

var inflaters = sync.Pool{New: func() any { return new(inflater) }}

type zlibCodec struct{ gz bool }

func (c zlibCodec) name() string {
	if c.gz {
		return "gzip"
	}
	return "zlib"
}

func (c zlibCodec) decode(buf, src []byte, want int) ([]byte, error) {
	inf := inflaters.Get().(*inflater)
	defer func() {
		inf.br.Reset(nil)
		inflaters.Put(inf)
	}()
	inf.br.Reset(src)
	var r io.Reader
	if c.gz {
		if inf.gr == nil {
			gr, err := gzip.NewReader(&inf.br)
			if err != nil {
				return nil, corruptf("%v", err)
			}
			inf.gr = gr
		} else if err := inf.gr.Reset(&inf.br); err != nil {
			return nil, corruptf("%v", err)
		}
		r = inf.gr
	} else {
		if inf.zr == nil {
			zr, err := zlib.NewReader(&inf.br)
			if err != nil {
				return nil, corruptf("%v", err)
			}
			inf.zr = zr
		} else if err := inf.zr.(zlib.Resetter).Reset(&inf.br, nil); err != nil {
			return nil, corruptf("%v", err)
		}
		r = inf.zr
	}
	return readAllExact(r, buf, want, inf.peek[:])
}

// readAllExact reads r to its end into buf. With want >= 0 the stream must hold
// exactly want bytes.
func readAllExact(r io.Reader, buf []byte, want int, peek []byte) ([]byte, error) {
	if want >= 0 {
		buf = grow(buf, want)
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, corruptf("stream shorter than %d bytes", want)
			}
			return nil, corruptf("%v", err)
		}
		n, err := r.Read(peek)
		if n > 0 {
			return nil, corruptf("stream longer than %d bytes", want)
		}
		if err != nil && err != io.EOF {
			return nil, corruptf("%v", err)
		}
		if err == nil {
			// A reader may report EOF only on the next call.
			if n, err = r.Read(peek); n > 0 || (err != nil && err != io.EOF) {
				return nil, corruptf("stream longer than %d bytes or damaged", want)
			}
		}
		return buf, nil
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= MaxVariableChunkBytes {
				return nil, corruptf("decoded size over %d bytes", MaxVariableChunkBytes)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, corruptf("%v", err)
		}
	}
}

// bz2

type bz2Codec struct{}

func (bz2Codec) name() string { return "bz2" }

func (bz2Codec) decode(buf, src []byte, want int) ([]byte, error) {
	var peek [1]byte
	return readAllExact(bzip2.NewReader(bytes.NewReader(src)), buf, want, peek[:])
}

// lz4 (numcodecs framing: uint32 LE decoded size, then one LZ4 block)

type lz4Codec struct{}

func (lz4Codec) name() string { return "lz4" }

func (lz4Codec) decode(buf, src []byte, want int) ([]byte, error) {
	return decodeLZ4Frame(buf, src, want)
}

func decodeLZ4Frame(buf, src []byte, want int) ([]byte, error) {
	if len(src) < 4 {
		return nil, corruptf("%d bytes, shorter than the 4-byte size header", len(src))
	}
	n := int(binary.LittleEndian.Uint32(src))
	if want >= 0 && n != want {
		return nil, corruptf("size header says %d bytes, want %d", n, want)
	}
	if want < 0 && n > MaxVariableChunkBytes {
		return nil, corruptf("size header says %d bytes, over the %d-byte limit", n, MaxVariableChunkBytes)
	}
	buf = grow(buf, n)
	if n == 0 {
		return buf, nil
	}
	got, err := lz4.UncompressBlock(src[4:], buf)
	if err != nil {
		return nil, corruptf("%v", err)
	}
	if got != n {
		return nil, corruptf("decoded %d bytes, header says %d", got, n)
	}
	return buf, nil
}

// Checksums: a 4-byte little-endian checksum before or after the data. v3 crc32c
// (and numcodecs crc32c) is CRC-32C at the end; numcodecs crc32 (IEEE) and adler32
// put theirs at the start unless configured with "location": "end".

type checksumCodec struct {
	id      string
	atStart bool
	sum     func([]byte) uint32
}

// fixedOverhead is implemented by bytes codecs that add a fixed number of bytes.
type fixedOverhead interface{ overhead() int }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var crc32cCodec = checksumCodec{id: "crc32c", sum: func(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }}

func (c checksumCodec) name() string  { return c.id }
func (c checksumCodec) overhead() int { return 4 }

func (c checksumCodec) decode(_, src []byte, want int) ([]byte, error) {
	if len(src) < 4 {
		return nil, corruptf("%d bytes, shorter than the checksum", len(src))
	}
	body, sum := src[:len(src)-4], src[len(src)-4:]
	if c.atStart {
		body, sum = src[4:], src[:4]
	}
	stored := binary.LittleEndian.Uint32(sum)
	if got := c.sum(body); got != stored {
		return nil, corruptf("checksum mismatch: stored %08x, computed %08x", stored, got)
	}
	if want >= 0 && len(body) != want {
		return nil, corruptf("%d bytes after the checksum, want %d", len(body), want)
	}
	return body, nil
}

func newChecksum(id string, cfg json.RawMessage) (bytesCodec, bool) {
	c := checksumCodec{id: id}
	switch id {
	case "crc32c":
		c.sum = crc32cCodec.sum
	case "crc32":
		c.atStart, c.sum = true, crc32.ChecksumIEEE
	case "adler32":
		c.atStart, c.sum = true, adler32.Checksum
	default:
		return nil, false
	}
	var conf struct {
		Location string `json:"location"`
	}
	if len(cfg) > 0 && json.Unmarshal(cfg, &conf) == nil {
		switch conf.Location {
		case "start":
			c.atStart = true
		case "end":
			c.atStart = false
		}
	}
	return c, true
}

// blosc (Blosc1 chunks, v2 "blosc" and v3 "blosc") and blosc2 (ocf-blosc2).

type bloscCodec struct{ v2 bool }

func (c bloscCodec) name() string {
	if c.v2 {
		return "blosc2"
	}
	return "blosc"
}

func (c bloscCodec) decode(buf, src []byte, want int) ([]byte, error) {
	if len(src) < 16 {
		return nil, corruptf("%d bytes, shorter than a blosc header", len(src))
	}
	// nbytes sits at bytes 4..7 of both the Blosc1 and the Blosc2 header.
	n := int(binary.LittleEndian.Uint32(src[4:8]))
	if want >= 0 && n != want {
		return nil, corruptf("header says %d decoded bytes, want %d", n, want)
	}
	if cb := int(binary.LittleEndian.Uint32(src[12:16])); cb > len(src) {
		return nil, corruptf("header says %d compressed bytes, the chunk has %d (truncated?)", cb, len(src))
	}
	if want < 0 && n > MaxVariableChunkBytes {
		return nil, corruptf("header says %d decoded bytes, over the %d-byte limit", n, MaxVariableChunkBytes)
	}
	buf = grow(buf, n)
	var got int
	var err error
	if c.v2 {
		got, err = bloscDecompress2(buf, src)
	} else {
		got, err = bloscDecompress(buf, src)
	}
	if err != nil {
		return nil, corruptf("%v", err)
	}
	if got != n {
		return nil, corruptf("decoded %d bytes, header says %d", got, n)
	}
	return buf, nil
}

// newBytesCodec returns the decoder for a compressor or v3 bytes->bytes codec. The
// v3 "numcodecs." prefix (numcodecs.zarr3 wrappers) is accepted.
func newBytesCodec(name string, cfg json.RawMessage) (bytesCodec, bool) {
	switch strings.TrimPrefix(name, "numcodecs.") {
	case "zstd":
		return zstdCodec{}, true
	case "zlib":
		return zlibCodec{}, true
	case "gzip":
		return zlibCodec{gz: true}, true
	case "bz2":
		return bz2Codec{}, true
	case "lz4":
		return lz4Codec{}, true
	case "blosc":
		return bloscCodec{}, true
	case "blosc2":
		return bloscCodec{v2: true}, true
	case "crc32c", "crc32", "adler32":
		return newChecksum(strings.TrimPrefix(name, "numcodecs."), cfg)
	}
	return nil, false
}

// flatFilter is a v2 filter over the flattened chunk: it turns n elements of its
// encoded type into n elements of its decoded type.
type flatFilter interface {
	name() string
	encSize() int // bytes per encoded element
	decSize() int // bytes per decoded element
	decode(dst, src []byte, n int) error
}

func numDType(cfg map[string]json.RawMessage, key string, def *DType) (DType, error) {
	raw, ok := cfg[key]
	if !ok || isJSONNull(raw) {
		if def != nil {
			return *def, nil
		}
		return DType{}, fmt.Errorf("missing %s", key)
	}
	d, err := parseV2DType(raw)
	if err != nil {
		return DType{}, fmt.Errorf("%s: %w", key, err)
	}
	switch d.Kind {
	case KindInt, KindUint, KindFloat, KindBool:
	default:
		return DType{}, fmt.Errorf("%s %s: %w", key, d, ErrUnsupported)
	}
	return d, nil
}

// loadF reads element i of b (type d) as float64.
func loadF(b []byte, d DType) float64 {
	u := loadU(b, d)
	switch d.Kind {
	case KindFloat:
		switch d.Size {
		case 2:
			return float64(f16ToF32(uint16(u)))
		case 4:
			return float64(math.Float32frombits(uint32(u)))
		}
		return math.Float64frombits(u)
	case KindInt:
		return float64(signExtend(u, d.Size))
	}
	return float64(u)
}

func signExtend(u uint64, size int) int64 {
	s := 64 - 8*uint(size)
	return int64(u<<s) >> s
}

func loadU(b []byte, d DType) uint64 {
	var u uint64
	if d.BigEndian {
		for i := 0; i < d.Size; i++ {
			u = u<<8 | uint64(b[i])
		}
		return u
	}
	for i := d.Size - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	return u
}

func storeU(b []byte, d DType, u uint64) {
	if d.BigEndian {
		for i := d.Size - 1; i >= 0; i-- {
			b[i] = byte(u)
			u >>= 8
		}
		return
	}
	for i := 0; i < d.Size; i++ {
		b[i] = byte(u)
		u >>= 8
	}
}

// storeF writes f as type d, converting like numpy's astype (floats round, ints
// truncate toward zero).
func storeF(b []byte, d DType, f float64) {
	switch d.Kind {
	case KindFloat:
		switch d.Size {
		case 2:
			storeU(b, d, uint64(f32ToF16(float32(f))))
		case 4:
			storeU(b, d, uint64(math.Float32bits(float32(f))))
		default:
			storeU(b, d, math.Float64bits(f))
		}
	case KindInt:
		storeU(b, d, uint64(int64(f)))
	case KindBool:
		if f != 0 {
			storeU(b, d, 1)
		} else {
			storeU(b, d, 0)
		}
	default:
		if f < 0 {
			storeU(b, d, uint64(int64(f)))
		} else {
			storeU(b, d, uint64(f))
		}
	}
}

// delta: decoded[i] = sum(encoded[0..i]) computed in the decoded type.
type deltaFilter struct{ dtype, astype DType }

func (f deltaFilter) name() string { return "delta" }
func (f deltaFilter) encSize() int { return f.astype.Size }
func (f deltaFilter) decSize() int { return f.dtype.Size }
func (f deltaFilter) decode(dst, src []byte, n int) error {
	es, ds := f.astype.Size, f.dtype.Size
	if len(src) < n*es || len(dst) < n*ds {
		return corruptf("buffer too short")
	}
	if f.dtype.Kind == KindFloat {
		if f.dtype.Size == 4 {
			var acc float32
			for i := 0; i < n; i++ {
				acc += float32(loadF(src[i*es:], f.astype))
				storeF(dst[i*ds:], f.dtype, float64(acc))
			}
			return nil
		}
		var acc float64
		for i := 0; i < n; i++ {
			acc += loadF(src[i*es:], f.astype)
			storeF(dst[i*ds:], f.dtype, acc)
		}
		return nil
	}
	if f.astype.Kind == KindFloat {
		return fmt.Errorf("delta from float %s to integer %s: %w", f.astype, f.dtype, ErrUnsupported)
	}
	// Integers: modular arithmetic in the decoded width.
	var acc uint64
	for i := 0; i < n; i++ {
		u := loadU(src[i*es:], f.astype)
		if f.astype.Kind == KindInt {
			u = uint64(signExtend(u, es))
		}
		acc += u
		storeU(dst[i*ds:], f.dtype, acc)
	}
	return nil
}

// fixedscaleoffset: decoded = encoded / scale + offset, computed in float64 and cast
// to the decoded type.
type fsoFilter struct {
	dtype, astype DType
	scale, offset float64
}

func (f fsoFilter) name() string { return "fixedscaleoffset" }
func (f fsoFilter) encSize() int { return f.astype.Size }
func (f fsoFilter) decSize() int { return f.dtype.Size }
func (f fsoFilter) decode(dst, src []byte, n int) error {
	es, ds := f.astype.Size, f.dtype.Size
	if len(src) < n*es || len(dst) < n*ds {
		return corruptf("buffer too short")
	}
	for i := 0; i < n; i++ {
		storeF(dst[i*ds:], f.dtype, loadF(src[i*es:], f.astype)/f.scale+f.offset)
	}
	return nil
}

func newFlatFilter(c CodecInfo, arr DType) (flatFilter, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(c.Config, &cfg); err != nil {
		return nil, fmt.Errorf("filter %s: %w", c.Name, err)
	}
	switch strings.TrimPrefix(c.Name, "numcodecs.") {
	case "delta":
		d, err := numDType(cfg, "dtype", &arr)
		if err != nil {
			return nil, fmt.Errorf("filter delta: %w", err)
		}
		a, err := numDType(cfg, "astype", &d)
		if err != nil {
			return nil, fmt.Errorf("filter delta: %w", err)
		}
		if d.Kind == KindBool || a.Kind == KindBool {
			return nil, fmt.Errorf("filter delta on bool: %w", ErrUnsupported)
		}
		return deltaFilter{dtype: d, astype: a}, nil
	case "fixedscaleoffset":
		d, err := numDType(cfg, "dtype", &arr)
		if err != nil {
			return nil, fmt.Errorf("filter fixedscaleoffset: %w", err)
		}
		a, err := numDType(cfg, "astype", &d)
		if err != nil {
			return nil, fmt.Errorf("filter fixedscaleoffset: %w", err)
		}
		scale, ok1 := jsonFloat(cfg["scale"])
		offset, ok2 := jsonFloat(cfg["offset"])
		if !ok1 || !ok2 || scale == 0 || math.IsNaN(scale) {
			return nil, fmt.Errorf("filter fixedscaleoffset: bad scale or offset")
		}
		return fsoFilter{dtype: d, astype: a, scale: scale, offset: offset}, nil
	case "shuffle":
		es, ok := jsonInt(cfg["elementsize"])
		if !ok {
			es = int64(arr.Size)
		}
		if es <= 0 || es > 1<<16 {
			return nil, fmt.Errorf("filter shuffle: bad elementsize %d", es)
		}
		return shuffleFilter{size: arr.Size, elem: int(es)}, nil
	case "bitround":
		// Decoding is the identity.
		return castFilter{id: "bitround", dtype: arr, astype: arr}, nil
	case "quantize":
		d, err := numDType(cfg, "dtype", &arr)
		if err != nil {
			return nil, fmt.Errorf("filter quantize: %w", err)
		}
		a, err := numDType(cfg, "astype", &d)
		if err != nil {
			return nil, fmt.Errorf("filter quantize: %w", err)
		}
		return castFilter{id: "quantize", dtype: d, astype: a}, nil
	case "astype":
		d, err := numDType(cfg, "decode_dtype", &arr)
		if err != nil {
			return nil, fmt.Errorf("filter astype: %w", err)
		}
		a, err := numDType(cfg, "encode_dtype", nil)
		if err != nil {
			return nil, fmt.Errorf("filter astype: %w", err)
		}
		return castFilter{id: "astype", dtype: d, astype: a}, nil
	}
	return nil, fmt.Errorf("unsupported filter %s: %w", c.Name, ErrUnsupported)
}

// castFilter converts elements from astype to dtype like numpy's astype (quantize,
// astype; bitround with equal types is a copy).
type castFilter struct {
	id            string
	dtype, astype DType
}

func (f castFilter) name() string { return f.id }
func (f castFilter) encSize() int { return f.astype.Size }
func (f castFilter) decSize() int { return f.dtype.Size }
func (f castFilter) decode(dst, src []byte, n int) error {
	es, ds := f.astype.Size, f.dtype.Size
	if len(src) < n*es || len(dst) < n*ds {
		return corruptf("buffer too short")
	}
	if f.dtype == f.astype {
		copy(dst[:n*ds], src)
		return nil
	}
	intish := func(d DType) bool { return d.Kind == KindInt || d.Kind == KindUint || d.Kind == KindBool }
	for i := 0; i < n; i++ {
		if intish(f.dtype) && intish(f.astype) {
			u := loadU(src[i*es:], f.astype)
			if f.astype.Kind == KindInt {
				u = uint64(signExtend(u, es))
			}
			if f.dtype.Kind == KindBool && u != 0 {
				u = 1
			}
			storeU(dst[i*ds:], f.dtype, u)
			continue
		}
		storeF(dst[i*ds:], f.dtype, loadF(src[i*es:], f.astype))
	}
	return nil
}

// shuffleFilter is numcodecs' Shuffle: byte j of element i is stored at j*count+i.
type shuffleFilter struct{ size, elem int }

func (f shuffleFilter) name() string { return "shuffle" }
func (f shuffleFilter) encSize() int { return f.size }
func (f shuffleFilter) decSize() int { return f.size }
func (f shuffleFilter) decode(dst, src []byte, n int) error {
	total := n * f.size
	if len(src) < total || len(dst) < total {
		return corruptf("buffer too short")
	}
	if f.elem <= 1 {
		copy(dst[:total], src)
		return nil
	}
	if total%f.elem != 0 {
		return corruptf("%d bytes is not a multiple of elementsize %d", total, f.elem)
	}
	count := total / f.elem
	for j := 0; j < f.elem; j++ {
		plane := src[j*count : (j+1)*count]
		for i, b := range plane {
			dst[i*f.elem+j] = b
		}
	}
	return nil
}
