package objstore

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/gobatch/gobatch/readers/zarr"
)

// S3Store is a Zarr store under a key prefix of an S3 bucket (s3://), or of a Google Cloud
// Storage bucket through its S3-compatible API (gs://), read with minio-go.
type S3Store struct {
	remote
	core   *minio.Core
	scheme string
	bucket string
	prefix string // "" or ending in "/"
	ep     endpoint
	creds  string // where the credentials came from, for messages
	// listed holds the sizes a listing returned (key -> int64), so that counting an array's
	// stored bytes (List, then Size of each key) costs one request, not one per chunk.
	listed sync.Map
}

var noClientRetries sync.Once

// NewS3Store returns the store at scheme://bucket/prefix (scheme "s3" or "gs"), with the
// endpoint, region and credentials of the environment (see the package doc). Nothing is
// requested until a key is read.
func NewS3Store(scheme, bucket, prefix string, opt Options) (*S3Store, error) {
	sv, ok := services[scheme]
	if !ok {
		return nil, fmt.Errorf("open store %s://%s/%s: unknown scheme %q", scheme, bucket, prefix, scheme)
	}
	name := fmt.Sprintf("%s://%s/%s", scheme, bucket, prefix)
	if bucket == "" {
		return nil, fmt.Errorf("open store %s: no bucket; expected %s://BUCKET/KEY.zarr", name, scheme)
	}
	ep, err := sv.endpoint()
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	noClientRetries.Do(func() {
		// minio-go sleeps up to DefaultRetryUnit after a retryable failure even when told
		// not to retry (MaxRetries 1): the store's own retrier waits instead.
		minio.DefaultRetryUnit = time.Millisecond
	})
	creds, from := sv.credentials()
	mo := &minio.Options{
		Creds: creds, Secure: ep.secure, Region: sv.region(ep), Transport: newTransport(),
		MaxRetries: 1, // the store retries itself (retrier), with the errors it names
	}
	if ep.custom {
		mo.BucketLookup = minio.BucketLookupPath
	}
	core, err := minio.NewCore(ep.host, mo)
	if err != nil {
		return nil, fmt.Errorf("open store %s at %s: %w", name, ep, err)
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	s := &S3Store{core: core, scheme: scheme, bucket: bucket, prefix: prefix, ep: ep, creds: from}
	s.init(s, opt)
	return s, nil
}

// String implements zarr.Store: the store's URL.
func (s *S3Store) String() string {
	return fmt.Sprintf("%s://%s/%s", s.scheme, s.bucket, strings.TrimSuffix(s.prefix, "/"))
}

// object is key's object name in the bucket.
func (s *S3Store) object(key string) (string, error) { return joinKey(s.prefix, key) }

// fetch sends one GET of obj for sp and reads the body into buf.
func (s *S3Store) fetch(a *attempt, obj string, sp span, buf []byte) ([]byte, error) {
	var o minio.GetObjectOptions
	if sp.header != "" {
		o.Set("Range", sp.header)
	}
	body, info, _, err := s.core.GetObject(a.ctx, s.bucket, obj, o)
	if err != nil {
		return nil, answerError(err)
	}
	defer body.Close()
	a.progress()
	return readBody(a.body(body), info.Size, sp.limit, buf, &s.stats)
}

// answerError turns minio's error response into a statusError (for the retry rule and the
// messages); other errors (the connection's) are kept.
func answerError(err error) error {
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.StatusCode != 0 {
		return &statusError{Status: er.StatusCode, Code: er.Code, Message: er.Message}
	}
	return err
}

// fail turns a request's final error into the store's, naming the object (bucket and key)
// and, for a refusal, the endpoint and where the credentials came from.
func (s *S3Store) fail(key, obj string, sp span, err error) error {
	var se *statusError
	if errors.As(err, &se) {
		switch {
		case se.Code == "NoSuchBucket":
			return fmt.Errorf("%s: bucket %q does not exist at %s: %w", s.url(obj), s.bucket, s.ep, ErrNoBucket)
		case se.Code == "NoSuchKey" || se.Status == http.StatusNotFound && se.Code == "":
			return fmt.Errorf("%s: %w", key, zarr.ErrNotFound)
		case se.Status == http.StatusRequestedRangeNotSatisfiable:
			return outOfRange(key, sp)
		case se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden:
			return fmt.Errorf("%s at %s: %v; credentials: %s: %w", s.url(obj), s.ep, err, s.creds, ErrDenied)
		}
	}
	if sp.header != "" {
		return fmt.Errorf("get %s (%s) at %s: %w", s.url(obj), sp.header, s.ep, err)
	}
	return fmt.Errorf("get %s at %s: %w", s.url(obj), s.ep, err)
}

// url names obj for messages: scheme://bucket/key.
func (s *S3Store) url(obj string) string {
	return fmt.Sprintf("%s://%s/%s", s.scheme, s.bucket, obj)
}

// Size implements zarr.Sizer: from the last listing that returned key, else a HEAD request.
func (s *S3Store) Size(key string) (int64, error) {
	obj, err := s.object(key)
	if err != nil {
		return 0, err
	}
	if n, ok := s.listed.Load(key); ok {
		return n.(int64), nil
	}
	var size int64
	err = s.retry.do(func(a *attempt) error {
		s.stats.requests.Add(1)
		info, err := s.core.StatObject(a.ctx, s.bucket, obj, minio.StatObjectOptions{})
		size = info.Size
		return answerError(err)
	})
	if err != nil {
		return 0, s.fail(key, obj, span{}, err)
	}
	return size, nil
}

// List implements zarr.Lister: every key under the store's prefix that starts with prefix.
func (s *S3Store) List(prefix string) ([]string, error) {
	var keys []string
	err := s.retry.do(func(a *attempt) error {
		keys = keys[:0]
		s.stats.requests.Add(1)
		for o := range s.core.ListObjectsIter(a.ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
			if o.Err != nil {
				return answerError(o.Err)
			}
			a.progress()
			k := strings.TrimPrefix(o.Key, s.prefix)
			keys = append(keys, k)
			s.listed.Store(k, o.Size)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.url(s.prefix+prefix), s.fail(prefix, s.prefix+prefix, span{}, err))
	}
	sort.Strings(keys)
	return keys, nil
}
