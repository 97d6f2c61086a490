package zarr

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// ChunkKey identifies one decoded chunk for a ChunkCache: the array's identity (its
// store and path) and the chunk's grid index. Arrays with more than CacheDims
// dimensions are not cached.
type ChunkKey struct {
	Array string
	Index [CacheDims]int32
}

// CacheDims is the largest number of dimensions a ChunkKey holds.
const CacheDims = 8

// ChunkCache holds decoded chunks (native element type, host byte order, C order,
// full chunk shape, as DecodeChunk returns them). It must be safe for concurrent use.
// Put hands the buffer over: the reader never writes to it again, and the cache must
// not change a buffer it has returned from Get.
type ChunkCache interface {
	Get(key ChunkKey) ([]byte, bool)
	Put(key ChunkKey, decoded []byte)
}

// Array is an open Zarr array. Its fields are read-only; an Array is safe for
// concurrent use.
type Array struct {
	Store      Store
	Path       string // path inside the store, "" for a root array
	ZarrFormat int
	Shape      []int
	// Chunks is the shape of the chunks reads are made of: the chunk shape, or the
	// inner chunk shape of a sharded array.
	Chunks []int
	// ShardShape is the shard shape of a sharded v3 array (the stored objects), or nil.
	ShardShape []int
	DType      DType
	DimNames   []string // from dimension_names (v3) or _ARRAY_DIMENSIONS; nil if absent
	Attrs      map[string]json.RawMessage
	// FillValue is one element of the fill value in host byte order (zeros when the
	// metadata says null, see FillNull). FillString is the fill of a string array.
	FillValue  []byte
	FillString string
	FillNull   bool
	FillJSON   json.RawMessage // fill_value as the metadata spells it
	Order      byte            // 'C' or 'F' (v2 "order")
	Codecs     []CodecInfo     // v3 codecs, or v2 filters followed by the compressor

	id    string
	keys  keyEncoding
	pipe  *pipeline   // decodes one stored object (chunk or shard)
	shard *shardCodec // non-nil: reads go through inner chunks of shards
	// maxRead bounds the stored size of one chunk read (an inner chunk of a sharded array);
	// -1: no bound (variable-length strings).
	maxRead int64
	grid    []int // chunks along each dim (of Chunks)
	cache   ChunkCache
	bufs    chan *[]byte // free decoded-chunk buffers (a bounded list; see getScratch)
	cf      *CFInfo
	cfp     CFParams
	// Decoded shard indexes of a sharded array, by shard grid index (stores are
	// taken to be unchanging while an Array is open).
	idxMu    sync.Mutex
	idxCache map[[CacheDims]int32][]uint64
}

// maxShardIndexes bounds the shard indexes an Array keeps.
const maxShardIndexes = 512

// OpenArray opens the array at path in store, reading its metadata directly
// (.zarray/.zattrs for v2, zarr.json for v3; v3 is tried first).
func OpenArray(store Store, path string) (*Array, error) {
	path = strings.Trim(path, "/")
	m, err := readArrayMeta(store, path)
	if err != nil {
		return nil, &Error{Store: store.String(), Path: path, Err: err}
	}
	return newArray(store, path, m)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "/" + key
}

func readArrayMeta(store Store, path string) (*arrayMeta, error) {
	doc, err := store.Get(join(path, "zarr.json"))
	if err == nil {
		z, err := parseZarrJSON(doc)
		if err != nil {
			return nil, err
		}
		if z.NodeType != "array" {
			return nil, fmt.Errorf("not an array (node_type %q)", z.NodeType)
		}
		return v3ArrayMeta(z)
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	doc, err = store.Get(join(path, ".zarray"))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("no array here (neither zarr.json nor .zarray): %w", ErrNotFound)
		}
		return nil, err
	}
	attrs, err := store.Get(join(path, ".zattrs"))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	return parseZarray(doc, attrs)
}

func newArray(store Store, path string, m *arrayMeta) (*Array, error) {
	a := &Array{
		Store: store, Path: path, ZarrFormat: m.format, Shape: m.shape, Chunks: m.chunks,
		DType: m.dtype, DimNames: m.dimNames, Attrs: m.attrs, FillValue: m.fill, FillString: m.fillStr,
		FillNull: m.fillNull, FillJSON: m.fillRaw, Order: m.order, Codecs: m.codecs,
		id: store.String() + "\x00" + path, keys: m.keys,
		bufs: make(chan *[]byte, runtime.GOMAXPROCS(0)),
	}
	fail := func(err error) (*Array, error) {
		var ce *codecError
		e := &Error{Store: store.String(), Path: path, Err: err}
		if errors.As(err, &ce) {
			e.Codec = ce.codec
		}
		return nil, e
	}
	var err error
	if m.format == 2 {
		a.pipe, err = buildV2Pipeline(m)
	} else {
		a.pipe, err = buildV3Pipeline(m.codecs, m.chunks, m.dtype, m.fill)
	}
	if err != nil {
		return fail(err)
	}
	if a.pipe.ser == serShard && a.pipe.strides == nil && len(a.pipe.b2b) == 0 {
		a.shard = a.pipe.shard
		a.ShardShape = m.chunks
		a.Chunks = a.shard.inner
	}
	a.maxRead = a.pipe.maxEncoded()
	if a.shard != nil {
		a.maxRead = a.shard.inPipe.maxEncoded()
	}
	a.grid = make([]int, len(a.Shape))
	for d := range a.Shape {
		a.grid[d] = (a.Shape[d] + a.Chunks[d] - 1) / a.Chunks[d]
	}
	if a.cf, err = parseCF(a); err != nil {
		// Bad CF attributes only matter to CF decoding: keep the error for then.
		a.cf = &CFInfo{ScaleFactor: 1, Err: err}
	}
	a.cfp = a.cf.Params()
	return a, nil
}

// Name names the array in messages: its store and its path in it.
func (a *Array) Name() string {
	if a.Path == "" {
		return a.Store.String()
	}
	return a.Store.String() + "/" + a.Path
}

// CodecChain describes the codecs in decode-independent (encode) order, e.g.
// "blosc{...} | crc32c" or, for v2, filters then the compressor.
func (a *Array) CodecChain() string {
	parts := make([]string, len(a.Codecs))
	for i, c := range a.Codecs {
		parts[i] = c.String()
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " | ")
}

// ChunkBox returns the region [start, stop) of the array that chunk idx (of the
// Chunks grid) covers, clipped to the array.
func (a *Array) ChunkBox(idx []int) (start, stop []int) {
	start = make([]int, len(idx))
	stop = make([]int, len(idx))
	for d, v := range idx {
		start[d] = v * a.Chunks[d]
		stop[d] = min(start[d]+a.Chunks[d], a.Shape[d])
	}
	return start, stop
}

// SetCache sets the decoded-chunk cache used by ReadBox and DecodeChunk (nil: none).
// Call it before sharing the Array between goroutines.
func (a *Array) SetCache(c ChunkCache) { a.cache = c }

// ID is the array's identity in ChunkKeys: its store and path.
func (a *Array) ID() string { return a.id }

// NDim is the number of dimensions.
func (a *Array) NDim() int { return len(a.Shape) }

// Len is the number of elements.
func (a *Array) Len() int { return prod(a.Shape) }

// ChunkGrid is the number of chunks (of shape Chunks) along each dimension.
func (a *Array) ChunkGrid() []int { return append([]int(nil), a.grid...) }

// NumChunks is the number of chunks (of shape Chunks) in the grid.
func (a *Array) NumChunks() int { return prod(a.grid) }

// ChunkBytes is the decoded size of one chunk in bytes (zero for string arrays).
func (a *Array) ChunkBytes() int { return prod(a.Chunks) * a.DType.Size }

// MaxStoredBytes bounds the stored (encoded) size of one chunk as FetchChunk reads it (an
// inner chunk of a sharded array), from the codecs in the metadata; -1 when nothing bounds it
// (variable-length strings). A longer value is refused before it is read (LimitedStore).
func (a *Array) MaxStoredBytes() int64 { return a.maxRead }

// DecodedBytes is the size of the whole array decoded, in bytes.
func (a *Array) DecodedBytes() int64 {
	n := int64(a.DType.Size)
	for _, s := range a.Shape {
		n *= int64(s)
	}
	return n
}

// StoredChunks counts the stored chunk objects (shard files for a sharded array) and
// their total size in bytes, by listing the store; no chunk is read. The store must
// implement Lister; sizes come from Sizer (a stat, a zip directory entry), and bytes
// is -1 (unknown) for a store that lists but cannot report sizes.
func (a *Array) StoredChunks() (count int, bytes int64, err error) {
	l, ok := a.Store.(Lister)
	if !ok {
		return 0, 0, &Error{Store: a.Store.String(), Path: a.Path, Err: fmt.Errorf("store cannot list keys: %w", ErrUnsupported)}
	}
	prefix := ""
	if a.Path != "" {
		prefix = a.Path + "/"
	}
	keys, err := l.List(prefix)
	if err != nil {
		return 0, 0, &Error{Store: a.Store.String(), Path: a.Path, Err: err}
	}
	sz, sized := a.Store.(Sizer)
	for _, k := range keys {
		rel := k[len(prefix):]
		if !a.isChunkKey(rel) {
			continue
		}
		count++
		if sized {
			n, err := sz.Size(k)
			if err != nil {
				return 0, 0, &Error{Store: a.Store.String(), Path: a.Path, Key: k, Err: err}
			}
			bytes += n
		}
	}
	if !sized {
		bytes = -1
	}
	return count, bytes, nil
}

// NumObjects is the number of chunk objects the array has when every one is stored: its
// chunks, or its shards for a sharded array (what StoredChunks counts).
func (a *Array) NumObjects() int {
	n, obj := 1, a.objectShape()
	for d, s := range a.Shape {
		n *= (s + obj[d] - 1) / obj[d]
	}
	return n
}

// isChunkKey reports whether rel (relative to the array) is one of its chunk keys.
func (a *Array) isChunkKey(rel string) bool {
	if a.keys.prefix != "" {
		if !strings.HasPrefix(rel, a.keys.prefix) {
			return false
		}
		rel = rel[len(a.keys.prefix):]
		if len(a.Shape) == 0 {
			return rel == ""
		}
		if len(rel) == 0 || rel[0] != a.keys.sep {
			return false
		}
		rel = rel[1:]
	}
	n := len(a.Shape)
	if n == 0 {
		return rel == "0"
	}
	seps := string(a.keys.sep)
	if a.keys.probeSlash {
		seps = "./"
	}
	parts := strings.FieldsFunc(rel, func(r rune) bool { return strings.ContainsRune(seps, r) })
	if len(parts) != n {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return true
}

// objectGrid is the grid of stored objects (chunks or shards).
func (a *Array) objectShape() []int {
	if a.shard != nil {
		return a.ShardShape
	}
	return a.Chunks
}

// ChunkKeyOf returns the store key of the stored object (chunk, or shard for a
// sharded array) with grid index idx (of the stored objects' grid).
func (a *Array) ChunkKeyOf(idx []int) string {
	return string(a.appendKey(nil, idx, a.keys.sep))
}

func (a *Array) appendKey(b []byte, idx []int, sep byte) []byte {
	if a.Path != "" {
		b = append(b, a.Path...)
		b = append(b, '/')
	}
	if a.keys.prefix != "" {
		b = append(b, a.keys.prefix...)
		if len(idx) == 0 {
			return b
		}
		b = append(b, sep)
	}
	if len(idx) == 0 {
		return append(b, '0')
	}
	for i, v := range idx {
		if i > 0 {
			b = append(b, sep)
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return b
}

func (a *Array) checkIndex(idx []int) error {
	if len(idx) != len(a.Shape) {
		return fmt.Errorf("chunk index %v for a %d-d array", idx, len(a.Shape))
	}
	for d, v := range idx {
		if v < 0 || v >= a.grid[d] {
			return fmt.Errorf("chunk index %v outside the chunk grid %v", idx, a.grid)
		}
	}
	return nil
}

// getBuf returns a pooled decoded-chunk buffer (8-byte aligned, ChunkBytes long).
func (a *Array) getBuf() *[]byte {
	select {
	case p := <-a.bufs:
		return p
	default:
	}
	n := a.ChunkBytes()
	// Allocate as uint64 so that the buffer is 8-byte aligned for any element type.
	w := make([]uint64, (n+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8)[:n:n]
	return &b
}

func (a *Array) putBuf(p *[]byte) {
	select {
	case a.bufs <- p:
	default:
	}
}

// DecodeChunk decodes the chunk with grid index idx (of the Chunks grid: inner chunks
// for a sharded array) into dst and returns it: the full chunk shape, native element
// type in host byte order, C order. dst must hold ChunkBytes() bytes (a nil or short
// dst gets a new buffer). A chunk that is not stored reads as the fill value. The
// array's cache is not consulted.
func (a *Array) DecodeChunk(idx []int, dst []byte) ([]byte, error) {
	if a.DType.variable() {
		return nil, &Error{Store: a.Store.String(), Path: a.Path, Err: fmt.Errorf("DecodeChunk on a variable-length string array: use ReadStrings: %w", ErrUnsupported)}
	}
	if err := a.checkIndex(idx); err != nil {
		return nil, &Error{Store: a.Store.String(), Path: a.Path, Err: err}
	}
	n := a.ChunkBytes()
	if len(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	return dst, a.decodeChunk(idx, dst)
}

// DecodeChunkFound is DecodeChunk that also reports whether the chunk is stored: found is
// false when dst was filled with the fill value because the chunk (or, for a sharded
// array, its shard or its entry in the shard's index) is absent.
func (a *Array) DecodeChunkFound(idx []int, dst []byte) (out []byte, found bool, err error) {
	if a.DType.variable() {
		return nil, false, &Error{Store: a.Store.String(), Path: a.Path, Err: fmt.Errorf("DecodeChunk on a variable-length string array: use ReadStrings: %w", ErrUnsupported)}
	}
	if err := a.checkIndex(idx); err != nil {
		return nil, false, &Error{Store: a.Store.String(), Path: a.Path, Err: err}
	}
	n := a.ChunkBytes()
	if len(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	found, err = a.decodeChunkFound(idx, dst)
	return dst, found, err
}

// ChunkError wraps err with what names the chunk with grid index idx: the store, the array
// and the key of the object that holds it (the chunk, or its shard). A nil err is a chunk
// that is not stored, refused by a reader that does not read it as the fill value
// (ErrMissingChunk).
func (a *Array) ChunkError(idx []int, err error) error {
	if err == nil {
		err = fmt.Errorf("chunk %v: %w", idx, ErrMissingChunk)
	}
	obj := idx
	if a.shard != nil && len(idx) <= MaxDims {
		var sidx [MaxDims]int
		for d := range idx {
			sidx[d] = idx[d] / a.shard.cps[d]
		}
		obj = sidx[:len(idx)]
	}
	return &Error{Store: a.Store.String(), Path: a.Path, Key: a.ChunkKeyOf(obj), Err: err}
}

func (a *Array) decodeChunk(idx []int, dst []byte) error {
	_, err := a.decodeChunkFound(idx, dst)
	return err
}

// decodeChunkFound decodes chunk idx into dst; found is false when it read as the fill value.
func (a *Array) decodeChunkFound(idx []int, dst []byte) (bool, error) {
	sc := getScratch()
	defer putScratch(sc)
	raw, found, err := a.fetchChunk(idx, sc.buf[0], sc)
	if err != nil {
		return true, err
	}
	if found {
		keepReadBuf(a.Store, sc, raw)
	}
	return found, a.decodeFetched(idx, raw, found, dst)
}

// FetchChunk reads the stored bytes of the chunk with grid index idx (for a sharded array,
// its inner chunk, by range reads after its shard's index) into buf, grown as needed, without
// decoding them: DecodeFetched does. found is false when the chunk is not stored. raw is buf
// (or a grown copy) when the store reads into buffers (BufferedStore), else the store's own
// memory, which must not be written. Fetching and decoding apart lets a reader keep many
// reads of a remote store in flight while it decodes on as many goroutines as it has cores.
func (a *Array) FetchChunk(idx []int, buf []byte) (raw []byte, found bool, err error) {
	if err := a.checkChunkRead(idx); err != nil {
		return nil, false, err
	}
	sc := getScratch()
	defer putScratch(sc)
	return a.fetchChunk(idx, buf, sc)
}

// DecodeFetched decodes what FetchChunk returned for chunk idx into dst, which must hold
// ChunkBytes() bytes (native element type in host byte order, C order); a chunk not found
// reads as the fill value.
func (a *Array) DecodeFetched(idx []int, raw []byte, found bool, dst []byte) error {
	if err := a.checkChunkRead(idx); err != nil {
		return err
	}
	if len(dst) < a.ChunkBytes() {
		return &Error{Store: a.Store.String(), Path: a.Path, Err: fmt.Errorf("chunk %v: %d-byte destination for a %d-byte chunk", idx, len(dst), a.ChunkBytes())}
	}
	return a.decodeFetched(idx, raw, found, dst[:a.ChunkBytes()])
}

// checkChunkRead refuses what the chunk-level reads cannot do: strings, a bad index.
func (a *Array) checkChunkRead(idx []int) error {
	if a.DType.variable() {
		return &Error{Store: a.Store.String(), Path: a.Path, Err: fmt.Errorf("DecodeChunk on a variable-length string array: use ReadStrings: %w", ErrUnsupported)}
	}
	if err := a.checkIndex(idx); err != nil {
		return &Error{Store: a.Store.String(), Path: a.Path, Err: err}
	}
	return nil
}

// fetchChunk reads chunk idx's stored bytes into buf (sc: scratch for a shard's index).
func (a *Array) fetchChunk(idx []int, buf []byte, sc *scratch) ([]byte, bool, error) {
	if a.shard != nil {
		return a.fetchInner(idx, buf, sc)
	}
	kb := keyBufs.Get().(*keyBuf)
	defer keyBufs.Put(kb)
	k := a.appendKey(kb.b[:0], idx, a.keys.sep)
	raw, err := readKey(a.Store, k, 0, -1, a.maxRead, buf)
	if err != nil && errors.Is(err, ErrNotFound) && a.keys.probeSlash && len(idx) > 1 {
		k = a.appendKey(kb.b[:0], idx, '/')
		raw, err = readKey(a.Store, k, 0, -1, a.maxRead, buf)
		if errors.Is(err, ErrNotFound) {
			k = a.appendKey(kb.b[:0], idx, '.')
		}
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, false, nil
		}
		return nil, true, withContext(a.Store.String(), a.Path, string(k), err)
	}
	return raw, true, nil
}

// decodeFetched decodes fetchChunk's raw bytes of chunk idx into dst (the fill value when
// not found).
func (a *Array) decodeFetched(idx []int, raw []byte, found bool, dst []byte) error {
	if !found {
		fillElems(dst, a.FillValue)
		return nil
	}
	if a.shard == nil {
		if err := a.pipe.decode(raw, dst); err != nil {
			return withContext(a.Store.String(), a.Path, a.ChunkKeyOf(idx), err)
		}
		return nil
	}
	if err := a.shard.inPipe.decode(raw, dst); err != nil {
		sidx, local := a.shardOf(idx)
		return withContext(a.Store.String(), a.Path, a.ChunkKeyOf(sidx), fmt.Errorf("inner chunk %v: %w", local, err))
	}
	return nil
}

// shardOf splits an inner chunk's grid index into its shard's and its place in the shard.
func (a *Array) shardOf(idx []int) (sidx, local []int) {
	sidx, local = make([]int, len(idx)), make([]int, len(idx))
	for d := range idx {
		sidx[d], local[d] = idx[d]/a.shard.cps[d], idx[d]%a.shard.cps[d]
	}
	return sidx, local
}

// fetchInner reads one inner chunk of a shard with range reads: the shard's index (cached),
// then the chunk.
func (a *Array) fetchInner(idx []int, buf []byte, sc *scratch) ([]byte, bool, error) {
	s := a.shard
	var sidx, local [MaxDims]int
	k := 0
	for d := range idx {
		sidx[d] = idx[d] / s.cps[d]
		local[d] = idx[d] % s.cps[d]
		k = k*s.cps[d] + local[d]
	}
	kbuf := keyBufs.Get().(*keyBuf)
	defer keyBufs.Put(kbuf)
	kb := a.appendKey(kbuf.b[:0], sidx[:len(idx)], a.keys.sep)
	var ck [CacheDims]int32
	cacheable := len(idx) <= CacheDims
	var ix []uint64
	if cacheable {
		for d := range idx {
			ck[d] = int32(sidx[d])
		}
		a.idxMu.Lock()
		ix = a.idxCache[ck]
		a.idxMu.Unlock()
		if ix != nil && len(ix) == 0 {
			return nil, false, nil // the shard is not stored
		}
	}
	if ix == nil {
		var err error
		if ix, err = a.readShardIndex(kb, sc); err != nil {
			return nil, true, err
		}
		if cacheable {
			a.idxMu.Lock()
			if a.idxCache == nil || len(a.idxCache) >= maxShardIndexes {
				a.idxCache = map[[CacheDims]int32][]uint64{}
			}
			a.idxCache[ck] = ix
			a.idxMu.Unlock()
		}
		if len(ix) == 0 {
			return nil, false, nil
		}
	}
	o, n, ok, err := s.innerRange(ix, k, -1)
	if err != nil {
		return nil, true, withContext(a.Store.String(), a.Path, string(kb), wrapCodec("sharding_indexed", err))
	}
	if !ok {
		return nil, false, nil
	}
	raw, err := readKey(a.Store, kb, o, n, -1, buf)
	if err != nil {
		return nil, true, withContext(a.Store.String(), a.Path, string(kb), wrapCodec("sharding_indexed", fmt.Errorf("inner chunk %v: %w", append([]int(nil), local[:len(idx)]...), err)))
	}
	return raw, true, nil
}

// keepReadBuf keeps a grown read buffer for reuse, but only when the store filled our
// buffer: other stores may return their own memory, which must never become scratch.
func keepReadBuf(s Store, sc *scratch, raw []byte) {
	if _, ok := s.(BufferedStore); ok {
		sc.buf[0] = raw[:0]
	}
}

// readShardIndex reads and decodes the index of the shard at key kb into a new slice
// (empty, not nil, when the shard is not stored).
func (a *Array) readShardIndex(kb []byte, sc *scratch) ([]uint64, error) {
	s := a.shard
	var off int64
	if s.atEnd {
		off = -int64(s.idxSize)
	}
	raw, err := readKey(a.Store, kb, off, int64(s.idxSize), -1, sc.buf[0])
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return []uint64{}, nil
		}
		if errors.Is(err, ErrCorrupt) {
			err = wrapCodec("sharding_indexed", fmt.Errorf("shard index (%d bytes): %w", s.idxSize, err))
		}
		return nil, withContext(a.Store.String(), a.Path, string(kb), err)
	}
	keepReadBuf(a.Store, sc, raw)
	ix, err := s.readIndex(raw, nil)
	if err != nil {
		return nil, withContext(a.Store.String(), a.Path, string(kb), wrapCodec("sharding_indexed", err))
	}
	return ix, nil
}

// AttrString returns the string attribute name.
func (a *Array) AttrString(name string) (string, bool) {
	raw, ok := a.Attrs[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// AttrFloat returns the numeric attribute name (a number or "NaN"/"Infinity").
func (a *Array) AttrFloat(name string) (float64, bool) {
	raw, ok := a.Attrs[name]
	if !ok {
		return 0, false
	}
	return jsonFloat(raw)
}
