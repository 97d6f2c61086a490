package objstore

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gobatch/gobatch/readers/zarr"
)

// HTTPStore is a Zarr store under a URL prefix on an HTTP(S) server that answers GET (with
// Range) and HEAD. It cannot list keys: it opens stores with consolidated metadata, or
// arrays by their own metadata.
type HTTPStore struct {
	remote
	base   string // the store root's URL, ending in "/"
	client *http.Client
}

// NewHTTPStore returns the store rooted at the http:// or https:// URL root. Nothing is
// requested until a key is read.
func NewHTTPStore(root string, opt Options) (*HTTPStore, error) {
	u, err := url.Parse(root)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("open store %s: expected an http:// or https:// URL with a host", Redact(root))
	}
	s := &HTTPStore{base: strings.TrimSuffix(root, "/") + "/", client: &http.Client{Transport: newTransport()}}
	s.init(s, opt)
	return s, nil
}

// String implements zarr.Store: the store's URL, its credentials redacted (Redact).
func (s *HTTPStore) String() string { return Redact(strings.TrimSuffix(s.base, "/")) }

// object is key's URL.
func (s *HTTPStore) object(key string) (string, error) {
	k, err := joinKey("", key)
	if err != nil {
		return "", err
	}
	return s.base + k, nil
}

// fetch sends one GET of u for sp and reads the body into buf.
func (s *HTTPStore) fetch(a *attempt, u string, sp span, buf []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if sp.header != "" {
		req.Header.Set("Range", sp.header)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	a.progress()
	body := a.body(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent:
	default:
		io.Copy(io.Discard, io.LimitReader(body, 4096)) // let the connection be reused
		return nil, &statusError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	}
	if resp.StatusCode == http.StatusOK && sp.header != "" {
		// The server ignored the Range: the body is the whole value.
		return sp.fromWhole(body, resp.ContentLength, s.retry.opt.MaxObjectBytes, buf, &s.stats)
	}
	return readBody(body, resp.ContentLength, sp.limit, buf, &s.stats)
}

// fail turns a request's final error into the store's: a missing key wraps
// zarr.ErrNotFound, a refusal ErrDenied, anything else names the URL.
func (s *HTTPStore) fail(key, u string, sp span, err error) error {
	if se, ok := err.(*statusError); ok {
		switch se.Status {
		case http.StatusNotFound:
			return fmt.Errorf("%s: %w", key, zarr.ErrNotFound)
		case http.StatusRequestedRangeNotSatisfiable:
			return outOfRange(key, sp)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("GET %s: %v: %w", Redact(u), RedactText(err.Error()), ErrDenied)
		}
	}
	if sp.header != "" {
		return fmt.Errorf("GET %s (%s): %w", Redact(u), sp.header, redactErr(err))
	}
	return fmt.Errorf("GET %s: %w", Redact(u), redactErr(err))
}

// Size implements zarr.Sizer with a HEAD request.
func (s *HTTPStore) Size(key string) (int64, error) {
	u, err := s.object(key)
	if err != nil {
		return 0, err
	}
	var size int64
	err = s.retry.do(func(a *attempt) error {
		req, err := http.NewRequestWithContext(a.ctx, http.MethodHead, u, nil)
		if err != nil {
			return err
		}
		s.stats.requests.Add(1)
		resp, err := s.client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return &statusError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
		}
		size = resp.ContentLength
		return nil
	})
	if err != nil {
		return 0, s.fail(key, u, span{}, err)
	}
	return size, nil
}

// newTransport is an HTTP transport that keeps enough idle connections for the requests a
// prefetch keeps in flight (the default keeps 2 per host, which would reconnect constantly).
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 256
	t.DisableCompression = true // chunks are compressed already; Range needs identity
	return t
}
