// Package npy writes NumPy .npy files (format 1.0) and reads a box of a Zarr array into the
// NumPy type that file gets: raw, with CF decoding to float32, or CF times to datetime64[ns]
// (`shmloader read`).
package npy
