package objstore

import (
	"context"
)

// The zarr.Store and zarr.BufferedStore methods common to the S3 and the HTTP store: a range
// read is one request (fetch), retried by the store's retrier, whose final error the store
// turns into its own (fail).

// fetcher is what a remote store adds to remote: the object a key names, one request for a
// span of it, the error of a failed read, and the size of a value.
type fetcher interface {
	object(key string) (string, error)
	fetch(ctx context.Context, obj string, sp span, buf []byte) ([]byte, error)
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

// GetRangeInto implements zarr.BufferedStore.
func (r *remote) GetRangeInto(key string, off, n int64, buf []byte) ([]byte, error) {
	obj, err := r.f.object(key)
	if err != nil {
		return buf[:0], err
	}
	if n == 0 { // nothing to read, but the key must exist
		_, err := r.f.Size(key)
		return buf[:0], err
	}
	sp := spanOf(off, n)
	var out []byte
	err = r.retry.do(func(ctx context.Context) error {
		r.stats.requests.Add(1)
		var err error
		out, err = r.f.fetch(ctx, obj, sp, buf)
		return err
	})
	if err != nil {
		return buf[:0], r.f.fail(key, obj, sp, err)
	}
	return sp.check(key, out)
}
