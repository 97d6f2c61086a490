package objstore

import "github.com/gobatch/gobatch/readers/zarr"

// The zarr.Store and zarr.BufferedStore methods common to the S3 and the HTTP store: a range
// read is one request (fetch), retried by the store's retrier, whose final error the store
// turns into its own (fail).

// fetcher is what a remote store adds to remote: the object a key names, one request for a
// span of it, the error of a failed read, and the size of a value.
type fetcher interface {
	object(key string) (string, error)
	fetch(a *attempt, obj string, sp span, buf []byte) ([]byte, error)
	fail(key, obj string, sp span, err error) error
	Size(key string) (int64, error)
}

// remote implements the read methods over a fetcher, with its retries and counters.
type remote struct {
	f     fetcher
	retry retrier
	stats counters
}

func (r *remote) init(f fetcher, opt Options) {
	r.f = f
	r.retry = retrier{opt: opt.withDefaults(), stats: &r.stats}
}

// Stats returns the store's counters.
func (r *remote) Stats() Stats { return r.stats.snapshot() }

// Get implements zarr.Store.
func (r *remote) Get(key string) ([]byte, error) { return r.GetRangeInto(key, 0, -1, nil) }

// GetRange implements zarr.Store.
func (r *remote) GetRange(key string, off, n int64) ([]byte, error) {
	return r.GetRangeInto(key, off, n, nil)
}

// GetInto implements zarr.BufferedStore.
func (r *remote) GetInto(key string, buf []byte) ([]byte, error) {
	return r.GetRangeInto(key, 0, -1, buf)
}

// GetRangeInto implements zarr.BufferedStore. A read to the end of a value is held to the
// store's MaxObjectBytes.
func (r *remote) GetRangeInto(key string, off, n int64, buf []byte) ([]byte, error) {
	if n == 0 { // nothing to read, but the key must exist
		if _, err := r.f.object(key); err != nil {
			return buf[:0], err
		}
		_, err := r.f.Size(key)
		return buf[:0], err
	}
	return r.get(key, spanOf(off, n, r.retry.opt.MaxObjectBytes), buf)
}

// GetIntoLimit implements zarr.LimitedStore: a value longer than limit bytes is refused before
// it is read, or as soon as more arrives. The limit replaces MaxObjectBytes: it is what the
// value can legitimately be (a chunk's most encoded size), however large.
func (r *remote) GetIntoLimit(key string, limit int64, buf []byte) ([]byte, error) {
	return r.get(key, spanOf(0, -1, limit), buf)
}

// get reads sp of key, with retries; the final error names the object.
func (r *remote) get(key string, sp span, buf []byte) ([]byte, error) {
	obj, err := r.f.object(key)
	if err != nil {
		return buf[:0], err
	}
	var out []byte
	err = r.retry.do(func(a *attempt) error {
		r.stats.requests.Add(1)
		var err error
		out, err = r.f.fetch(a, obj, sp, buf)
		return err
	})
	if err != nil {
		return buf[:0], r.f.fail(key, obj, sp, err)
	}
	return sp.check(key, out)
}

var _ zarr.LimitedStore = (*remote)(nil)
