// Package faultproxy is an HTTP reverse proxy that injects latency and faults between a
// client and a server (an S3 server, a static file server), for the object-store tests and
// benchmarks: a delay before each request is forwarded, 503 answers, and connections reset
// before the answer or in the middle of its body. It counts requests and the body bytes it
// passes on. Faults follow a rule (every n-th request) or a test's own function.
package faultproxy
