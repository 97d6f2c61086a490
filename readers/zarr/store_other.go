//go:build !linux

package zarr

import "errors"

func (s *DirStore) getRangeQuiet(key string, off, n int64, buf []byte) ([]byte, bool, error) {
	b, err := s.GetRangeInto(key, off, n, buf)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	return b, err == nil || !errors.Is(err, ErrNotFound), err
}
