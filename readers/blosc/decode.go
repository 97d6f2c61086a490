package blosc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// Decoder decodes Blosc1 and Blosc2 chunks, keeping its scratch buffers between
// calls. The zero value is ready to use. A Decoder must not be used by two
// goroutines at once; the package-level functions pool Decoders for that.
type Decoder struct {
	tmp  []byte // decoded streams of one block, before the filters are undone
	tmp2 []byte // second buffer for filter pipelines with more than one step
	tmp3 []byte // bit-unshuffle scratch

	zr  io.ReadCloser // reused zlib reader
	br  bytes.Reader
	one [1]byte
}

var decoderPool = sync.Pool{New: func() any { return new(Decoder) }}

// Decompress decodes one Blosc1 chunk (format version 1 or 2, as c-blosc 1.x and
// numcodecs write) from src into dst, which must hold at least the decompressed
// size (see DecompressedSize). It returns the number of bytes written. Bytes of
// src past the chunk's compressed size are ignored.
func Decompress(dst, src []byte) (int, error) {
	d := decoderPool.Get().(*Decoder)
	n, err := d.Decompress(dst, src)
	decoderPool.Put(d)
	return n, err
}

// DecompressedSize returns the decompressed size of the Blosc1 chunk in src,
// after checking its header.
func DecompressedSize(src []byte) (int, error) {
	h, err := parseHeader(src, false)
	if err != nil {
		return 0, err
	}
	return h.nbytes, nil
}

// Decompress2 decodes one Blosc2 chunk (as python-blosc2's compress/compress2 and
// ocf_blosc2 write; c-blosc 1.x chunks are accepted too) from src into dst, which
// must hold at least the decompressed size. It returns the number of bytes
// written. A Blosc2 contiguous frame (super-chunk) is refused with an error.
func Decompress2(dst, src []byte) (int, error) {
	d := decoderPool.Get().(*Decoder)
	n, err := d.Decompress2(dst, src)
	decoderPool.Put(d)
	return n, err
}

// Decompressed2Size returns the decompressed size of the Blosc2 (or Blosc1)
// chunk in src, after checking its header.
func Decompressed2Size(src []byte) (int, error) {
	h, err := parseHeader(src, true)
	if err != nil {
		return 0, err
	}
	return h.nbytes, nil
}

// Decompress is the Decoder form of the package-level Decompress.
func (d *Decoder) Decompress(dst, src []byte) (int, error) {
	h, err := parseHeader(src, false)
	if err != nil {
		return 0, err
	}
	return d.decode(&h, dst, src, false)
}

// Decompress2 is the Decoder form of the package-level Decompress2.
func (d *Decoder) Decompress2(dst, src []byte) (int, error) {
	h, err := parseHeader(src, true)
	if err != nil {
		return 0, err
	}
	return d.decode(&h, dst, src, true)
}

func (d *Decoder) decode(h *header, dst, src []byte, v2 bool) (int, error) {
	p := prefix(v2)
	if len(dst) < h.nbytes {
		return 0, fmt.Errorf("%s: destination of %d bytes is smaller than the decompressed size %d", p, len(dst), h.nbytes)
	}
	// Capacity ends at nbytes: codecs may use the capacity past a stream as
	// slack, and past nbytes is the caller's memory.
	dst = dst[:h.nbytes:h.nbytes]
	src = src[:h.cbytes]
	if h.nbytes == 0 {
		return 0, nil
	}
	if s := h.special(); s != 0 {
		if err := fillSpecial(h, dst, src); err != nil {
			return 0, err
		}
		return h.nbytes, nil
	}
	if h.memcpyed() {
		if h.cbytes < h.hlen+h.nbytes {
			return 0, fmt.Errorf("%s: memcpyed chunk holds %d data bytes, header says %d: %w", p, h.cbytes-h.hlen, h.nbytes, ErrCorrupt)
		}
		copy(dst, src[h.hlen:h.hlen+h.nbytes])
		return h.nbytes, nil
	}
	if err := d.checkPipeline(h, p); err != nil {
		return 0, err
	}
	nblocks := h.nblocks()
	bstartsEnd := h.hlen + 4*nblocks
	if bstartsEnd > len(src) || bstartsEnd < h.hlen {
		return 0, fmt.Errorf("%s: %d block offsets do not fit in the %d-byte chunk: %w", p, nblocks, len(src), ErrCorrupt)
	}
	for i := 0; i < nblocks; i++ {
		bstart := int(binary.LittleEndian.Uint32(src[h.hlen+4*i:]))
		if bstart < bstartsEnd || bstart >= len(src) {
			return 0, fmt.Errorf("%s: block %d starts at offset %d, outside the data section [%d, %d): %w", p, i, bstart, bstartsEnd, len(src), ErrCorrupt)
		}
		start := i * h.blocksize
		end := min(start+h.blocksize, h.nbytes)
		if err := d.decodeBlock(h, dst, start, end, src, bstart, v2); err != nil {
			return 0, fmt.Errorf("%s: block %d: %w", p, i, err)
		}
	}
	return h.nbytes, nil
}

// checkPipeline refuses filters and codecs this package does not know, before
// any block is touched.
func (d *Decoder) checkPipeline(h *header, p string) error {
	for i, f := range h.filters {
		switch f {
		case filterNone, filterShuffle, filterBitshuffle, filterDelta, filterTruncPrec:
		default:
			return fmt.Errorf("%s: filter %d (slot %d) not supported: %w", p, f, i, ErrUnsupported)
		}
	}
	switch f := h.format(); f {
	case formatBloscLZ, formatLZ4, formatZlib, formatZstd:
	case formatSnappy:
		if h.version >= 3 {
			return fmt.Errorf("%s: codec format 2 (reserved in Blosc2): %w", p, ErrCorrupt)
		}
	case formatUDCodec:
		if h.version >= 3 {
			return fmt.Errorf("%s: user-defined codec %d not supported: %w", p, h.udcodec, ErrUnsupported)
		}
		return fmt.Errorf("%s: codec format %d not supported: %w", p, f, ErrUnsupported)
	default:
		return fmt.Errorf("%s: codec format %d not supported: %w", p, f, ErrUnsupported)
	}
	return nil
}

// decodeBlock decodes the block dst[start:end] from the streams at src[bstart:].
func (d *Decoder) decodeBlock(h *header, dst []byte, start, end int, src []byte, bstart int, v2 bool) error {
	bsize := end - start
	leftover := bsize < h.blocksize
	out := dst[start:end]

	// Data-moving filter steps; delta and truncprec work in place or not at all.
	moves := moveSteps(h)

	// Streams go straight into dst when no filter has to move them.
	target := out
	if moves != 0 {
		// Slack past the block lets zstd use its faster copies for the last stream.
		d.tmp = grow(d.tmp, bsize+codecSlack)
		target = d.tmp[:bsize]
	}

	nsplits := 1
	split := !h.dontSplit() && !leftover
	if h.version <= 2 {
		split = split && h.typesize <= maxSplits && h.blocksize/h.typesize >= minBufferSize
	}
	if split {
		nsplits = h.typesize
	}
	if bsize%nsplits != 0 {
		return fmt.Errorf("block of %d bytes does not split into %d streams: %w", bsize, nsplits, ErrCorrupt)
	}
	neblock := bsize / nsplits
	pos := bstart
	for j := 0; j < nsplits; j++ {
		if pos+4 > len(src) {
			return fmt.Errorf("stream %d size at offset %d is past the end of the chunk: %w", j, pos, ErrCorrupt)
		}
		csize := int(int32(binary.LittleEndian.Uint32(src[pos:])))
		pos += 4
		sout := target[j*neblock : (j+1)*neblock]
		switch {
		case csize < 0 && v2 && h.version >= 3:
			// A run of one byte value; a token byte follows.
			if pos >= len(src) {
				return fmt.Errorf("stream %d run token is past the end of the chunk: %w", j, ErrCorrupt)
			}
			token := src[pos]
			pos++
			if token&1 == 0 || csize < -255 {
				return fmt.Errorf("stream %d: invalid run (size %d, token 0x%02x): %w", j, csize, token, ErrCorrupt)
			}
			fill(sout, byte(-csize))
			continue
		case csize == 0 && v2 && h.version >= 3:
			clear(sout)
			continue
		case csize <= 0:
			return fmt.Errorf("stream %d has size %d: %w", j, csize, ErrCorrupt)
		case csize > len(src)-pos:
			return fmt.Errorf("stream %d of %d bytes at offset %d runs past the %d-byte chunk: %w", j, csize, pos, len(src), ErrCorrupt)
		}
		in := src[pos : pos+csize]
		pos += csize
		if csize == neblock {
			copy(sout, in) // stored uncompressed
			continue
		}
		if err := d.decodeStream(h.format(), sout, in); err != nil {
			return fmt.Errorf("stream %d: %w", j, err)
		}
	}
	if moves == 0 {
		d.undoInPlace(h, dst, start, out)
		return nil
	}
	return d.undoFilters(h, dst, start, target, out)
}

// undoInPlace undoes a pipeline that has no data-moving step (delta only).
func (d *Decoder) undoInPlace(h *header, dst []byte, start int, buf []byte) {
	for i := maxFilters - 1; i >= 0; i-- {
		if h.filters[i] == filterDelta {
			undoDelta(dst, start, h.typesize, buf)
		}
	}
}

// undoFilters runs the filter pipeline backwards from buf (scratch) and leaves
// the result in out.
func (d *Decoder) undoFilters(h *header, dst []byte, start int, buf, out []byte) error {
	bsize := len(out)
	// Count the data-moving steps so that the last one writes into out.
	steps := moveSteps(h)
	cur := buf
	next := func() []byte {
		steps--
		if steps == 0 {
			return out
		}
		if &cur[0] == &d.tmp[0] {
			d.tmp2 = grow(d.tmp2, bsize)
			return d.tmp2[:bsize]
		}
		return d.tmp[:bsize]
	}
	for i := maxFilters - 1; i >= 0; i-- {
		switch h.filters[i] {
		case filterShuffle:
			ts := shuffleTypesize(h, i)
			if ts <= 1 {
				continue
			}
			o := next()
			unshuffle(o, cur, ts)
			cur = o
		case filterBitshuffle:
			o := next()
			d.tmp3 = grow(d.tmp3, bsize)
			bitunshuffle(o, cur, d.tmp3, h.typesize, h.version >= 3)
			cur = o
		case filterDelta:
			undoDelta(dst, start, h.typesize, cur)
		}
	}
	return nil
}

// moveSteps counts the filter steps that move data from one buffer to another.
func moveSteps(h *header) int {
	steps := 0
	for i, f := range h.filters {
		switch f {
		case filterShuffle:
			if shuffleTypesize(h, i) > 1 {
				steps++
			}
		case filterBitshuffle:
			steps++
		}
	}
	return steps
}

// shuffleTypesize is the element size the shuffle filter in slot i works on: a
// non-zero filters_meta overrides the chunk's typesize.
func shuffleTypesize(h *header, i int) int {
	if m := int(h.filtersMeta[i]); m != 0 {
		return m
	}
	return h.typesize
}

// The quiet NaNs c-blosc2 writes (Go's math.NaN has a non-zero payload).
const (
	nan32 = 0x7FC00000
	nan64 = 0x7FF8000000000000
)

// fillSpecial writes a Blosc2 special chunk (no blocks) into dst.
func fillSpecial(h *header, dst, src []byte) error {
	switch h.special() {
	case specialZero, specialUninit:
		// Uninitialised chunks have no defined contents; zeros are the safe choice.
		clear(dst)
	case specialNaN:
		switch h.typesize {
		case 4:
			var v [4]byte
			binary.LittleEndian.PutUint32(v[:], nan32)
			fillPattern(dst, v[:])
		case 8:
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], nan64)
			fillPattern(dst, v[:])
		default:
			return fmt.Errorf("blosc2: NaN special chunk with typesize %d (only 4 and 8 are floats): %w", h.typesize, ErrCorrupt)
		}
	case specialValue:
		if h.cbytes < h.hlen+h.typesize {
			return fmt.Errorf("blosc2: repeated-value chunk of %d bytes has no room for its %d-byte value: %w", h.cbytes, h.typesize, ErrCorrupt)
		}
		fillPattern(dst, src[h.hlen:h.hlen+h.typesize])
	}
	return nil
}

// fill sets every byte of b to v.
func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// fillPattern repeats pat over b (the last copy may be partial).
func fillPattern(b, pat []byte) {
	n := copy(b, pat)
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}

// codecSlack is the spare capacity given after a stream's output (zstd's fast
// path wants 16 bytes past the block it decodes).
const codecSlack = 64

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
