// Package chunks is the sampler's lowest floor: decoded chunks and the reads that bring them,
// knowing nothing of sources, windows or rule sets. A [Cache] holds decoded chunks (blocks of
// bytes under uint64 keys) within a memory budget, in memory mapped outside the Go heap and
// reused per size; [Pins] are what one reader holds while it copies rows; a [ReadWindow] bounds
// and adapts the reads in flight to object storage. Package sampler above it turns a store's
// array into keys and blocks (chunked.go) and examples into rows.
package chunks
