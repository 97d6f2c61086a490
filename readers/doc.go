// Package readers groups gobatch's data-source readers: readers/zarr reads Zarr v2
// and v3 arrays into batch memory, readers/blosc decodes Blosc1 and Blosc2 chunks.
// The package itself holds no code.
package readers
