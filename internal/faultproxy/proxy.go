package faultproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what the proxy does with one request.
type Action int

const (
	// Forward passes the request on (after the delay).
	Forward Action = iota
	// Unavailable answers 503 Service Unavailable without forwarding.
	Unavailable
	// ResetBefore resets the connection (TCP RST) before any answer.
	ResetBefore
	// ResetMidBody forwards the request, sends the answer's header and half its body, then
	// resets the connection.
	ResetMidBody
)

// Config says which faults to inject. The zero value forwards everything at once.
type Config struct {
	// Delay is waited before each request is handled.
	Delay time.Duration
	// Sleep waits the Delay (nil: time.Sleep; a test records it instead).
	Sleep func(time.Duration)
	// Every503, EveryReset, EveryMidBody: every n-th request (counting from 1; 0: never) gets
	// that fault, the first rule that matches winning.
	Every503, EveryReset, EveryMidBody uint64
	// Decide, when set, chooses the action of request n (from 1) instead of the rules.
	Decide func(n uint64, r *http.Request) Action
}

// Stats are a proxy's counters.
type Stats struct {
	Requests  uint64 // requests received
	Forwarded uint64 // requests passed on to the server
	Faults    uint64 // requests answered with a fault
	Bytes     uint64 // answer body bytes passed on to clients
	// MaxInFlight is the most requests the proxy was handling at once (the client's
	// concurrency, delay included); InFlight those it is handling now (sampled over time by
	// benchmarks/objstore_bench.py).
	MaxInFlight int64
	InFlight    int64
}

// Proxy is a running proxy.
type Proxy struct {
	cfg      Config
	target   *url.URL
	rp       *httputil.ReverseProxy
	ln       net.Listener
	srv      *http.Server
	requests atomic.Uint64
	fwd      atomic.Uint64
	faults   atomic.Uint64
	bytes    atomic.Uint64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	bypass   map[string]http.Handler
}

// Bypass has requests for path served by h, not proxied nor counted (a tool's own endpoints).
// Call it before the first request.
func (p *Proxy) Bypass(path string, h http.Handler) {
	if p.bypass == nil {
		p.bypass = map[string]http.Handler{}
	}
	p.bypass[path] = h
}

// Start listens on addr ("127.0.0.1:0" for any free port) and proxies to target (a URL
// such as http://127.0.0.1:7070). The Host header is passed on as the client sent it, so
// requests signed for the proxy's address (SigV4) verify at the server.
func Start(addr, target string, cfg Config) (*Proxy, error) {
	t, err := url.Parse(target)
	if err != nil || t.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q: expected a URL such as http://127.0.0.1:7070", target)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", addr, err)
	}
	p := &Proxy{cfg: cfg, target: t, ln: ln}
	p.rp = httputil.NewSingleHostReverseProxy(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	p.rp.Transport = tr
	p.rp.BufferPool = &bufferPool{} // large copies: fewer system calls per forwarded byte
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's address as a URL (http://127.0.0.1:PORT).
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Requests: p.requests.Load(), Forwarded: p.fwd.Load(), Faults: p.faults.Load(), Bytes: p.bytes.Load(),
		MaxInFlight: p.maxIn.Load(), InFlight: p.inFlight.Load()}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error { return p.srv.Close() }

// action is what request n gets.
func (p *Proxy) action(n uint64, r *http.Request) Action {
	c := &p.cfg
	if c.Decide != nil {
		return c.Decide(n, r)
	}
	switch {
	case c.Every503 > 0 && n%c.Every503 == 0:
		return Unavailable
	case c.EveryReset > 0 && n%c.EveryReset == 0:
		return ResetBefore
	case c.EveryMidBody > 0 && n%c.EveryMidBody == 0:
		return ResetMidBody
	}
	return Forward
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := p.bypass[r.URL.Path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	n := p.requests.Add(1)
	in := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for m := p.maxIn.Load(); in > m && !p.maxIn.CompareAndSwap(m, in); m = p.maxIn.Load() {
	}
	if p.cfg.Delay > 0 {
		if p.cfg.Sleep != nil {
			p.cfg.Sleep(p.cfg.Delay)
		} else {
			time.Sleep(p.cfg.Delay)
		}
	}
	switch p.action(n, r) {
	case Unavailable:
		p.faults.Add(1)
		w.Header().Set("Retry-After", "0")
		http.Error(w, "faultproxy: injected 503", http.StatusServiceUnavailable)
	case ResetBefore:
		p.faults.Add(1)
		reset(w)
	case ResetMidBody:
		p.faults.Add(1)
		p.fwd.Add(1)
		p.rp.ServeHTTP(&cutWriter{ResponseWriter: w}, r)
	default:
		p.fwd.Add(1)
		p.rp.ServeHTTP(&countWriter{ResponseWriter: w, n: &p.bytes}, r)
	}
}

// reset closes the client's connection with SO_LINGER 0, which sends a TCP RST.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: the server's ResponseWriter cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// countWriter counts the body bytes written.
type countWriter struct {
	http.ResponseWriter
	n *atomic.Uint64
}

func (c *countWriter) Write(b []byte) (int, error) {
	k, err := c.ResponseWriter.Write(b)
	c.n.Add(uint64(k))
	return k, err
}

// cutWriter passes on the header and half the body (by Content-Length), then resets.
type cutWriter struct {
	http.ResponseWriter
	left, cut int64
	started   bool
	done      bool
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.done {
		return 0, io.ErrClosedPipe
	}
	if !c.started {
		c.started = true
		var size int64
		fmt.Sscan(c.Header().Get("Content-Length"), &size)
		c.left = size / 2
	}
	if int64(len(b)) < c.left {
		c.left -= int64(len(b))
		return c.ResponseWriter.Write(b)
	}
	c.ResponseWriter.Write(b[:c.left])
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	c.done = true
	reset(c.ResponseWriter)
	return 0, io.ErrClosedPipe
}

// bufferPool lends the reverse proxy 256 KiB copy buffers.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 256<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
