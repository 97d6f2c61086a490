// Package features computes the values ocf-data-sampler 1.0.24's PVNetDataset adds to each
// sample besides the data it reads, so that gobatch's batches carry the same inputs: the solar
// position at a site ([Sun], [SunNormalised]: the NREL solar position algorithm of Reda &
// Andreas (2004), NREL/TP-560-34302, as pvlib's nrel_numpy with ocf's settings: sea level,
// DeltaT = 67 s, elevation without refraction), the datetime encodings ([DateTime]) and the t0
// embedding ([Embedding], [T0Embedding]). Each depends only on a time and a position, never
// on the sampled data. The tests compare every function with ocf-data-sampler's own.
package features
