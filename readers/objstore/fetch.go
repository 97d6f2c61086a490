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
// of bytes the answer must have (-1: any), the bytes to keep from its start (-1: all), and
// the most bytes the answer may have, checked before anything is allocated for it.
type span struct {
	off        int64 // as given: negative counts from the end
	header     string
	want, keep int64
	limit      int64
}

// spanOf maps GetRange's (off, n) (zarr.Store: a negative off counts from the end, n < 0
// means to the end) to a request; an answer of open length (the whole value, or to its end)
// may have at most limit bytes.
func spanOf(off, n, limit int64) span {
	switch {
	case off == 0 && n < 0:
		return span{want: -1, keep: -1, limit: limit}
	case off >= 0 && n < 0:
		return span{off: off, header: fmt.Sprintf("bytes=%d-", off), want: -1, keep: -1, limit: limit}
	case off >= 0:
		return span{off: off, header: fmt.Sprintf("bytes=%d-%d", off, off+n-1), want: n, keep: -1, limit: n}
	default: // a suffix of -off bytes, of which n (or all) are kept
		return span{off: off, header: fmt.Sprintf("bytes=-%d", -off), want: -off, keep: n, limit: -off}
	}
}

// fromWhole reads the range out of the body of a whole value (size bytes, -1: unknown), for a
// server that ignored the Range header: what precedes the range is skipped, not kept.
func (sp span) fromWhole(r io.Reader, size, capBytes int64, buf []byte, c *counters) ([]byte, error) {
	skip := sp.off
	if skip < 0 {
		if size < 0 { // a suffix of a value of unknown length: read it all (within the cap), cut
			b, err := readBody(r, -1, capBytes, buf, c)
			if err != nil {
				return b, err
			}
			return b[max(int64(len(b))+sp.off, 0):], nil
		}
		skip = max(size+sp.off, 0)
	}
	n, err := io.CopyN(io.Discard, r, skip)
	c.bytes.Add(uint64(n))
	if err == io.EOF {
		return buf[:0], nil // the value ends before the range: the check reports it
	}
	if err != nil {
		return buf[:0], err
	}
	rest := int64(-1)
	if size >= 0 {
		rest = size - skip
	}
	if sp.want >= 0 {
		// Only the range's bytes are read; the rest of the value is left unread.
		return readBody(io.LimitReader(r, sp.want), min(rest, sp.want), sp.want, buf, c)
	}
	return readBody(r, rest, sp.limit, buf, c)
}

// readBody reads an answer's body of size bytes (-1: unknown) into buf, refusing a body
// longer than limit bytes: an announced size before any allocation, a body of unknown length
// as its bytes arrive (the buffer grows with what came, never to more than limit + 1).
func readBody(r io.Reader, size, limit int64, buf []byte, c *counters) ([]byte, error) {
	if size > limit {
		return buf[:0], fmt.Errorf("the answer announces %d bytes; the request can return at most %d: %w", size, limit, zarr.ErrTooLarge)
	}
	if size >= 0 {
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		n, err := io.ReadFull(r, buf)
		c.bytes.Add(uint64(n))
		return buf, err
	}
	b := buf[:0]
	for {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(max(2*int64(cap(b)), 64<<10), limit+1))
			copy(grown, b)
			b = grown
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		c.bytes.Add(uint64(n))
		if int64(len(b)) > limit {
			return b[:0], fmt.Errorf("the answer goes on past %d bytes, the most the request can return: %w", limit, zarr.ErrTooLarge)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

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
