package blosc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by errors about valid chunks that use a feature this
// package does not implement.
var ErrUnsupported = errors.New("unsupported feature")

// ErrCorrupt is wrapped by errors about input that is not a valid chunk.
var ErrCorrupt = errors.New("corrupt chunk")

const (
	minHeaderLen = 16 // Blosc1 header, and the start of the Blosc2 one
	extHeaderLen = 32 // Blosc2 extended header

	// Header flag bits (byte 2).
	flagShuffle    = 0x01
	flagMemcpyed   = 0x02
	flagBitshuffle = 0x04
	flagDelta      = 0x08 // Blosc2 only, in a non-extended header
	flagDontSplit  = 0x10

	// Blosc1 split rule limits (c-blosc MAX_SPLITS, MIN_BUFFERSIZE).
	maxSplits     = 16
	minBufferSize = 128

	// Blosc2 filter codes.
	filterNone       = 0
	filterShuffle    = 1
	filterBitshuffle = 2
	filterDelta      = 3
	filterTruncPrec  = 4

	// Codec formats (flags >> 5).
	formatBloscLZ = 0
	formatLZ4     = 1
	formatSnappy  = 2
	formatZlib    = 3
	formatZstd    = 4
	formatUDCodec = 6

	// blosc2_flags (byte 31).
	b2UseDict   = 0x01
	b2BigEndian = 0x02
	b2Lazy      = 0x08
	b2Instr     = 0x80

	// Special chunk kinds, (blosc2_flags >> 4) & 7.
	specialZero   = 1
	specialNaN    = 2
	specialValue  = 3
	specialUninit = 4

	// flags2 (byte 30).
	vlBlocks = 0x01

	maxFilters = 6
)

// header is a parsed chunk header, Blosc1 or Blosc2.
type header struct {
	version   uint8
	versionLZ uint8
	flags     uint8
	typesize  int
	nbytes    int // decompressed size
	blocksize int
	cbytes    int // compressed size, header included
	hlen      int // header length: 16 or 32

	// The filter pipeline, applied in slot order when compressing. A Blosc1
	// header's shuffle flags are mapped to the last slot, as c-blosc2 does.
	filters     [maxFilters]uint8
	filtersMeta [maxFilters]uint8
	udcodec     uint8
	flags2      uint8
	b2flags     uint8
}

func (h *header) memcpyed() bool  { return h.flags&flagMemcpyed != 0 }
func (h *header) dontSplit() bool { return h.flags&flagDontSplit != 0 }
func (h *header) format() int     { return int(h.flags >> 5) }
func (h *header) special() int    { return int(h.b2flags>>4) & 7 }

// nblocks is the number of blocks, the last one possibly short (the leftover).
func (h *header) nblocks() int {
	if h.nbytes == 0 {
		return 0
	}
	return (h.nbytes + h.blocksize - 1) / h.blocksize
}

// parseHeader reads and validates the header of a chunk. v2 selects the Blosc2
// rules; without it only Blosc1 chunks (format version 1 or 2) are accepted.
func parseHeader(src []byte, v2 bool) (header, error) {
	var h header
	p := prefix(v2)
	if err := checkChunkStart(src, p); err != nil {
		return h, err
	}
	h.version = src[0]
	h.versionLZ = src[1]
	h.flags = src[2]
	h.typesize = int(src[3])
	h.hlen = minHeaderLen
	if err := h.readFormat(src, v2, p); err != nil {
		return h, err
	}
	if err := h.readSizes(src, p); err != nil {
		return h, err
	}
	if h.hlen == extHeaderLen {
		if err := h.checkBlosc2Flags(); err != nil {
			return h, err
		}
	}
	return h, nil
}

// checkChunkStart refuses input that cannot start a chunk. A Blosc2 frame is named as
// such, whatever its length: it is a container of chunks, not a corrupt one.
func checkChunkStart(src []byte, p string) error {
	if isFrame(src) {
		return fmt.Errorf("%s: input is a Blosc2 contiguous frame (super-chunk), not a chunk: %w", p, ErrUnsupported)
	}
	if len(src) < minHeaderLen {
		return fmt.Errorf("%s: input of %d bytes is shorter than the %d-byte header: %w", p, len(src), minHeaderLen, ErrCorrupt)
	}
	return nil
}

// readFormat applies the rules of the header's format version and fills the filter
// pipeline: a Blosc1 chunk (version 1 or 2), or, with v2, a Blosc2 one (up to 6)
// with an extended header or a Blosc1-style one.
func (h *header) readFormat(src []byte, v2 bool, p string) error {
	switch {
	case h.version == 0:
		return fmt.Errorf("%s: format version 0: %w", p, ErrCorrupt)
	case h.version <= 2:
		return h.readBlosc1Flags(p)
	case !v2:
		return fmt.Errorf("%s: format version %d is a Blosc2 chunk (use Decompress2): %w", p, h.version, ErrUnsupported)
	case h.version > 6:
		return fmt.Errorf("%s: format version %d is newer than this decoder (6): %w", p, h.version, ErrUnsupported)
	case h.flags&(flagShuffle|flagBitshuffle) == flagShuffle|flagBitshuffle:
		return h.readExtended(src, p)
	default:
		// Blosc2 chunk with a Blosc1-style header.
		h.shuffleFromFlags()
		if h.flags&flagDelta != 0 {
			h.filters[maxFilters-2] = filterDelta
		}
	}
	return nil
}

// readBlosc1Flags checks a Blosc1 header's flags and maps its shuffle to a filter.
// Both shuffle bits set is how Blosc2 marks its extended header; c-blosc 1.x never
// writes that, nor the bit Blosc2 uses for delta.
func (h *header) readBlosc1Flags(p string) error {
	if h.flags&(flagShuffle|flagBitshuffle) == flagShuffle|flagBitshuffle {
		return fmt.Errorf("%s: format version %d header has both shuffle and bitshuffle flags: %w", p, h.version, ErrCorrupt)
	}
	if h.flags&flagDelta != 0 {
		return fmt.Errorf("%s: format version %d header has reserved flag 0x08 set: %w", p, h.version, ErrCorrupt)
	}
	h.shuffleFromFlags()
	return nil
}

// shuffleFromFlags puts a short header's shuffle flag in the last filter slot, as
// c-blosc2 does, so that one filter pipeline serves both header forms.
func (h *header) shuffleFromFlags() {
	switch {
	case h.flags&flagShuffle != 0:
		h.filters[maxFilters-1] = filterShuffle
	case h.flags&flagBitshuffle != 0:
		h.filters[maxFilters-1] = filterBitshuffle
	}
}

// readExtended reads the Blosc2 extended header: the filter pipeline, the
// user-defined codec and the Blosc2 flags.
func (h *header) readExtended(src []byte, p string) error {
	if len(src) < extHeaderLen {
		return fmt.Errorf("%s: input of %d bytes is shorter than the %d-byte extended header: %w", p, len(src), extHeaderLen, ErrCorrupt)
	}
	h.hlen = extHeaderLen
	copy(h.filters[:], src[16:22])
	h.udcodec = src[22]
	copy(h.filtersMeta[:], src[24:30])
	h.flags2 = src[30]
	h.b2flags = src[31]
	return nil
}

// readSizes reads nbytes, blocksize and cbytes and checks them, with the typesize,
// against each other and against the input, so that the decoder can trust them.
func (h *header) readSizes(src []byte, p string) error {
	nbytes := binary.LittleEndian.Uint32(src[4:])
	blocksize := binary.LittleEndian.Uint32(src[8:])
	cbytes := binary.LittleEndian.Uint32(src[12:])
	if h.typesize == 0 {
		return fmt.Errorf("%s: typesize 0 in header: %w", p, ErrCorrupt)
	}
	const maxInt32 = 1<<31 - 1
	if nbytes > maxInt32 || blocksize > maxInt32 || cbytes > maxInt32 {
		return fmt.Errorf("%s: header sizes out of range (nbytes %d, blocksize %d, cbytes %d): %w", p, nbytes, blocksize, cbytes, ErrCorrupt)
	}
	h.nbytes, h.blocksize, h.cbytes = int(nbytes), int(blocksize), int(cbytes)
	if h.cbytes < h.hlen {
		return fmt.Errorf("%s: compressed size %d in header is smaller than the %d-byte header: %w", p, h.cbytes, h.hlen, ErrCorrupt)
	}
	if h.cbytes > len(src) {
		return fmt.Errorf("%s: compressed size %d in header exceeds the %d input bytes (truncated chunk?): %w", p, h.cbytes, len(src), ErrCorrupt)
	}
	if h.nbytes > 0 && h.blocksize == 0 && !h.memcpyed() && h.special() == 0 {
		return fmt.Errorf("%s: block size 0 with %d data bytes: %w", p, h.nbytes, ErrCorrupt)
	}
	if h.blocksize > h.nbytes {
		// c-blosc shrinks the block size to the buffer; treat a larger one alike.
		h.blocksize = h.nbytes
	}
	return nil
}

func (h *header) checkBlosc2Flags() error {
	switch {
	case h.flags2&vlBlocks != 0:
		return fmt.Errorf("blosc2: variable-length blocks (flags2 0x%02x): %w", h.flags2, ErrUnsupported)
	case h.flags2 != 0:
		return fmt.Errorf("blosc2: unknown flags2 0x%02x: %w", h.flags2, ErrUnsupported)
	case h.b2flags&b2Lazy != 0:
		return fmt.Errorf("blosc2: lazy chunk (data left in a frame): %w", ErrUnsupported)
	case h.b2flags&b2UseDict != 0:
		return fmt.Errorf("blosc2: dictionary-compressed chunk: %w", ErrUnsupported)
	case h.b2flags&b2BigEndian != 0:
		return fmt.Errorf("blosc2: chunk written on a big-endian machine: %w", ErrUnsupported)
	case h.b2flags&b2Instr != 0:
		return fmt.Errorf("blosc2: instrumented-codec chunk: %w", ErrUnsupported)
	}
	switch s := h.special(); s {
	case 0, specialZero, specialNaN, specialValue, specialUninit:
	default:
		return fmt.Errorf("blosc2: special value kind %d: %w", s, ErrUnsupported)
	}
	return nil
}

// isFrame reports whether src starts like a Blosc2 contiguous frame: a msgpack
// array header byte, a str8 marker and the magic "b2frame\0".
func isFrame(src []byte) bool {
	const magic = "b2frame\x00"
	return len(src) >= 2+len(magic) && string(src[2:2+len(magic)]) == magic
}

func prefix(v2 bool) string {
	if v2 {
		return "blosc2"
	}
	return "blosc"
}
