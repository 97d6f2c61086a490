// Package sampler builds the nowcasting examples of docs/ARCHITECTURE.md from aligned Zarr
// sources and writes whole batches straight into ring slot memory.
//
// A [Job] is made from a validated configuration (package config, sources of kind "zarr"). At
// start-up it opens the stores' metadata and reads their coordinates only; it computes the t0
// candidates (the anchor times at which every source's window fits) and the location range
// (the anchor grid positions at which every crop fits). [Job.Fill] then writes batch k:
//
//   - example e of batch k draws its t0 and location from a counter-based hash of
//     (seed, global batch index, example index), so the stream is a pure function of the
//     configuration and the seed, whatever the number of readers, processes or their timing;
//   - each source's window is gathered from decoded chunks held in a [Cache] shared by all
//     readers, as float32 with the CF decoding, the NaN policy and the normalisation already
//     applied, so that steady state is a sequence of row copies into slot memory;
//   - when the data is larger than the cache, a locality mode draws the examples of a batch
//     from a resident set of time segments that rotates deterministically with the batch index.
//
// The example definition is the one of the reference workload (WORKLOAD.md, nowcast-ref): the
// anchor (satellite) window and crop by index, NWP by the latest run old enough and the
// nearest coordinate (ties to the lower index) with clamping, point data by the nearest K
// systems in ascending system order.
package sampler
