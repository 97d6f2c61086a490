package zarr

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ZipStore is a read-only Store over a zip archive (a "foo.zarr.zip" as written by
// zarr-python's ZipStore). Entries stored without compression (the usual case) are
// read in place with ReadAt; deflated entries are inflated on each read. When the
// archive holds the hierarchy inside one top-level directory ("foo.zarr/..."), that
// directory is the root.
type ZipStore struct {
	name    string
	f       *os.File
	entries map[string]*zip.File
	offsets map[string]int64 // data offset of stored (uncompressed) entries
}

// OpenZipStore opens the zip archive at path. Close it when done.
func OpenZipStore(path string) (*ZipStore, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("zarr: open store %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("zarr: open store %s: %w", path, err)
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		if errors.Is(err, zip.ErrFormat) {
			return nil, fmt.Errorf("zarr: open store %s: not a Zarr store: a file that is not a zip archive "+
				"(a store is a directory holding .zgroup, .zarray or zarr.json, or a .zip of one)", path)
		}
		return nil, fmt.Errorf("zarr: open store %s: %w", path, err)
	}
	s := &ZipStore{name: path, f: f, entries: map[string]*zip.File{}, offsets: map[string]int64{}}
	names := make([]string, 0, len(zr.File))
	for _, e := range zr.File {
		if !strings.HasSuffix(e.Name, "/") {
			names = append(names, e.Name)
		}
	}
	prefix := zipRootPrefix(names)
	for _, e := range zr.File {
		if strings.HasSuffix(e.Name, "/") || !strings.HasPrefix(e.Name, prefix) {
			continue
		}
		key := strings.TrimPrefix(e.Name, prefix)
		s.entries[key] = e
		if e.Method == zip.Store && e.UncompressedSize64 == e.CompressedSize64 {
			if off, err := e.DataOffset(); err == nil {
				s.offsets[key] = off
			}
		}
	}
	return s, nil
}

// zipRootPrefix returns "dir/" when every entry lives under one directory that holds
// the root metadata, else "".
func zipRootPrefix(names []string) string {
	for _, n := range names {
		if n == ".zgroup" || n == ".zarray" || n == ".zmetadata" || n == "zarr.json" {
			return ""
		}
	}
	for _, n := range names {
		i := strings.IndexByte(n, '/')
		if i < 0 {
			return ""
		}
		rest := n[i+1:]
		if rest == ".zgroup" || rest == ".zarray" || rest == ".zmetadata" || rest == "zarr.json" {
			p := n[:i+1]
			for _, m := range names {
				if !strings.HasPrefix(m, p) {
					return ""
				}
			}
			return p
		}
	}
	return ""
}

func (s *ZipStore) String() string { return s.name }

// Close closes the archive.
func (s *ZipStore) Close() error { return s.f.Close() }

// Get implements Store.
func (s *ZipStore) Get(key string) ([]byte, error) { return s.GetRangeInto(key, 0, -1, nil) }

// GetRange implements Store.
func (s *ZipStore) GetRange(key string, off, n int64) ([]byte, error) {
	return s.GetRangeInto(key, off, n, nil)
}

// GetInto implements BufferedStore.
func (s *ZipStore) GetInto(key string, buf []byte) ([]byte, error) {
	return s.GetRangeInto(key, 0, -1, buf)
}

// GetRangeInto implements BufferedStore.
func (s *ZipStore) GetRangeInto(key string, off, n int64, buf []byte) ([]byte, error) {
	b, found, err := s.getRangeQuiet(key, off, n, buf)
	if err == nil && !found {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return b, err
}

func (s *ZipStore) getRangeQuiet(key string, off, n int64, buf []byte) ([]byte, bool, error) {
	e, ok := s.entries[key]
	if !ok {
		return nil, false, nil
	}
	size := int64(e.UncompressedSize64)
	start, length, err := resolveRange(size, off, n)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", key, err)
	}
	buf = grow(buf, int(length))
	if base, ok := s.offsets[key]; ok {
		if _, err := s.f.ReadAt(buf, base+start); err != nil && !(err == io.EOF && length == 0) {
			return nil, true, fmt.Errorf("read %s in %s: %w", key, s.name, err)
		}
		return buf, true, nil
	}
	r, err := e.Open()
	if err != nil {
		return nil, true, fmt.Errorf("read %s in %s: %w", key, s.name, err)
	}
	defer r.Close()
	if _, err := io.CopyN(io.Discard, r, start); err != nil {
		return nil, true, fmt.Errorf("read %s in %s: %w: %w", key, s.name, err, ErrCorrupt)
	}
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, true, fmt.Errorf("read %s in %s: %w: %w", key, s.name, err, ErrCorrupt)
	}
	return buf, true, nil
}

// Size implements Sizer.
func (s *ZipStore) Size(key string) (int64, error) {
	e, ok := s.entries[key]
	if !ok {
		return 0, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return int64(e.UncompressedSize64), nil
}

// List implements Lister.
func (s *ZipStore) List(prefix string) ([]string, error) {
	return keysWithPrefix(s.entries, prefix), nil
}
