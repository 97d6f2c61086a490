// Package rowconv holds the row kernels of the sampler's gather: they turn rows of a
// decoded chunk, kept in the array's stored width (int8, uint8, int16, uint16, float16
// or float32, host byte order), into the float32 values of a batch while writing them
// into the ring slot, and copy float32 rows with or without non-temporal stores.
//
// A Conv is built once per stored array (and normalisation channel) from Params: CF
// decoding exactly as zarr.Float32Decoder does it, then the sampler's normalisation
// (float64 arithmetic) and NaN policy. Its results are bit for bit those of that scalar
// path. For the 1- and 2-byte types New folds the whole chain into a table holding the
// final value of every raw bit pattern, computed by the scalar path itself, so that a
// row costs one table load per value whatever the parameters are; float32 rows are
// copied when nothing changes them and decoded by the scalar path otherwise.
//
// On amd64 the loops are assembly (rowconv_amd64.s): with AVX2 the table loads are
// gathers (VPGATHERDD) and copies use 32-byte moves; without it SSE2 loops do the same
// with 16-byte moves and scalar table loads. The NT variants (RowNT, RowsNT, CopyNT,
// CopyRowsNT) write the aligned part of each destination row with non-temporal stores
// (MOVNTPS), which bypass the caches, so a batch larger than the last-level cache
// neither evicts the decoded chunks nor costs a read for ownership of every line; the
// writer calls Fence before it publishes the slot. UseNT is the one rule saying when
// that pays. Other architectures use the portable Go loops, with ordinary stores.
package rowconv
