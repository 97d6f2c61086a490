package ring

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// procStat returns field 3 (state) and field 22 (starttime) of /proc/<pid>/stat.
func procStat(pid string) (state byte, starttime uint64, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// Field 2 (comm) is parenthesised and may contain spaces or ')': fields resume after the
	// last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%s/stat: no ')' in %q", pid, b)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3, so field 22 is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%s/stat: %d fields after comm", pid, len(f))
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%s/stat: starttime %q: %w", pid, f[19], err)
	}
	return f[0][0], st, nil
}

// Starttime returns field 22 of /proc/<pid>/stat (clock ticks after boot).
func Starttime(pid int) (uint64, error) {
	_, st, err := procStat(strconv.Itoa(pid))
	return st, err
}

var self struct {
	once      sync.Once
	pid       int
	starttime uint64
	err       error
}

// selfIdentity returns this process's pid and starttime.
func selfIdentity() (int, uint64, error) {
	self.once.Do(func() {
		self.pid = os.Getpid()
		self.starttime, self.err = Starttime(self.pid)
	})
	return self.pid, self.starttime, self.err
}

// Alive reports whether the process record (pid, starttime) is alive (PROTOCOL.md 3.5):
// /proc/<pid>/stat exists, the process is not a zombie (Z) or dead (X), and its starttime is
// the recorded one, so a reused pid never looks alive. Only ENOENT or ESRCH prove that the
// file is gone; any other failure to read it (EMFILE, say) proves nothing, and the process
// counts as alive until a later check can tell.
func Alive(pid uint32, starttime uint64) bool {
	if pid == 0 {
		return false
	}
	state, st, err := procStat(strconv.FormatUint(uint64(pid), 10))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ESRCH)
	}
	return state != 'Z' && state != 'X' && st == starttime
}

// Stopped reports whether process pid is stopped (state T, by a signal, or t, by a tracer).
func Stopped(pid uint32) bool {
	if pid == 0 {
		return false
	}
	state, _, err := procStat(strconv.FormatUint(uint64(pid), 10))
	return err == nil && (state == 'T' || state == 't')
}
