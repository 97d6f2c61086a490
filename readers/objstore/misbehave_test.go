package objstore_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/gobatch/gobatch/internal/s3test"
	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/readers/zarr"
)

// Misbehaving servers on 127.0.0.1, written here, against the HTTP and the S3 store: each
// read ends within a time bound with an error naming the object (or recovers, for a stall),
// and the memory it allocates stays bounded whatever the server announces or sends.

// A small v2 array: 4x4 int16 chunks (32 bytes decoded) under zstd, so its chunk reads are
// bounded by what zstd can encode from 32 bytes (a little over 1 KiB).
const zarray = `{"zarr_format":2,"shape":[8,8],"chunks":[4,4],"dtype":"<i2","compressor":{"id":"zstd","level":1},"fill_value":0,"filters":null,"order":"C"}`

// behaviour answers one request for a chunk; n counts the requests for it (from 1).
type behaviour func(w http.ResponseWriter, r *http.Request, n int64)

// misbehaving serves the array's metadata and answers every chunk request with b, at
// /bucket/a.zarr/... (the S3 store's path-style requests and the HTTP store alike).
func misbehaving(t *testing.T, b behaviour) (url string, requests *atomic.Int64) {
	requests = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat)) // minio wants it
		switch {
		case strings.HasSuffix(r.URL.Path, "/.zarray"):
			io.WriteString(w, zarray)
		case strings.HasSuffix(r.URL.Path, "/.zattrs"), strings.HasSuffix(r.URL.Path, "/zarr.json"), strings.HasSuffix(r.URL.Path, "/.zmetadata"), strings.HasSuffix(r.URL.Path, "/.zgroup"):
			http.NotFound(w, r)
		default:
			b(w, r, requests.Add(1))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests
}

// hugeLength announces a terabyte and sends a few bytes.
func hugeLength(w http.ResponseWriter, r *http.Request, _ int64) {
	w.Header().Set("Content-Length", strconv.FormatInt(1<<40, 10))
	w.WriteHeader(http.StatusOK)
	w.Write(make([]byte, 1000))
}

// endless sends a chunked body that never ends (until the client goes away).
func endless(w http.ResponseWriter, r *http.Request, _ int64) {
	w.WriteHeader(http.StatusOK)
	block := bytes.Repeat([]byte{0xAB}, 64<<10)
	for {
		if _, err := w.Write(block); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		if r.Context().Err() != nil {
			return
		}
	}
}

// short announces 100 bytes and sends 50, then closes the connection.
func short(w http.ResponseWriter, r *http.Request, _ int64) {
	w.Header().Set("Content-Length", "100")
	w.WriteHeader(http.StatusOK)
	w.Write(make([]byte, 50))
	w.(http.Flusher).Flush()
	conn, _, _ := w.(http.Hijacker).Hijack()
	conn.Close()
}

// garbage answers with bytes that are not HTTP.
func garbage(w http.ResponseWriter, r *http.Request, _ int64) {
	conn, buf, _ := w.(http.Hijacker).Hijack()
	buf.WriteString("\x00\xffthis is not HTTP\r\n\r\n")
	buf.Flush()
	conn.Close()
}

// stallThenServe stalls its first two answers (the first before its headers, the second in
// its body) until the client gives up, then serves a real zstd chunk.
func stallThenServe(chunk []byte) behaviour {
	return func(w http.ResponseWriter, r *http.Request, n int64) {
		switch n {
		case 1:
			<-r.Context().Done()
		case 2:
			w.Header().Set("Content-Length", strconv.Itoa(len(chunk)))
			w.WriteHeader(http.StatusOK)
			w.Write(chunk[:3])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.Header().Set("Content-Length", strconv.Itoa(len(chunk)))
			w.Write(chunk)
		}
	}
}

// quick stalls and retries for the tests: a stall is noticed after 300 ms.
var quick = objstore.Options{Retries: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 5 * time.Second, StallTimeout: 300 * time.Millisecond}

// openBoth opens the array a.zarr at the server both ways: over HTTP, and over S3 with the
// server as the endpoint (path-style: /bucket/key).
func openBoth(t *testing.T, url string, opt objstore.Options) map[string]*zarr.Array {
	s3test.SetEnv(t, url)
	out := map[string]*zarr.Array{}
	for _, root := range []string{url + "/bucket/a.zarr", "s3://bucket/a.zarr"} {
		st, err := objstore.OpenStore(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		a, err := zarr.OpenArray(st, "")
		if err != nil {
			t.Fatalf("open %s: %v", root, err)
		}
		out[root] = a
	}
	return out
}

// allocated runs f and returns the bytes it allocated (all goroutines; the test runs alone).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestMisbehavingServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     behaviour
		wants []string // in the error, besides the object's name
	}{
		{"huge Content-Length", hugeLength, []string{"announces 1099511627776 bytes", "at most", "gave up after 4 attempts"}},
		{"endless body", endless, []string{"goes on past", "gave up after 4 attempts"}},
		{"short body", short, []string{"unexpected EOF", "gave up after 4 attempts"}},
		{"garbage", garbage, []string{"malformed HTTP"}},
		{"stall", func(w http.ResponseWriter, r *http.Request, _ int64) { <-r.Context().Done() }, []string{"stalled: nothing received for 300ms", "gave up after 4 attempts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := misbehaving(t, tc.b)
			for root, a := range openBoth(t, url, quick) {
				var err error
				start := time.Now()
				alloc := allocated(func() { _, err = a.DecodeChunk([]int{1, 0}, nil) })
				took := time.Since(start)
				msg := fmtErr(err)
				object := "a.zarr/1.0"
				if !strings.Contains(msg, object) {
					t.Fatalf("%s: error %q does not name the object %s", root, msg, object)
				}
				for _, w := range tc.wants {
					if !strings.Contains(msg, w) {
						t.Fatalf("%s: error %q does not say %q", root, msg, w)
					}
				}
				// Four attempts, each bounded by the chunk's 1 KiB bound (or 64 KiB of
				// reading buffer), plus the client's own buffers.
				if alloc > 8<<20 {
					t.Fatalf("%s: the read allocated %d bytes", root, alloc)
				}
				t.Logf("%s: %v, %d bytes allocated: %s", root, took.Round(time.Millisecond), alloc, msg)
			}
		})
	}
}

// A stall before the headers and one in the body are each retried after the stall timeout,
// well within the request's timeout, and the read then returns the chunk.
func TestStallIsRetried(t *testing.T) {
	want := make([]byte, 32)
	for i := range want {
		want[i] = byte(i)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	chunk := enc.EncodeAll(want, nil)
	for _, root := range []string{"http", "s3"} {
		t.Run(root, func(t *testing.T) {
			url, requests := misbehaving(t, stallThenServe(chunk))
			a := openBoth(t, url, quick)
			name := url + "/bucket/a.zarr"
			if root == "s3" {
				name = "s3://bucket/a.zarr"
			}
			start := time.Now()
			got, err := a[name].DecodeChunk([]int{0, 1}, nil)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("read through two stalls: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %v, want %v", got, want)
			}
			if n := requests.Load(); n != 3 {
				t.Fatalf("%d chunk requests; want 3 (two stalled, one served)", n)
			}
			// Two stalled requests, each ended by the stall timeout (300 ms) and retried: the
			// server saw three, the store counted two retries.
			if st, _ := objstore.StatsOf(a[name].Store); st.Retries != 2 {
				t.Fatalf("%d retries counted; want 2", st.Retries)
			}
			t.Logf("read through two stalls in %v", took)
		})
	}
}

// The stores' defaults retry a stall well within the sampler's default chunk deadline (60 s),
// and a request that stalls every time fails with the store's error (naming the object) before
// that deadline: the retries' whole budget (every attempt stalled, the longest backoffs) fits.
func TestDefaultTimeoutsBelowChunkDeadline(t *testing.T) {
	const deadline = 60 * time.Second
	if objstore.DefaultTimeout > deadline/2 {
		t.Fatalf("request timeout %v: a hung request would not be retried within a %v chunk deadline", objstore.DefaultTimeout, deadline)
	}
	budget, wait := time.Duration(0), 100*time.Millisecond // the defaults: 5 retries, 100 ms doubling to 5 s
	for attempt := 0; attempt <= 5; attempt++ {
		budget += objstore.DefaultStallTimeout
		if attempt < 5 {
			budget += wait
			wait = min(2*wait, 5*time.Second)
		}
	}
	if budget >= deadline-5*time.Second {
		t.Fatalf("six stalled attempts take up to %v; want well under the %v chunk deadline", budget, deadline)
	}
}

// In a process of its own (this test binary run again), reads hammer the huge-length and
// endless servers on 8 goroutines with the default options: the child's peak RSS stays far
// below what the servers announce or send (it ran out of memory at a terabyte's
// Content-Length, and grew by gigabytes on an endless body, before the bounds).
func TestMisbehavingServersChildRSS(t *testing.T) {
	if os.Getenv("OBJSTORE_CHILD_URL") != "" {
		childReads(os.Getenv("OBJSTORE_CHILD_URL"))
		return
	}
	for _, tc := range []struct {
		name string
		b    behaviour
	}{{"huge Content-Length", hugeLength}, {"endless body", endless}} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := misbehaving(t, tc.b)
			cmd := exec.Command(os.Args[0], "-test.run=^TestMisbehavingServersChildRSS$")
			cmd.Env = append(os.Environ(), "OBJSTORE_CHILD_URL="+url)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
			t.Logf("child peak RSS %d MiB in %v: %s", rss>>20, time.Since(start).Round(time.Millisecond), lastLine(out))
			if !strings.Contains(string(out), "32 errors naming the object") {
				t.Fatalf("child output:\n%s", out)
			}
			if rss > 200<<20 {
				t.Fatalf("child peak RSS %d MiB; want under 200 MiB", rss>>20)
			}
		})
	}
}

// childReads reads chunk (1, 0) 32 times on 8 goroutines over HTTP and S3 with the default
// options (retries shortened) and prints how many errors named the object.
func childReads(url string) {
	os.Setenv("AWS_ENDPOINT_URL", url)
	os.Setenv("AWS_REGION", "us-east-1")
	os.Setenv("AWS_NO_SIGN_REQUEST", "YES")
	opt := objstore.Options{Retries: 2, Backoff: time.Millisecond}
	named := atomic.Int64{}
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			root := url + "/bucket/a.zarr"
			if g%2 == 1 {
				root = "s3://bucket/a.zarr"
			}
			st, err := objstore.OpenStore(root, opt)
			if err != nil {
				panic(err)
			}
			a, err := zarr.OpenArray(st, "")
			if err != nil {
				panic(err)
			}
			for range 4 {
				_, err := a.DecodeChunk([]int{1, 0}, nil)
				if err != nil && strings.Contains(err.Error(), "a.zarr/1.0") && errors.Is(err, zarr.ErrTooLarge) {
					named.Add(1)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	fmt.Printf("%d errors naming the object\n", named.Load())
}

func lastLine(b []byte) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

// A server that ignores Range answers every range read with the whole value: the store skips
// to the range and keeps only its bytes, without holding the value (10 MiB here).
func TestRangeIgnoredIsBounded(t *testing.T) {
	value := make([]byte, 10<<20)
	for i := range value {
		value[i] = byte(i * 7)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(value)))
		w.Write(value) // 200, whatever the Range
	}))
	t.Cleanup(srv.Close)
	st, err := objstore.OpenStore(srv.URL+"/v.zarr", quick)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n, from, to int64 }{
		{100, 10, 100, 110},
		{5 << 20, 1 << 10, 5 << 20, 5<<20 + 1<<10},
		{-16, -1, 10<<20 - 16, 10 << 20},
		{-16, 4, 10<<20 - 16, 10<<20 - 12},
	} {
		var got []byte
		alloc := allocated(func() { got, err = st.GetRange("k", c.off, c.n) })
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
		}
		if !bytes.Equal(got, value[c.from:c.to]) {
			t.Fatalf("GetRange(%d, %d): %d bytes, not the value's [%d, %d)", c.off, c.n, len(got), c.from, c.to)
		}
		if alloc > 2<<20 {
			t.Fatalf("GetRange(%d, %d) allocated %d bytes of a 10 MiB value", c.off, c.n, alloc)
		}
	}
	if _, err := st.GetRange("k", 11<<20, 10); !errors.Is(err, zarr.ErrCorrupt) {
		t.Fatalf("a range past the value's end: %v; want ErrCorrupt", err)
	}
}
