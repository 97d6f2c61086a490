package blosc

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// zstdDecoder is shared by all Decoders: DecodeAll is safe for concurrent use
// and, with the cap limit, decodes into the caller's buffer without allocating.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // one per GOMAXPROCS
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(1<<31),
	)
})

// decodeStream decompresses one stream, which must fill out exactly. The
// capacity of out past its length may be overwritten (it is either scratch or
// output that a later stream rewrites).
func (d *Decoder) decodeStream(format int, out, in []byte) error {
	var n int
	var err error
	switch format {
	case formatBloscLZ:
		n, err = blosclzDecompress(out, in)
		if err != nil {
			return fmt.Errorf("blosclz: %w", err)
		}
	case formatLZ4:
		n, err = lz4.UncompressBlock(in, out)
		if err != nil {
			return fmt.Errorf("lz4: %v: %w", err, ErrCorrupt)
		}
	case formatSnappy:
		dn, derr := s2.DecodedLen(in)
		if derr != nil || dn != len(out) {
			return fmt.Errorf("snappy: decoded length %d (%v), want %d: %w", dn, derr, len(out), ErrCorrupt)
		}
		res, derr := s2.Decode(out, in)
		if derr != nil {
			return fmt.Errorf("snappy: %v: %w", derr, ErrCorrupt)
		}
		n = len(res)
	case formatZlib:
		n, err = d.inflate(out, in)
		if err != nil {
			return fmt.Errorf("zlib: %w", err)
		}
	case formatZstd:
		zd, zerr := zstdDecoder()
		if zerr != nil {
			return fmt.Errorf("zstd: %w", zerr)
		}
		res, derr := zd.DecodeAll(in, out[:0])
		if derr != nil {
			return fmt.Errorf("zstd: %v: %w", derr, ErrCorrupt)
		}
		if len(res) > 0 && &res[0] != &out[0] {
			return fmt.Errorf("zstd: output outgrew the %d-byte stream: %w", len(out), ErrCorrupt)
		}
		n = len(res)
	default:
		return fmt.Errorf("codec format %d not supported: %w", format, ErrUnsupported)
	}
	if n != len(out) {
		return fmt.Errorf("stream decoded to %d bytes, want %d: %w", n, len(out), ErrCorrupt)
	}
	return nil
}

// inflate decodes a zlib stream into out, reusing the Decoder's reader. The
// stream must end (checksum verified) exactly at len(out) bytes.
func (d *Decoder) inflate(out, in []byte) (int, error) {
	d.br.Reset(in)
	if d.zr == nil {
		zr, err := zlib.NewReader(&d.br)
		if err != nil {
			return 0, fmt.Errorf("%v: %w", err, ErrCorrupt)
		}
		d.zr = zr
	} else if err := d.zr.(zlib.Resetter).Reset(&d.br, nil); err != nil {
		return 0, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	n, err := io.ReadFull(d.zr, out)
	if err != nil {
		return n, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	// Read on to the end so that the Adler-32 checksum is verified.
	if m, err := d.zr.Read(d.one[:]); m != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			return n, fmt.Errorf("stream holds more than %d bytes: %w", len(out), ErrCorrupt)
		}
		return n, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return n, nil
}
