//go:build linux

package zarr

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pathBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// getRangeQuiet reads a file with openat/fstat/pread on a pooled NUL-terminated path,
// so that a read allocates nothing beyond growing buf.
func (s *DirStore) getRangeQuiet(key string, off, n int64, buf []byte) ([]byte, bool, error) {
	if !validKey(key) {
		return nil, false, fmt.Errorf("invalid key %q", key)
	}
	fd, err := s.openKey(key)
	if err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("open %s: %w", key, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", key, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG { // a directory at a key too: a chunk read as missing would be its fill value
		return nil, false, fmt.Errorf("open %s: %s: %w", key, fileKind(uint32(st.Mode&unix.S_IFMT)), ErrNotRegular)
	}
	if err := checkSize(key, st.Size); err != nil {
		return nil, true, err
	}
	start, length, err := resolveRange(st.Size, off, n)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", key, err)
	}
	buf = grow(buf, int(length))
	for done := 0; done < len(buf); {
		m, err := unix.Pread(fd, buf[done:], start+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, true, fmt.Errorf("read %s: %w", key, err)
		}
		if m == 0 {
			return nil, true, fmt.Errorf("read %s: file shrank while reading: %w", key, ErrCorrupt)
		}
		done += m
	}
	return buf, true, nil
}

// openKey opens the file of key (a valid key) with openRead, through a pooled NUL-terminated
// path.
func (s *DirStore) openKey(key string) (int, error) {
	pp := pathBufs.Get().(*[]byte)
	defer pathBufs.Put(pp)
	p := append(append(append((*pp)[:0], s.root...), '/'), key...)
	p = append(p, 0)
	*pp = p
	return openRead(p)
}

// openRead opens path for reading without blocking: O_NONBLOCK makes the open of a FIFO
// return at once (a plain open waits for a writer for ever); the caller's fstat then refuses
// anything that is not a regular file. Regular files ignore the flag.
func openRead(path []byte) (int, error) {
	for {
		r, _, e := unix.Syscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&path[0])),
			uintptr(unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// atFDCWD is AT_FDCWD (-100) as a syscall argument.
var atFDCWD = func() uintptr { v := unix.AT_FDCWD; return uintptr(v) }()

// fileKind names a file type (the S_IFMT bits of st_mode) in messages.
func fileKind(m uint32) string {
	switch m {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFDIR:
		return "a directory"
	}
	return fmt.Sprintf("file type %#o", m)
}
