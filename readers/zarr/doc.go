// Package zarr reads Zarr v2 and v3 arrays (as zarr-python, xarray and tensorstore
// write them) from a Store into caller-provided buffers.
//
//	h, err := zarr.OpenPath("sat.zarr")     // a directory or a .zarr.zip; consolidated metadata when present
//	a, err := h.OpenArray("data")
//	a, err = zarr.OpenArrayPath("sat.zarr/data") // the same from one path (OpenNodePath: any node)
//	dst := make([]float32, 12*11*64*64)
//	err = a.ReadBoxFloat32([]int{0, 0, 100, 100}, []int{12, 11, 164, 164}, dst,
//		&zarr.ReadOptions{CF: true, Parallel: 4})
//	times, err := timeArray.ReadTimes()     // int64 Unix nanoseconds, NaT for missing
//	names, err := channelArray.ReadStrings()
//
// # Stores
//
// A Store maps keys to bytes (Get, GetRange) and reports a missing key with an error
// wrapping ErrNotFound. DirStore (a directory), ZipStore (a zip archive) and MemStore
// are provided; a network store needs only Get and GetRange. Optional interfaces
// (BufferedStore, Lister, Sizer) let the reader reuse buffers, discover hierarchies
// without consolidated metadata and count stored chunks. Stores are assumed not to
// change while arrays are open.
//
// # Reading
//
// ReadBox reads the box [start, stop) in C order, converting each element to the
// requested type (the stored type by default). With CF it applies xarray's decoding
// to float32 (or float64): _FillValue (for v2 arrays the zarr fill_value, as xarray
// does), missing_value and NaN become NaN, other values raw*scale_factor+add_offset.
// A chunk that is not stored reads as the fill value (zeros when fill_value is null,
// as zarr-python 3 does). Edge chunks are clipped. ReadBox allocates nothing in steady
// state (buffers are pooled), is safe for concurrent use, and decodes chunks in
// parallel with ReadOptions.Parallel.
//
// ReadBoxRaw reads a box of any fixed-size type as the stored elements' bytes (host
// byte order), for the types ReadBox does not convert (complex, |S, <U);
// ReadBoxStrings, ReadBoxTimes and ReadBoxDurations read a box of strings, times and
// durations. All of them walk only the chunks the box touches.
//
// DecodeChunk returns one chunk decoded (native element type, host byte order, C
// order, full chunk shape) for callers that cache and gather themselves; a
// ChunkCache set with SetCache is shared by ReadBox calls. For sharded arrays the
// chunk grid is the inner chunk grid and each inner chunk is read with range reads.
// A Float32Decoder CF-decodes such chunks to float32 with ReadBox's arithmetic (a
// table of every raw value for 1- and 2-byte types); CFInfo.Params gives its
// parameters.
//
// # Formats
//
//   - metadata: v2 .zarray/.zgroup/.zattrs and consolidated .zmetadata; v3 zarr.json
//     for arrays and groups, with inline consolidated metadata; unknown v3 fields
//     are refused unless marked must_understand: false;
//   - chunk keys: v2 "." and "/" (and legacy nested stores without
//     dimension_separator), v3 "default" and "v2" encodings; v2 C and F order;
//   - data types: bool, int8..uint64, float16/32/64 in either byte order,
//     complex (DecodeChunk and ReadBoxRaw), datetime64/timedelta64 with any fixed unit,
//     fixed-length (|S, <U) and variable-length strings (v2 object + vlen-utf8,
//     v3 string) and bytes (v2 object + vlen-bytes, v3 variable_length_bytes);
//   - fill values: numbers, "NaN", "Infinity", "-Infinity", "NaT", null, v3 hex
//     bit patterns, base64 for byte strings;
//   - v2 compressors blosc (readers/blosc), blosc2 (ocf-blosc2, readers/blosc), zstd,
//     zlib, gzip, lz4 (numcodecs framing), bz2, and the checksums crc32, adler32
//     and crc32c (verified; as filters too); v2 filters delta, fixedscaleoffset,
//     shuffle, quantize, bitround, astype, vlen-utf8 and vlen-bytes;
//   - v3 codecs bytes (alias endian), transpose, blosc, gzip, zstd, crc32c
//     (verified), sharding_indexed (index at either end, nested sharding, empty inner
//     chunks), vlen-utf8, vlen-bytes, and the numcodecs.* wrappers of the v2
//     compressors and checksums;
//   - CF: dimension names (_ARRAY_DIMENSIONS, dimension_names), scale_factor,
//     add_offset, _FillValue (including xarray's base64 form in v3), missing_value,
//     _Unsigned, and time units "<unit> since <time>" for ReadTimes/ReadDurations.
//
// # Errors
//
// Errors are *Error values naming the store, the array, the key and the codec at
// fault, and wrap ErrNotFound, ErrCorrupt (a truncated or damaged chunk, a checksum
// mismatch, a size that disagrees with the metadata) or ErrUnsupported (a codec,
// filter, data type or extension this package does not implement). Bad input gives
// an error, never a panic or silently wrong values.
package zarr
