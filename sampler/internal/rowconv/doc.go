// Package rowconv holds the row kernels of the sampler's gather: they turn rows of a
// decoded chunk kept in the array's stored width (int8, uint8, int16, uint16, float16
// or float32, host byte order) into the float32 values of a batch while writing them
// into the ring slot, and copy float32 rows, with or without non-temporal stores.
//
// A Conv is built once per stored array (and normalisation channel) from Params: CF
// decoding exactly as zarr.Float32Decoder does it, then the sampler's normalisation
// (float64 arithmetic) and NaN policy. Its results are bit for bit those of that scalar
// path. For the 1- and 2-byte types New folds the whole chain into a table of the
// final value of every raw bit pattern, computed by the scalar path itself; float32
// rows are copied when nothing changes them and go through the scalar path otherwise.
//
// On amd64 the loops are assembly. With AVX2 the 1- and 2-byte types are computed in
// registers, 8 values a step (arith_amd64.s: float64 multiply then add, rounded to
// float32, as the scalar path; float16 widened by F16C), and New keeps that kernel
// only if it reproduces the table for every raw bit pattern, so it can never give
// other bits (where it cannot express the parameters, or does not reproduce them, the
// table is gathered with VPGATHERDD); float32 rows are copied with 32-byte moves.
// Without AVX2, SSE2 loops look the table up and copy with 16-byte moves. Other
// architectures run the portable Go loops.
//
// The NT variants (RowNT, RowsNT, CopyNT, CopyRowsNT) store the aligned part of each
// destination row with non-temporal stores (VMOVNTPS, MOVNTPS, MOVNTI), which bypass
// the caches: a batch larger than the last-level cache then neither evicts the chunks
// it is gathered from nor costs a read for ownership of every destination line. The
// writer calls Fence before it publishes the slot; UseNT is the one rule for when
// non-temporal stores pay (measured, only for batches well past the last-level cache:
// the gather's partial-line writes make them dearer than ordinary stores below that).
// Elsewhere the NT variants store normally and UseNT is false.
//
// The kernels prefetch their source a few rows ahead of the row they convert; RowsThen
// and CopyRowsThen also take the next call's rows and prefetch row r of those with row
// r of their own, so that a gather of many short pieces (a few rows of one channel
// plane each) finds each piece's first rows already on their way (prefetches are
// hints only: they neither fault nor change what is written).
package rowconv
