package zarr

import (
	"sync"
	"unsafe"
)

// quietStore is implemented by this package's stores: a range read into buf that
// reports a missing key as found=false instead of building an error, and that does
// not keep key. The reader uses it so that reading a chunk allocates nothing.
type quietStore interface {
	getRangeQuiet(key string, off, n int64, buf []byte) (b []byte, found bool, err error)
}

// keyBuf builds chunk keys without allocating.
type keyBuf struct{ b [256]byte }

var keyBufs = sync.Pool{New: func() any { return new(keyBuf) }}

// unsafeKey views b as a string for a call into a quietStore, which does not keep it.
func unsafeKey(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// readKey reads key (whole when n < 0 and off == 0, then at most limit bytes where the store
// can refuse more: LimitedStore; limit < 0: no bound) into buf. A missing key is
// returned as ErrNotFound itself. kb is the key's bytes (may alias a pooled buffer);
// it is copied into a string only for stores outside this package.
func readKey(s Store, kb []byte, off, n, limit int64, buf []byte) ([]byte, error) {
	if q, ok := s.(quietStore); ok {
		b, found, err := q.getRangeQuiet(unsafeKey(kb), off, n, buf)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, ErrNotFound
		}
		return b, nil
	}
	key := string(kb)
	if off == 0 && n < 0 {
		return storeGet(s, key, limit, buf)
	}
	return storeGetRange(s, key, off, n, buf)
}

func (s *MemStore) getRangeQuiet(key string, off, n int64, buf []byte) ([]byte, bool, error) {
	v, ok := s.Data[key]
	if !ok {
		return nil, false, nil
	}
	start, length, err := resolveRange(int64(len(v)), off, n)
	if err != nil {
		return nil, true, err
	}
	return v[start : start+length], true, nil
}

// validKey reports whether key is a relative path that stays inside the root.
func validKey(key string) bool {
	if key == "" || key[0] == '/' {
		return false
	}
	seg := 0
	for i := 0; i <= len(key); i++ {
		if i < len(key) {
			c := key[i]
			if c == 0 || c == '\\' {
				return false
			}
			if c != '/' {
				continue
			}
		}
		part := key[seg:i]
		if part == "" || part == "." || part == ".." {
			return false
		}
		seg = i + 1
	}
	return true
}
