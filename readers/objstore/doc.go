// Package objstore opens Zarr stores in object storage as readers/zarr Stores, and is the
// one place that maps a store path to a store: local paths go to readers/zarr (a directory
// or a zip archive), URLs to a remote store.
//
//	s3://bucket/key.zarr     S3 or any S3-compatible server (minio-go, SigV4)
//	gs://bucket/key.zarr     Google Cloud Storage through its S3-compatible XML API (HMAC keys)
//	https://host/path.zarr   any HTTP server that answers range requests (http:// too)
//
// A URL's store root is its path up to the first segment ending in ".zarr"; what follows
// names a node inside (s3://b/sat.zarr/group/data). A URL without such a segment is a store
// root as a whole.
//
// # Credentials and endpoints
//
// S3 follows the AWS conventions: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (an S3-compatible
// server; path-style addressing), AWS_REGION or AWS_DEFAULT_REGION, and the first of
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, the profile AWS_PROFILE
// (default "default") of the AWS credentials files (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials, and ~/.aws/config), or anonymous requests (public buckets;
// AWS_NO_SIGN_REQUEST=YES forces them). Instance roles (EC2 metadata) are not looked up.
// gs:// uses the endpoint storage.googleapis.com (GS_ENDPOINT_URL overrides it) with the
// HMAC key GS_ACCESS_KEY_ID / GS_SECRET_ACCESS_KEY, else anonymous requests
// (GS_NO_SIGN_REQUEST=YES forces them). http(s):// stores take no credentials.
//
// # Failures
//
// Every request is retried with exponential backoff on 5xx and 429 answers, connection
// resets, timeouts and stalls, and bodies longer than the request can return; after the last
// retry the error names the object (bucket and key, or URL), the answer and the attempts. A
// request has Options.Timeout (20 s) in all, and Options.StallTimeout (8 s) of silence at
// most (waiting for its headers, or between its body's bytes), so that a stalled request is
// retried well within the sampler's chunk deadline (60 s).
//
// Whatever a server announces or sends, a read allocates no more than the request can
// legitimately return: a range read its length; a chunk read what the chunk's codecs can
// encode from its decoded size (zarr.LimitedStore, zarr.Array.MaxStoredBytes); anything else
// (metadata, variable-length strings) Options.MaxObjectBytes (256 MiB). A larger
// Content-Length is refused before anything is allocated, and a body of unknown length (an
// endless chunked one) is read into a buffer that grows with what arrived, up to the bound
// and not past it: either is an error wrapping zarr.ErrTooLarge. A missing object wraps zarr.ErrNotFound (a missing
// chunk reads as the fill value, a missing metadata document is the reader's error naming
// it); a missing bucket wraps ErrNoBucket and refused credentials ErrDenied, each naming
// the bucket, the endpoint and where the credentials came from. On S3 a caller without
// s3:ListBucket gets 403 instead of 404 for a missing key, which therefore reads as
// ErrDenied, not as a missing chunk.
//
// Remote stores keep counters (StatsOf: requests, retries, bytes) for benchmarks and logs.
// They implement zarr.Store, zarr.BufferedStore and zarr.Sizer; S3 stores also zarr.Lister
// (so stores without consolidated metadata open); HTTP stores do not (HTTP has no listing:
// such a store opens through consolidated metadata, or array by array).
package objstore
