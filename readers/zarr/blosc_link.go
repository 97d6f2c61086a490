package zarr

import "github.com/gobatch/gobatch/readers/blosc"

// The Blosc decoders live in readers/blosc.
var (
	bloscDecompress  = blosc.Decompress
	bloscDecompress2 = blosc.Decompress2
)
