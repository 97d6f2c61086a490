package shm

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// The rules for opening a named segment that someone else may have made (PROTOCOL.md 1.1):
// never follow a symlink, accept only a regular file, owned by this user (or by a uid the caller
// names), not writable by others.

// NoOtherUID is the allowUID of an opener that trusts no other user's segments.
const NoOtherUID = -1

// RefusedError reports a named segment refused before anything was mapped: a symlink, not a
// regular file, owned by another user, writable by others, or not openable (permission
// denied). It unwraps to fs.ErrPermission for a permission failure, else to the errno, if any.
type RefusedError struct {
	Path   string
	Reason string // e.g. "is a symbolic link", "owned by uid 1000, not by you (uid 0)"
	Err    error
}

func (e *RefusedError) Error() string { return fmt.Sprintf("shm: %s refused: %s", e.Path, e.Reason) }

func (e *RefusedError) Unwrap() error { return e.Err }

// OpenFile opens the named segment file at path read-write (or, with readOnlyFallback, read-only
// when read-write is not permitted) and checks what it opened before the caller maps or reads
// it. A missing file is an error wrapping fs.ErrNotExist; every refusal is a *RefusedError.
func OpenFile(path string, allowUID int, readOnlyFallback bool) (*os.File, error) {
	// O_NONBLOCK: a FIFO of that name must not block the open; the check below refuses it.
	const flags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	fd, err := unix.Open(path, unix.O_RDWR|flags, 0)
	if (err == unix.EACCES || err == unix.EPERM) && readOnlyFallback {
		fd, err = unix.Open(path, unix.O_RDONLY|flags, 0)
	}
	if err != nil {
		return nil, openError(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: fstat %s: %w", path, err)
	}
	if err := checkOpened(path, &st, allowUID); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Clear O_NONBLOCK again: it means nothing to a regular file, but keep the descriptor plain.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openError turns a failed open into its reason.
func openError(path string, err error) error {
	switch err {
	case unix.ENOENT:
		return fmt.Errorf("shm: open %s: %w", path, fs.ErrNotExist)
	case unix.ELOOP:
		return &RefusedError{Path: path, Reason: "is a symbolic link (a ring is never opened through one)", Err: err}
	case unix.EISDIR:
		return &RefusedError{Path: path, Reason: "is a directory, not a ring segment", Err: err}
	case unix.EACCES, unix.EPERM:
		return &RefusedError{Path: path, Reason: "permission denied (" + describeFile(path) + ")", Err: fs.ErrPermission}
	case unix.ENXIO, unix.ENODEV, unix.EOPNOTSUPP:
		return &RefusedError{Path: path, Reason: fmt.Sprintf("is %s, not a ring segment (open: %v)", kindOf(path), err), Err: err}
	}
	return fmt.Errorf("shm: open %s: %w", path, err)
}

// checkOpened applies the owner, type and mode rules to what an opener holds.
func checkOpened(path string, st *unix.Stat_t, allowUID int) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &RefusedError{Path: path, Reason: "is " + modeKind(st.Mode) + ", not a ring segment"}
	}
	me := uint32(os.Geteuid())
	allowed := allowUID >= 0 && st.Uid == uint32(allowUID)
	if st.Uid != me && !allowed {
		return &RefusedError{Path: path, Reason: fmt.Sprintf("owned by uid %d, not by you (uid %d); "+
			"accept another user's ring explicitly (attach(allow_uid=%d), --allow-uid %d)", st.Uid, me, st.Uid, st.Uid)}
	}
	if st.Mode&unix.S_IWOTH != 0 || st.Mode&unix.S_IWGRP != 0 && !allowed {
		return &RefusedError{Path: path, Reason: fmt.Sprintf("writable by group/other (mode %#o): "+
			"anyone who can write it can cut it short under the ring's users", st.Mode&0o7777)}
	}
	return nil
}

// checkCreated verifies that the creator's O_EXCL open gave it what it asked for: an empty
// regular file with one link, owned by itself.
func checkCreated(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("shm: create %s: fstat: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 || st.Nlink != 1 || st.Uid != uint32(os.Geteuid()) {
		return &RefusedError{Path: path, Reason: fmt.Sprintf("the newly created file is not an empty regular file of "+
			"ours (%s, %d bytes, %d links, uid %d)", modeKind(st.Mode), st.Size, st.Nlink, st.Uid)}
	}
	return nil
}

// describeExisting says what holds a name a creator found taken.
func describeExisting(path string) string {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "another ring uses the name, or a dead one left it: see `shmloader gc`"
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return modeKind(st.Mode) + " holds the name (not a ring); remove it or choose another name"
	case st.Uid != uint32(os.Geteuid()):
		return fmt.Sprintf("a file of uid %d holds the name (not your ring); choose another name", st.Uid)
	}
	return "another ring uses the name, or a dead one left it: see `shmloader gc`"
}

// describeFile names a file's owner and mode, for a permission error, without following it.
func describeFile(path string) string {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fmt.Sprintf("you are uid %d", os.Geteuid())
	}
	return fmt.Sprintf("the file belongs to uid %d, mode %#o; you are uid %d", st.Uid, st.Mode&0o7777, os.Geteuid())
}

func describeDir(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Sprintf("you are uid %d", os.Geteuid())
	}
	return fmt.Sprintf("%s belongs to uid %d, mode %#o; you are uid %d", dir, st.Uid, st.Mode&0o7777, os.Geteuid())
}

func kindOf(path string) string {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "a special file"
	}
	return modeKind(st.Mode)
}

// modeKind names a file type for a refusal.
func modeKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("a file of type %#o", mode&unix.S_IFMT)
}
