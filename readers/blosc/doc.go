// Package blosc decodes Blosc chunks in Go, without cgo: Blosc1 chunks as c-blosc (and so
// numcodecs' "blosc" codec and the zarr v3 "blosc" codec) writes them, and Blosc2
// chunks as python-blosc2 (and so Open Climate Fix's ocf_blosc2 "blosc2" codec)
// writes them.
//
// Both formats cut the data into blocks; each block is optionally split into one
// stream per byte of the element (typesize), each stream is compressed with one
// codec (BloscLZ, LZ4/LZ4HC, Snappy, zlib, zstd), and a filter (byte shuffle,
// bit shuffle, and in Blosc2 also delta and truncated precision) is applied to
// each block before compression. Decompress and Decompress2 undo all of this.
//
// The wire formats follow c-blosc's README_CHUNK_FORMAT.rst and c-blosc2's
// README_CHUNK_FORMAT.rst; BloscLZ is decoded by this package, the other codecs
// by github.com/pierrec/lz4/v4, github.com/klauspost/compress (zstd, zlib, s2 for
// Snappy).
//
// On amd64 the byte unshuffle for typesizes 2, 4 and 8 runs small SSE2 kernels
// (shuffle_amd64.s, fuzzed against the portable loops by FuzzUnshuffle); other
// architectures use the portable loops.
//
// Every length and offset read from the input is checked: corrupt input yields an
// error, never a panic or an out-of-bounds access. Features this package does not
// implement yield an error wrapping ErrUnsupported that names the feature.
//
// What is covered: Blosc1 format versions 1 and 2 (c-blosc 1.x writes 2); Blosc2
// format versions 3 to 6 with the 32-byte extended header (c-blosc2 3.x writes 5;
// 6 is accepted when its variable-length-blocks flag is clear);
// memcpyed chunks; split and unsplit blocks and the leftover block; streams
// stored raw, as zero runs or as one-byte runs; the Blosc2 filters shuffle (with
// the element-size override in filters_meta), bitshuffle, delta and truncprec
// (nothing to undo); the special chunks all-zero, all-NaN (typesize 4 or 8),
// repeated value and uninitialised (decoded as zeros). ocf_blosc2 writes plain
// chunks (blosc2.compress), so Decompress2 takes a chunk; a contiguous frame
// (super-chunk) is recognised and refused. Not covered (ErrUnsupported):
// user-defined codecs and filters (e.g. bytedelta, filter 35), dictionaries,
// variable-length blocks, lazy chunks, big-endian chunks.
//
// On error the contents of dst are unspecified; nothing past the decompressed
// size is ever written.
//
// The package-level functions are safe for concurrent use; they borrow a Decoder
// from a pool. A Decoder keeps the per-block scratch buffers between calls, so
// decoding allocates nothing in steady state. A Decoder is not safe for
// concurrent use.
package blosc
