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
	// Timeout bounds one request, headers and body; default 60 s.
	Timeout time.Duration
}

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
		o.Timeout = 60 * time.Second
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
// reset or cut short, a timeout.
func transient(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == 429
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
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

// do runs op until it succeeds, fails for good, or has failed transiently Retries+1 times;
// the last error then says how many attempts were made. Each attempt gets its own timeout.
func (r *retrier) do(op func(ctx context.Context) error) error {
	wait := r.opt.Backoff
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.opt.Timeout)
		err := op(ctx)
		cancel()
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
