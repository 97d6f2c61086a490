package objstore

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gobatch/gobatch/readers/zarr"
)

// The byte ranges of zarr.Store's GetRange as HTTP Range headers, and the checks on what
// comes back, shared by the S3 and the HTTP store.

var (
	// ErrNoBucket is wrapped by the error of a request to a bucket that does not exist.
	ErrNoBucket = errors.New("no such bucket")
	// ErrDenied is wrapped by the error of a request the server refused (401, 403): wrong or
	// missing credentials, or no permission.
	ErrDenied = errors.New("access denied")
)

// span is a GetRange request: the Range header to send ("" for the whole value), the number
// of bytes the answer must have (-1: any), and the bytes to keep from its start (-1: all).
type span struct {
	off        int64 // as given: negative counts from the end
	header     string
	want, keep int64
}

// spanOf maps GetRange's (off, n) (zarr.Store: a negative off counts from the end, n < 0
// means to the end) to a request.
func spanOf(off, n int64) span {
	switch {
	case off == 0 && n < 0:
		return span{want: -1, keep: -1}
	case off >= 0 && n < 0:
		return span{off: off, header: fmt.Sprintf("bytes=%d-", off), want: -1, keep: -1}
	case off >= 0:
		return span{off: off, header: fmt.Sprintf("bytes=%d-%d", off, off+n-1), want: n, keep: -1}
	default: // a suffix of -off bytes, of which n (or all) are kept
		return span{off: off, header: fmt.Sprintf("bytes=-%d", -off), want: -off, keep: n}
	}
}

// cut takes the range out of a whole value b, for a server that ignored the Range header.
func (sp span) cut(b []byte) []byte {
	size := int64(len(b))
	start := sp.off
	if start < 0 {
		start = max(size+start, 0)
	}
	start = min(start, size)
	end := size
	if sp.want >= 0 {
		end = min(start+sp.want, size)
	}
	return b[start:end]
}

// readBody reads an answer's body of size bytes (-1: unknown) into buf, growing it.
func readBody(r io.Reader, size int64, buf []byte, c *counters) ([]byte, error) {
	if size < 0 {
		w := sliceWriter{b: buf[:0]}
		n, err := io.Copy(&w, r)
		c.bytes.Add(uint64(n))
		return w.b, err
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	n, err := io.ReadFull(r, buf)
	c.bytes.Add(uint64(n))
	return buf, err
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// check holds the answer b of request sp to what GetRange promises: a short answer (the value
// ends before the range) is zarr.ErrCorrupt, as for a local file.
func (sp span) check(key string, b []byte) ([]byte, error) {
	if sp.want >= 0 && int64(len(b)) != sp.want {
		return b[:0], fmt.Errorf("%s: range %s answered with %d bytes, want %d (the value is shorter): %w", key, sp.header, len(b), sp.want, zarr.ErrCorrupt)
	}
	if sp.keep >= 0 {
		if sp.keep > int64(len(b)) {
			return b[:0], fmt.Errorf("%s: %d bytes from a suffix of %d: %w", key, sp.keep, len(b), zarr.ErrCorrupt)
		}
		b = b[:sp.keep]
	}
	return b, nil
}

// outOfRange is the error of a 416 answer: the range starts past the value's end.
func outOfRange(key string, sp span) error {
	return fmt.Errorf("%s: range %s outside the value: %w", key, sp.header, zarr.ErrCorrupt)
}

// joinKey joins a store's prefix ("" or ending in "/") and a key, refusing keys that would
// leave the store (zarr keys are relative and never hold "." or ".." segments).
func joinKey(prefix, key string) (string, error) {
	if key == "" || key[0] == '/' {
		return "", fmt.Errorf("invalid key %q", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." || seg == "" {
			return "", fmt.Errorf("invalid key %q", key)
		}
	}
	return prefix + key, nil
}
