package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/gobatch/gobatch/readers/zarr"
)

// Options tune the remote stores. The zero value takes the defaults.
type Options struct {
	// Retries is how many times a failed request is tried again (transient failures only);
	// default 5.
	Retries int
	// Backoff is the wait before the first retry, doubled for each next one (with jitter, at
	// most MaxBackoff); default 100 ms.
	Backoff time.Duration
	// MaxBackoff caps a wait; default 5 s.
	MaxBackoff time.Duration
	// Timeout bounds one request, headers and body; default 20 s, well below the sampler's
	// chunk deadline (60 s), so that a request that hangs is retried within it.
	Timeout time.Duration
	// StallTimeout bounds a request's silence: the wait for its answer's headers, and any
	// pause in its body; default 8 s. A stalled request is retried: with the default retries
	// and backoff, six stalled attempts end within 52 s, so that the store's error (naming the
	// object and the stall) comes before the sampler's chunk deadline (60 s).
	StallTimeout time.Duration
	// MaxObjectBytes caps a value whose size nothing else bounds (metadata documents,
	// variable-length string chunks, a read to the end of a value); default 256 MiB. A chunk
	// read is bounded by what its codecs can encode (zarr.LimitedStore), a range read by its
	// length.
	MaxObjectBytes int64
}

// The defaults of Options.
const (
	DefaultTimeout        = 20 * time.Second
	DefaultStallTimeout   = 8 * time.Second
	DefaultMaxObjectBytes = 256 << 20
)

func (o Options) withDefaults() Options {
	if o.Retries == 0 {
		o.Retries = 5
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	o.StallTimeout = min(o.StallTimeout, o.Timeout)
	if o.MaxObjectBytes <= 0 {
		o.MaxObjectBytes = DefaultMaxObjectBytes
	}
	return o
}

// statusError is a server's answer that is not a success: the HTTP status and, for S3, its
// error code and message.
type statusError struct {
	Status  int
	Code    string
	Message string
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// transient reports whether err is worth another try: a 5xx or 429 answer, a connection
// reset or cut short, a timeout or stall, a body longer than the request can return (a
// proxy's fault as often as the object's).
func transient(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == 429
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, zarr.ErrTooLarge) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retrier runs requests with the retry policy of its options.
type retrier struct {
	opt   Options
	stats *counters
}

// attempt is one try of a request. Its context ends at the request's timeout, or when the
// request made no progress for the stall timeout: the timer starts with the request (the
// wait for headers) and each read that brings bytes re-arms it (body).
type attempt struct {
	ctx   context.Context
	stall time.Duration
	watch *time.Timer
}

// progress re-arms the stall timer: bytes arrived.
func (a *attempt) progress() { a.watch.Reset(a.stall) }

// body is r whose reads count as progress.
func (a *attempt) body(r io.Reader) io.Reader { return progressReader{r, a} }

type progressReader struct {
	r io.Reader
	a *attempt
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.a.progress()
	}
	return n, err
}

// timeoutError ends an attempt that ran past its timeout or stalled; it is a net.Error
// timeout, so transient.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// do runs op until it succeeds, fails for good, or has failed transiently Retries+1 times;
// the last error then says how many attempts were made. Each attempt gets its own timeout
// and stall timer.
func (r *retrier) do(op func(a *attempt) error) error {
	wait := r.opt.Backoff
	stalled := &timeoutError{fmt.Sprintf("stalled: nothing received for %v", r.opt.StallTimeout)}
	timedOut := &timeoutError{fmt.Sprintf("not finished within %v", r.opt.Timeout)}
	for attempt := 0; ; attempt++ {
		err := r.try(op, stalled, timedOut)
		if err == nil || !transient(err) {
			return err
		}
		if attempt == r.opt.Retries {
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt+1)
		}
		r.stats.retries.Add(1)
		// Full jitter in [wait/2, wait]: clients retrying together spread out.
		time.Sleep(wait/2 + rand.N(wait/2+1))
		wait = min(2*wait, r.opt.MaxBackoff)
	}
}

// try runs one attempt of op; an attempt its timeout or stall timer ended fails with that
// reason rather than the cancellation's.
func (r *retrier) try(op func(a *attempt) error, stalled, timedOut error) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, r.opt.Timeout, timedOut)
	defer stop()
	a := &attempt{ctx: ctx, stall: r.opt.StallTimeout}
	a.watch = time.AfterFunc(a.stall, func() { cancel(stalled) })
	defer a.watch.Stop()
	err := op(a)
	if err != nil {
		if cause := context.Cause(ctx); cause == stalled || cause == timedOut {
			return cause
		}
	}
	return err
}
