//go:build linux

package zarr

import "golang.org/x/sys/unix"

// ReadAhead implements ReadAheadStore: the kernel starts reading the file of key into the
// page cache (POSIX_FADV_WILLNEED) and the call returns once the reads are queued.
func (s *DirStore) ReadAhead(key string) {
	if !validKey(key) {
		return
	}
	fd, err := s.openKey(key)
	if err != nil {
		return // not stored (read as the fill value), or an error the read itself reports
	}
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED) // a hint: the read reports real errors
	unix.Close(fd)
}
