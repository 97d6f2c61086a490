package zarr

import (
	"errors"
	"strings"
)

// ErrNotFound is returned (wrapped) by a Store for a key it does not hold. A missing
// chunk is not an error for a reader: the chunk reads as the fill value.
var ErrNotFound = errors.New("key not found")

// ErrUnsupported is wrapped by errors about a feature this package does not implement
// (a codec, data type, filter or extension).
var ErrUnsupported = errors.New("unsupported")

// ErrCorrupt is wrapped by errors about stored bytes that do not decode (a truncated
// or damaged chunk, a checksum mismatch, a size that does not match the metadata).
var ErrCorrupt = errors.New("corrupt data")

// ErrNotRegular is wrapped by a read of a key whose file is not a regular file (a FIFO, a
// device, a socket): such a file could block the reader for ever, so it is refused, not read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error of a read whose value is larger than what it can
// legitimately be (a chunk larger than its codecs can encode, a body longer than its range or
// a store's cap): a remote store refuses such a value before allocating it.
var ErrTooLarge = errors.New("value larger than its bound")

// ErrMissingChunk is wrapped by MissingChunkError: a reader that refuses chunks that are
// not stored (instead of reading them as the fill value) reports one with it.
var ErrMissingChunk = errors.New("chunk not stored")

// Error is the error type of this package. It names what failed: the store, the node
// (array or group) path, the key read and the codec at fault, where known.
type Error struct {
	Store string // the store's String()
	Path  string // array or group path inside the store ("" for the root)
	Key   string // the store key being read, e.g. "temp/0.1.2"
	Codec string // the codec that failed, e.g. "zstd"
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("zarr")
	if e.Store != "" {
		b.WriteString(": store ")
		b.WriteString(e.Store)
	}
	if e.Path != "" {
		b.WriteString(": array ")
		b.WriteString(e.Path)
	}
	if e.Key != "" {
		b.WriteString(": key ")
		b.WriteString(e.Key)
	}
	if e.Codec != "" {
		b.WriteString(": codec ")
		b.WriteString(e.Codec)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// codecError tags an error with the codec that produced it; the array layer adds the
// store, path and key.
type codecError struct {
	codec string
	err   error
}

func (e *codecError) Error() string { return "codec " + e.codec + ": " + e.err.Error() }
func (e *codecError) Unwrap() error { return e.err }

func wrapCodec(name string, err error) error {
	if err == nil {
		return nil
	}
	var ce *codecError
	if errors.As(err, &ce) {
		return err
	}
	return &codecError{codec: name, err: err}
}

// withContext turns err into an *Error naming the store, path and key, lifting the
// codec name out of a codecError.
func withContext(store, path, key string, err error) error {
	if err == nil {
		return nil
	}
	var ze *Error
	if errors.As(err, &ze) {
		return err
	}
	e := &Error{Store: store, Path: path, Key: key, Err: err}
	if ce, ok := err.(*codecError); ok {
		e.Codec, e.Err = ce.codec, ce.err
	} else if errors.As(err, &ce) {
		e.Codec = ce.codec
	}
	return e
}
