// Package s3test starts real servers on 127.0.0.1 for the object-store tests: versitygw (an
// S3 server that checks SigV4) with its posix backend over a directory whose subdirectories
// are the buckets, and a plain HTTP file server for https://-style stores. versitygw is found
// in the repository's .tools/bin (installed by `make tools`, which `make test` runs) or on
// PATH; a test that needs it fails, saying how to install it, when it is missing: a CI run
// without it must not pass by skipping.
package s3test
