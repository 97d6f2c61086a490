// Package blosc decodes Blosc chunks in pure Go: Blosc1 chunks as c-blosc (and so
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
// Every length and offset read from the input is checked: corrupt input yields an
// error, never a panic or an out-of-bounds access. Features this package does not
// implement yield an error wrapping ErrUnsupported that names the feature.
//
// The package-level functions are safe for concurrent use; they borrow a Decoder
// from a pool. A Decoder keeps the per-block scratch buffers between calls, so
// decoding allocates nothing in steady state. A Decoder is not safe for
// concurrent use.
package blosc
