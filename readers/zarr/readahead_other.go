//go:build !linux

package zarr

// ReadAhead implements ReadAheadStore; without posix_fadvise it does nothing.
func (s *DirStore) ReadAhead(key string) {}
