package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is the directory that holds named segments. Tests point it at a private tmpfs or a
// temporary directory; everything else leaves it at /dev/shm.
var Dir = "/dev/shm"

// Prefix is the file-name prefix of every named gobatch segment.
const Prefix = "gobatch-"

// MaxNameLen is the longest accepted segment name (without Prefix).
const MaxNameLen = 200

// ValidateName reports whether name is 1 to 200 characters of [A-Za-z0-9._-]
// (PROTOCOL.md section 1).
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("shm: invalid segment name %q: length %d, want 1 to %d characters", name, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("shm: invalid segment name %q: byte %d (%q) is not one of [A-Za-z0-9._-]", name, i, c)
		}
	}
	if name == "." || name == ".." {
		// Valid by the character rule and harmless behind the prefix, but confusing; keep them
		// out so that a name always reads as a name.
		return fmt.Errorf("shm: invalid segment name %q", name)
	}
	return nil
}

// Path returns the file path of the named segment name in Dir.
func Path(name string) string { return filepath.Join(Dir, Prefix+name) }

// NoSpaceError reports that the shared-memory file system cannot hold a segment.
// It unwraps to the underlying errno (unix.ENOSPC or unix.ENOMEM).
type NoSpaceError struct {
	Path  string // the segment ("memfd" for an anonymous one)
	Dir   string // the file system whose free space is reported
	Need  int64  // bytes the segment needs
	Avail int64  // bytes free in Dir (-1 if statfs failed)
	Memfd bool   // an anonymous segment: limited by memory (cgroup), not by a mount's size
	Err   error
}

func (e *NoSpaceError) Error() string {
	if e.Memfd {
		return fmt.Sprintf("shm: cannot reserve %d bytes (%s) for %s: %v; anonymous shared memory is "+
			"charged to the process's memory limit (container or cgroup): raise the limit or use fewer/smaller ring slots",
			e.Need, human(e.Need), e.Path, e.Err)
	}
	avail := "unknown"
	if e.Avail >= 0 {
		avail = fmt.Sprintf("%d bytes (%s)", e.Avail, human(e.Avail))
	}
	return fmt.Sprintf("shm: cannot reserve %d bytes (%s) for %s: %v; %s has %s free. "+
		"Make the shared-memory mount larger: Docker `--shm-size=%s` (or `--ipc=host`), "+
		"Kubernetes an emptyDir volume with `medium: Memory` (and a sizeLimit) mounted at /dev/shm; "+
		"or use fewer/smaller ring slots",
		e.Need, human(e.Need), e.Path, e.Err, e.Dir, avail, suggest(e.Need))
}

func (e *NoSpaceError) Unwrap() error { return e.Err }

func human(n int64) string {
	const (
		ki = 1 << 10
		mi = 1 << 20
		gi = 1 << 30
	)
	switch {
	case n >= gi:
		return fmt.Sprintf("%.2f GiB", float64(n)/gi)
	case n >= mi:
		return fmt.Sprintf("%.1f MiB", float64(n)/mi)
	case n >= ki:
		return fmt.Sprintf("%.1f KiB", float64(n)/ki)
	}
	return fmt.Sprintf("%d B", n)
}

// suggest rounds need (plus 25% headroom) up to whole GiB, at least 1g.
func suggest(need int64) string {
	g := (need + need/4 + (1<<30 - 1)) >> 30
	if g < 1 {
		g = 1
	}
	return fmt.Sprintf("%dg", g)
}

// freeBytes returns the bytes available to unprivileged users in the file system of dir.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Fits refuses a segment of need bytes that cannot fit, before anything is reserved:
// fallocate on a tmpfs as large as RAM (the usual /dev/shm) would fill memory up to ENOSPC, and
// wake the OOM killer, before it fails. A named segment must fit in Dir's free space; any
// segment (a memfd too) in the memory available (MemAvailable).
func Fits(need int64, named bool) error {
	if avail := freeBytes(Dir); named && avail >= 0 && need > avail {
		return fmt.Errorf("the ring needs %d bytes (%s) of shared memory and %s has %d (%s) free: "+
			"use fewer or smaller ring slots or batches, or make the mount larger (Docker --shm-size)",
			need, human(need), Dir, avail, human(avail))
	}
	if avail, ok := MemAvailable(); ok && need > avail {
		return fmt.Errorf("the ring needs %d bytes (%s) of shared memory, more than the %d (%s) of memory available: "+
			"use fewer or smaller ring slots or batches", need, human(need), avail, human(avail))
	}
	return nil
}

// MemAvailable reads MemAvailable from /proc/meminfo.
func MemAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10, true
			}
		}
	}
	return 0, false
}

// reserve allocates [0,size) of fd with fallocate(2), in chunks so that a signal interrupting
// one call (EINTR; tmpfs undoes the interrupted call's range) only repeats that chunk.
//
// A size larger than the file system's free space fails at once with ENOSPC, before any block
// is taken: reserving chunk by chunk would otherwise fill the mount (all of memory, for a
// tmpfs sized like RAM) before the last chunk fails. A tmpfs without a size limit reports no
// blocks and is not checked here.
func reserve(fd int, size int64) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err == nil && st.Blocks > 0 {
		if free := int64(st.Bavail) * int64(st.Bsize); size > free {
			return unix.ENOSPC
		}
	}
	const chunk = 1 << 30
	for off := int64(0); off < size; {
		n := min(chunk, size-off)
		err := unix.Fallocate(fd, 0, off, n)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Segment is a mapped shared-memory segment.
type Segment struct {
	name  string // "" for a memfd
	path  string
	fd    int
	mem   []byte
	memfd bool
}

// Bytes returns the whole mapping (MAP_SHARED, read-write). It is valid until Close.
func (s *Segment) Bytes() []byte { return s.mem }

// Size returns the mapped size in bytes.
func (s *Segment) Size() int64 { return int64(len(s.mem)) }

// Name returns the segment name without Prefix ("" for a memfd).
func (s *Segment) Name() string { return s.name }

// Path returns the file path of a named segment, or "memfd:gobatch" / "fd N" for an anonymous one.
func (s *Segment) Path() string { return s.path }

// Fd returns the segment's file descriptor (owned by the Segment; closed by Close).
func (s *Segment) Fd() int { return s.fd }

// IsMemfd reports whether the segment is anonymous.
func (s *Segment) IsMemfd() bool { return s.memfd }

// Close unmaps the segment and closes its file descriptor. It does not unlink a named
// segment (see Unlink). Close is idempotent.
func (s *Segment) Close() error {
	var errs []error
	if s.mem != nil {
		if err := unix.Munmap(s.mem); err != nil {
			errs = append(errs, fmt.Errorf("shm: munmap %s: %w", s.path, err))
		}
		s.mem = nil
	}
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, fmt.Errorf("shm: close %s: %w", s.path, err))
		}
		s.fd = -1
	}
	return errors.Join(errs...)
}

func mapFd(fd int, size int64, populate bool) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("size %d", size)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("size %d does not fit the address space", size)
	}
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	return unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, flags)
}

// Create makes the named segment Dir/gobatch-<name> (O_CREAT|O_EXCL, mode 0600), reserves size
// bytes with fallocate and maps it read-write with the pages prefaulted. The new file reads as
// zeros. If the file system is too small, Create removes the file and returns a *NoSpaceError.
// If the name exists, the error wraps fs.ErrExist.
func Create(name string, size int64) (*Segment, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, fmt.Errorf("shm: create %s: size %d must be positive", name, size)
	}
	path := Path(name)
	// O_EXCL|O_NOFOLLOW: whatever holds the name already (a dead ring, a squatter's file or
	// symlink) is an error, never opened or followed (PROTOCOL.md 1.1).
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if err == unix.EEXIST {
			return nil, fmt.Errorf("shm: create %s: %w: %s", path, fs.ErrExist, describeExisting(path))
		}
		if err == unix.EACCES || err == unix.EPERM {
			return nil, fmt.Errorf("shm: create %s: permission denied (%s): %w", path, describeDir(filepath.Dir(path)), fs.ErrPermission)
		}
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	fail := func(err error) (*Segment, error) {
		unix.Close(fd)
		unix.Unlink(path)
		return nil, err
	}
	if err := checkCreated(fd, path); err != nil {
		unix.Close(fd) // not ours to unlink: it is not the file we created
		return nil, err
	}
	if err := reserve(fd, size); err != nil {
		if err == unix.ENOSPC || err == unix.ENOMEM {
			return fail(&NoSpaceError{Path: path, Dir: filepath.Dir(path), Need: size, Avail: freeBytes(filepath.Dir(path)), Err: err})
		}
		return fail(fmt.Errorf("shm: fallocate %s (%d bytes): %w", path, size, err))
	}
	mem, err := mapFd(fd, size, true)
	if err != nil {
		return fail(fmt.Errorf("shm: mmap %s: %w", path, err))
	}
	return &Segment{name: name, path: path, fd: fd, mem: mem}, nil
}

// Open maps the existing named segment Dir/gobatch-<name> read-write, with its whole current
// size, after the checks of [OpenFile] (no symlink, a regular file of this user, not writable
// by group or other). With populate the pages are prefaulted (do this in processes that touch
// the payload; a process that only reads the header, such as `shmloader stat`, passes false).
func Open(name string, populate bool) (*Segment, error) {
	return OpenAllowing(name, populate, NoOtherUID)
}

// OpenAllowing is [Open] that also accepts a segment owned by allowUID (and writable by its
// group), for a ring one user shares with another. NoOtherUID allows none.
func OpenAllowing(name string, populate bool, allowUID int) (*Segment, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	path := Path(name)
	f, err := OpenFile(path, allowUID, false)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("shm: dup %s: %w", path, err)
	}
	unix.CloseOnExec(fd)
	seg, err := mapExisting(fd, path, populate)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	seg.name = name
	return seg, nil
}

// mapExisting maps the whole of fd, whose size it takes from fstat just before mapping.
func mapExisting(fd int, path string, populate bool) (*Segment, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat %s: %w", path, err)
	}
	if st.Size <= 0 {
		return nil, fmt.Errorf("shm: %s is empty (size %d): not a gobatch segment, or its creator has not reserved it yet", path, st.Size)
	}
	mem, err := mapFd(fd, st.Size, populate)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %s (%d bytes): %w", path, st.Size, err)
	}
	return &Segment{path: path, fd: fd, mem: mem}, nil
}

// Unlink removes the named segment's file. Existing mappings stay valid. A missing file is
// not an error.
func Unlink(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := unix.Unlink(Path(name)); err != nil && err != unix.ENOENT {
		return fmt.Errorf("shm: unlink %s: %w", Path(name), err)
	}
	return nil
}

// List returns the names (without Prefix) of the gobatch segments in Dir, sorted.
func List() ([]string, error) {
	ents, err := os.ReadDir(Dir)
	if err != nil {
		return nil, fmt.Errorf("shm: list %s: %w", Dir, err)
	}
	var names []string
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), Prefix)
		if !ok || !e.Type().IsRegular() || ValidateName(n) != nil {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// CreateMemfd makes an anonymous segment (memfd_create("gobatch", MFD_CLOEXEC|MFD_ALLOW_SEALING)),
// reserves size bytes, seals it against shrinking, growing and further sealing, and maps it. Pass Fd() to a child
// process (os/exec ExtraFiles) to share it.
func CreateMemfd(size int64) (*Segment, error) {
	fd, err := unix.MemfdCreate("gobatch", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	seg, err := FromFD(fd, size)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return seg, nil
}

// FromFD takes ownership of fd, a memfd (or any tmpfs file) inherited from another process.
//
// With size > 0 the caller is the ring's creator: FromFD reserves size bytes with fallocate
// (a *NoSpaceError if memory is short), tries to add F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL (a
// memfd made without MFD_ALLOW_SEALING refuses with EPERM: the segment is then unsealed, and a
// consumer that asked for a sealable one, gobatch.Loader, refuses it), and maps size bytes. With size == 0 the caller attaches: the whole current file is mapped.
// On error fd is left open (it still belongs to the caller).
func FromFD(fd int, size int64) (*Segment, error) {
	path := fmt.Sprintf("fd %d", fd)
	if size < 0 {
		return nil, fmt.Errorf("shm: %s: negative size %d", path, size)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: %s: fstat: %w (is the descriptor inherited? pass it with pass_fds)", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("shm: %s is not a regular file or memfd (mode %#o)", path, st.Mode)
	}
	if size == 0 {
		return mapExisting(fd, path, true)
	}
	if st.Size > size {
		return nil, fmt.Errorf("shm: %s already holds %d bytes, more than the %d requested: not a fresh segment", path, st.Size, size)
	}
	if err := reserve(fd, size); err != nil {
		if err == unix.ENOSPC || err == unix.ENOMEM {
			return nil, &NoSpaceError{Path: path + " (memfd)", Need: size, Avail: -1, Memfd: true, Err: err}
		}
		return nil, fmt.Errorf("shm: fallocate %s (%d bytes): %w", path, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil &&
		err != unix.EPERM && err != unix.EINVAL {
		return nil, fmt.Errorf("shm: seal %s: %w", path, err)
	}
	mem, err := mapFd(fd, size, true)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %s (%d bytes): %w", path, size, err)
	}
	return &Segment{path: path, fd: fd, mem: mem, memfd: true}, nil
}

// DupFile returns an *os.File that owns a duplicate of the segment's descriptor, for
// exec.Cmd.ExtraFiles; close it after the child has started. (Wrapping Fd() itself in
// os.NewFile would let the *os.File's finalizer close the segment's descriptor, or a later
// reuse of its number, at some random garbage collection.)
func (s *Segment) DupFile() (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: dup %s: %w", s.path, err)
	}
	return os.NewFile(uintptr(fd), s.path), nil
}

// Sealed reports whether the segment's size is sealed (F_SEAL_SHRINK and F_SEAL_GROW).
func (s *Segment) Sealed() bool {
	v, err := unix.FcntlInt(uintptr(s.fd), unix.F_GET_SEALS, 0)
	return err == nil && v&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) == unix.F_SEAL_SHRINK|unix.F_SEAL_GROW
}

// FileSize returns the size of the segment's file now (fstat), which another process may have
// changed since it was mapped: a named segment can be truncated by its owner.
func (s *Segment) FileSize() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return 0, fmt.Errorf("shm: fstat %s: %w", s.path, err)
	}
	return st.Size, nil
}
