package zarr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Store is a key-value store holding a Zarr hierarchy. Keys use "/" separators and
// are relative to the store root ("temp/.zarray", "temp/c/0/1"). Implementations
// must be safe for concurrent use.
//
// A Store reports a missing key with an error that wraps ErrNotFound.
type Store interface {
	// Get returns the whole value of key. The caller may keep the slice.
	Get(key string) ([]byte, error)
	// GetRange returns n bytes of key from offset off. A negative off counts from
	// the end of the value (a suffix read of -off bytes when n < 0). n < 0 means to
	// the end. A range past the end of the value is an error wrapping ErrCorrupt.
	GetRange(key string, off, n int64) ([]byte, error)
	// String names the store in messages (a path or URL).
	String() string
}

// BufferedStore is implemented by stores that can read into a caller's buffer, which
// lets the reader reuse its buffers. The result is buf[:0] grown as needed (so it may
// be a new slice).
type BufferedStore interface {
	GetInto(key string, buf []byte) ([]byte, error)
	GetRangeInto(key string, off, n int64, buf []byte) ([]byte, error)
}

// LimitedStore is implemented by stores that can refuse a value longer than a bound before
// reading it (remote stores: a server may announce or send any size). GetIntoLimit is
// GetInto, failing with an error wrapping ErrTooLarge when key's value is longer than limit
// bytes. The reader bounds each chunk read by what the chunk's codecs can encode.
type LimitedStore interface {
	GetIntoLimit(key string, limit int64, buf []byte) ([]byte, error)
}

// Lister is implemented by stores that can list keys. List returns every key that
// starts with prefix, sorted. It is used to discover a hierarchy without consolidated
// metadata and to count stored chunks.
type Lister interface {
	List(prefix string) ([]string, error)
}

// Sizer is implemented by stores that can report a value's size without reading it.
type Sizer interface {
	Size(key string) (int64, error)
}

// DirStore is a Store over a local directory (a "foo.zarr" directory).
type DirStore struct {
	root string
}

// NewDirStore returns a store over the directory root. It fails if root is not a
// directory.
func NewDirStore(root string) (*DirStore, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("zarr: open store %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("zarr: open store %s: not a directory", root)
	}
	return &DirStore{root: filepath.Clean(root)}, nil
}

func (s *DirStore) String() string { return s.root }

// The most bytes one value of a local store may have: a metadata document (read whole, then
// parsed), and any other value (a chunk, a shard). A larger file is refused naming its key and
// size before anything is read or allocated: a sparse file of a terabyte, or a metadata file of
// gigabytes, is a damaged or hostile store, not data.
const (
	MaxMetadataBytes = 64 << 20
	MaxValueBytes    = 8 << 30
)

// checkSize refuses a value of size bytes at key above its bound.
func checkSize(key string, size int64) error {
	limit, what := int64(MaxValueBytes), "a value"
	if isMetadataKey(key) {
		limit, what = MaxMetadataBytes, "a metadata document"
	}
	if size > limit {
		return fmt.Errorf("%s: %d bytes, more than %s may have (%d): %w", key, size, what, limit, ErrCorrupt)
	}
	return nil
}

// isMetadataKey says whether key names a metadata document (.zarray, .zgroup, .zattrs,
// .zmetadata, zarr.json).
func isMetadataKey(key string) bool {
	switch path.Base(key) {
	case ".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json":
		return true
	}
	return false
}

// path maps a key to a file path, refusing keys that would leave the root.
func (s *DirStore) path(key string) (string, error) {
	if !validKey(key) {
		return "", fmt.Errorf("invalid key %q", key)
	}
	return s.root + string(filepath.Separator) + filepath.FromSlash(key), nil
}

func (s *DirStore) open(key string) (*os.File, int64, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, 0, err
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer; the mode check below refuses it.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() { // a directory at a key too: a chunk read as missing would be its fill value
		f.Close()
		return nil, 0, fmt.Errorf("open %s: %s: %w", key, fileType(st.Mode()), ErrNotRegular)
	}
	if err := checkSize(key, st.Size()); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// fileType names a file's type for messages.
func fileType(m fs.FileMode) string {
	if m.IsDir() {
		return "a directory"
	}
	return m.Type().String()
}

// Get implements Store.
func (s *DirStore) Get(key string) ([]byte, error) { return s.GetInto(key, nil) }

// GetRange implements Store.
func (s *DirStore) GetRange(key string, off, n int64) ([]byte, error) {
	return s.GetRangeInto(key, off, n, nil)
}

// GetInto implements BufferedStore.
func (s *DirStore) GetInto(key string, buf []byte) ([]byte, error) {
	return s.GetRangeInto(key, 0, -1, buf)
}

// GetRangeInto implements BufferedStore.
func (s *DirStore) GetRangeInto(key string, off, n int64, buf []byte) ([]byte, error) {
	f, size, err := s.open(key)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
	start, length, err := resolveRange(size, off, n)
	if err != nil {
		return buf[:0], fmt.Errorf("%s: %w", key, err)
	}
	if int64(cap(buf)) < length {
		buf = make([]byte, length)
	}
	buf = buf[:length]
	if _, err := f.ReadAt(buf, start); err != nil && !(errors.Is(err, io.EOF) && length == 0) {
		return buf[:0], fmt.Errorf("read %s: %w", key, err)
	}
	return buf, nil
}

// resolveRange turns (off, n) into an absolute start and length within size.
func resolveRange(size, off, n int64) (int64, int64, error) {
	start := off
	if off < 0 {
		start = size + off
	}
	if start < 0 || start > size {
		return 0, 0, fmt.Errorf("range offset %d outside a value of %d bytes: %w", off, size, ErrCorrupt)
	}
	length := size - start
	if n >= 0 {
		if n > length {
			return 0, 0, fmt.Errorf("range %d+%d outside a value of %d bytes: %w", start, n, size, ErrCorrupt)
		}
		length = n
	}
	return start, length, nil
}

// Size implements Sizer.
func (s *DirStore) Size(key string) (int64, error) {
	p, err := s.path(key)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return 0, err
	}
	return st.Size(), nil
}

// List implements Lister.
func (s *DirStore) List(prefix string) ([]string, error) {
	dir := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		p, err := s.path(prefix[:i])
		if err != nil {
			return nil, err
		}
		dir = p
	}
	var keys []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		k := filepath.ToSlash(rel)
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", prefix, s.root, err)
	}
	sort.Strings(keys)
	return keys, nil
}

// storeGet reads key into buf when the store supports it, refusing a value longer than limit
// bytes where the store can (limit < 0: no bound).
func storeGet(s Store, key string, limit int64, buf []byte) ([]byte, error) {
	if ls, ok := s.(LimitedStore); ok && limit >= 0 {
		return ls.GetIntoLimit(key, limit, buf)
	}
	if bs, ok := s.(BufferedStore); ok {
		return bs.GetInto(key, buf)
	}
	return s.Get(key)
}

func storeGetRange(s Store, key string, off, n int64, buf []byte) ([]byte, error) {
	if bs, ok := s.(BufferedStore); ok {
		return bs.GetRangeInto(key, off, n, buf)
	}
	b, err := s.GetRange(key, off, n)
	if err == nil && n >= 0 && int64(len(b)) != n {
		return nil, fmt.Errorf("%s: range read returned %d bytes, want %d: %w", key, len(b), n, ErrCorrupt)
	}
	return b, err
}

// MemStore is an in-memory Store (for tests and for data already in memory). Set keys
// before sharing it; it is safe for concurrent reads.
type MemStore struct {
	Name string
	Data map[string][]byte
}

// NewMemStore returns an empty MemStore called name.
func NewMemStore(name string) *MemStore { return &MemStore{Name: name, Data: map[string][]byte{}} }

func (s *MemStore) String() string { return s.Name }

// Get implements Store.
func (s *MemStore) Get(key string) ([]byte, error) {
	v, ok := s.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return v, nil
}

// GetRange implements Store.
func (s *MemStore) GetRange(key string, off, n int64) ([]byte, error) {
	v, ok := s.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	start, length, err := resolveRange(int64(len(v)), off, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return v[start : start+length], nil
}

// Size implements Sizer.
func (s *MemStore) Size(key string) (int64, error) {
	v, ok := s.Data[key]
	if !ok {
		return 0, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return int64(len(v)), nil
}

// List implements Lister.
func (s *MemStore) List(prefix string) ([]string, error) { return keysWithPrefix(s.Data, prefix), nil }

// keysWithPrefix lists the keys of an in-memory index that start with prefix, sorted.
func keysWithPrefix[V any](m map[string]V, prefix string) []string {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// metadataKeys lists the metadata documents (.zarray, .zgroup, .zattrs, .zmetadata,
// zarr.json) without descending into array directories, which hold only chunks.
func (s *DirStore) metadataKeys() ([]string, error) {
	var keys []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		prefix := ""
		if rel != "." {
			prefix = filepath.ToSlash(rel) + "/"
		}
		isArray := false
		for _, name := range []string{".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json"} {
			st, err := os.Stat(filepath.Join(p, name))
			if err != nil || st.IsDir() {
				continue
			}
			keys = append(keys, prefix+name)
			switch name {
			case ".zarray":
				isArray = true
			case "zarr.json":
				if b, err := s.Get(prefix + name); err == nil { // a regular file, bounded (open)
					var z struct {
						NodeType string `json:"node_type"`
					}
					if decodeJSON(b, &z) == nil && z.NodeType == "array" {
						isArray = true
					}
				}
			}
		}
		if isArray && rel != "." {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list metadata in %s: %w", s.root, err)
	}
	sort.Strings(keys)
	return keys, nil
}
