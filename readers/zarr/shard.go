package zarr

import (
	"encoding/json"
	"fmt"
	"math"
	"unsafe"
)

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
	if most := s.inPipe.maxEncoded(); most >= 0 && n > uint64(most) {
		return 0, 0, false, corruptf("inner chunk %d is %d bytes long; its codecs encode at most %d", k, n, most)
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
