// Package zarr reads Zarr v2 and v3 arrays (as written by zarr-python, xarray and
// tensorstore) from a Store into caller-provided buffers.
//
// Open a hierarchy, then an array, then read boxes:
//
//	h, err := zarr.OpenDir("sat.zarr")      // consolidated metadata when present
//	a, err := h.OpenArray("data")
//	dst := make([]float32, 12*11*64*64)
//	err = a.ReadBoxFloat32([]int{0, 0, 100, 100}, []int{12, 11, 164, 164}, dst,
//		&zarr.ReadOptions{CF: true, Parallel: 4})
//
// What is supported:
//   - metadata: v2 .zarray/.zgroup/.zattrs and consolidated .zmetadata; v3 zarr.json
//     for arrays and groups, with inline consolidated metadata;
//   - chunk keys: v2 "." and "/" separators, v3 "default" and "v2" encodings; missing
//     chunks read as the fill value; edge chunks are clipped; v2 C and F order;
//   - data types: bool, int8..uint64, float16/32/64 in either byte order,
//     datetime64/timedelta64, fixed-length and variable-length strings;
//   - v2 compressors blosc, blosc2 (ocf-blosc2), zstd, zlib, gzip, lz4, bz2 and the
//     filters delta, fixedscaleoffset and vlen-utf8; v3 codecs bytes, transpose,
//     blosc, gzip, zstd, crc32c, sharding_indexed (nested too), vlen-utf8, and the
//     numcodecs.* wrappers of the v2 compressors;
//   - CF decoding (scale_factor, add_offset, _FillValue, missing_value, _Unsigned) to
//     float32 with NaN, and CF time units for coordinates (ReadTimes, ReadDurations).
//
// Decoded chunks are in the array's element type, host byte order and C order
// (DecodeChunk); ReadBox converts while it copies. A ChunkCache shared by readers
// can hold decoded chunks. Errors are *Error values naming the store, array, key and
// codec; they wrap ErrNotFound, ErrCorrupt or ErrUnsupported where those apply.
package zarr
