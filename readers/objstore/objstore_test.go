package objstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobatch/gobatch/internal/faultproxy"
	"github.com/gobatch/gobatch/internal/s3test"
	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/readers/zarr"
)

// The fixtures of readers/zarr (written by zarr-python, testdata/gen.py), served by a real
// S3 server and an HTTP server, read through the remote stores and compared value for value
// with the same directories read from disk.

const bucket = "fixtures"

// stores are the fixture stores served: the originals (consolidated) and copies without
// consolidated metadata.
var stores = []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr", "v2-plain.zarr", "v3-plain.zarr"}

type servers struct {
	dir   string // the bucket directory
	s3    *s3test.Server
	http  string // the HTTP server's URL of the bucket directory
	setUp sync.Once
}

var srv servers

// serve copies the fixtures once, starts the servers and points the S3 environment at
// versitygw directly.
func serve(t *testing.T) *servers {
	t.Helper()
	srv.setUp.Do(func() {
		root, err := os.MkdirTemp("", "objstore-test-*")
		if err != nil {
			t.Fatal(err)
		}
		srv.dir = filepath.Join(root, bucket)
		for _, s := range []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr"} {
			s3test.CopyDir(t, filepath.Join("..", "zarr", "testdata", s), filepath.Join(srv.dir, s))
		}
		unconsolidate(t, filepath.Join("..", "zarr", "testdata", "v2.zarr"), filepath.Join(srv.dir, "v2-plain.zarr"))
		unconsolidate(t, filepath.Join("..", "zarr", "testdata", "v3.zarr"), filepath.Join(srv.dir, "v3-plain.zarr"))
	})
	// Each test gets its own servers (stopped at its end) over the shared bucket tree.
	srv.s3 = s3test.Start(t, filepath.Dir(srv.dir))
	srv.http = s3test.StartHTTP(t, srv.dir)
	s3test.SetEnv(t, srv.s3.URL)
	return &srv
}

// unconsolidate copies a store without its consolidated metadata (v2 .zmetadata, v3
// consolidated_metadata), so that opening it needs listing.
func unconsolidate(t *testing.T, src, dst string) {
	s3test.CopyDir(t, src, dst)
	os.Remove(filepath.Join(dst, ".zmetadata"))
	p := filepath.Join(dst, "zarr.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return // v2
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "consolidated_metadata")
	out, _ := json.Marshal(doc)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fastRetries keeps the retry tests short.
var fastRetries = objstore.Options{Retries: 4, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 10 * time.Second}

// sameArray reads every element of the array both ways and compares them.
func sameArray(t *testing.T, store string, local, remote *zarr.Array) {
	t.Helper()
	if !reflect.DeepEqual(local.Shape, remote.Shape) || !reflect.DeepEqual(local.Chunks, remote.Chunks) || local.DType != remote.DType {
		t.Fatalf("%s/%s: remote shape %v chunks %v dtype %v; local %v %v %v", store, local.Path,
			remote.Shape, remote.Chunks, remote.DType, local.Shape, local.Chunks, local.DType)
	}
	start, stop := make([]int, len(local.Shape)), local.Shape
	n := local.Len() * local.DType.Size
	want, got := make([]byte, n), make([]byte, n)
	werr := local.ReadBox(start, stop, want, nil)
	if errors.Is(werr, zarr.ErrUnsupported) { // variable-length strings and bytes
		want, werr := local.ReadStrings()
		got, gerr := remote.ReadStrings()
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(want, got) {
			t.Fatalf("%s/%s: strings remote %q (%v), local %q (%v)", store, local.Path, got, gerr, want, werr)
		}
		return
	}
	gerr := remote.ReadBox(start, stop, got, nil)
	if werr != nil || gerr != nil {
		t.Fatalf("%s/%s: local read: %v; remote read: %v", store, local.Path, werr, gerr)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("%s/%s: remote values differ from the same store on disk", store, local.Path)
	}
}

// compareStore opens store both ways (the remote one at url) and compares every array.
func compareStore(t *testing.T, dir, store, url string) int {
	t.Helper()
	lh, err := zarr.OpenPath(filepath.Join(dir, store))
	if err != nil {
		t.Fatal(err)
	}
	rh, err := objstore.OpenPath(url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	if rh.Store.String() != url || rh.ZarrFormat != lh.ZarrFormat || rh.Consolidated != lh.Consolidated {
		t.Fatalf("%s: store %s format %d consolidated %v; local format %d consolidated %v", url,
			rh.Store, rh.ZarrFormat, rh.Consolidated, lh.ZarrFormat, lh.Consolidated)
	}
	if !reflect.DeepEqual(lh.Arrays(), rh.Arrays()) {
		t.Fatalf("%s: arrays %v; on disk %v", url, rh.Arrays(), lh.Arrays())
	}
	n := 0
	for _, p := range lh.Arrays() {
		la, lerr := lh.OpenArray(p)
		ra, rerr := rh.OpenArray(p)
		if lerr != nil {
			if rerr == nil {
				t.Fatalf("%s/%s: opens remotely but not from disk (%v)", url, p, lerr)
			}
			continue // an array the reader refuses both ways
		}
		if rerr != nil {
			t.Fatalf("%s/%s: %v", url, p, rerr)
		}
		sameArray(t, url, la, ra)
		n++
	}
	return n
}

func TestS3StoresEqualDisk(t *testing.T) {
	s := serve(t)
	for _, store := range stores {
		for _, scheme := range []string{"s3", "gs"} {
			url := scheme + "://" + bucket + "/" + store
			n := compareStore(t, s.dir, store, url)
			if n < 4 {
				t.Fatalf("%s: only %d arrays compared", url, n)
			}
		}
	}
}

func TestHTTPStoresEqualDisk(t *testing.T) {
	s := serve(t)
	for _, store := range []string{"v2.zarr", "v3.zarr", "cf2.zarr", "cf3.zarr"} {
		compareStore(t, s.dir, store, s.http+"/"+store)
	}
	// Without consolidated metadata an HTTP store cannot list: the hierarchy is refused with
	// a clear error, and each array opens by its own metadata.
	for _, store := range []string{"v2-plain.zarr", "v3-plain.zarr"} {
		url := s.http + "/" + store
		if _, err := objstore.OpenPath(url); err == nil || !errors.Is(err, zarr.ErrUnsupported) || !strings.Contains(err.Error(), "cannot list") {
			t.Fatalf("open %s: %v; want an error saying the store cannot list keys", url, err)
		}
		lh, err := zarr.OpenPath(filepath.Join(s.dir, store))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range lh.Arrays() {
			la, err := lh.OpenArray(p)
			if err != nil {
				continue
			}
			ra, err := objstore.OpenArrayPath(url + "/" + p)
			if err != nil {
				t.Fatalf("open %s/%s: %v", url, p, err)
			}
			sameArray(t, url, la, ra)
			n++
		}
		if n < 20 {
			t.Fatalf("%s: only %d arrays compared", url, n)
		}
	}
}

// TestShardedRangeReads reads a sharded array chunk by chunk and checks that every inner
// chunk came from a byte-range read (two requests per shard's index and one per chunk, not
// whole shards).
func TestShardedRangeReads(t *testing.T) {
	serve(t)
	for _, name := range []string{"sharded_end", "sharded_start", "sharded_nested"} {
		local, err := zarr.OpenArrayPath(filepath.Join(srv.dir, "v3.zarr", name))
		if err != nil {
			t.Fatal(err)
		}
		st, err := objstore.OpenStore("s3://"+bucket+"/v3.zarr", objstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		remote, err := zarr.OpenArray(st, name)
		if err != nil {
			t.Fatal(err)
		}
		// One inner chunk costs its shard's index and the chunk itself, not the shard.
		before, _ := objstore.StatsOf(st)
		if _, err := remote.DecodeChunk(make([]int, len(remote.Shape)), nil); err != nil {
			t.Fatal(err)
		}
		after, _ := objstore.StatsOf(st)
		shard0 := mustSize(t, filepath.Join(srv.dir, "v3.zarr", name, "c", strings.Repeat("0/", len(remote.Shape)-1)+"0"))
		if got := after.Bytes - before.Bytes; got >= uint64(shard0) || after.Requests-before.Requests > 2 {
			t.Fatalf("%s chunk 0: %d requests, %d bytes of a %d-byte shard; want 2 range reads (index, chunk)", name, after.Requests-before.Requests, got, shard0)
		}
		grid := remote.ChunkGrid()
		idx := make([]int, len(grid))
		for {
			want, wf, werr := local.DecodeChunkFound(idx, nil)
			got, gf, gerr := remote.DecodeChunkFound(idx, nil)
			if werr != nil || gerr != nil || wf != gf || !bytes.Equal(want, got) {
				t.Fatalf("%s chunk %v: remote (found %v, %v) differs from disk (found %v, %v)", name, idx, gf, gerr, wf, werr)
			}
			if !carry(idx, grid) {
				break
			}
		}
	}
}

// carry advances idx over grid in C order; false when done.
func carry(idx, grid []int) bool {
	for d := len(idx) - 1; d >= 0; d-- {
		if idx[d]++; idx[d] < grid[d] {
			return true
		}
		idx[d] = 0
	}
	return false
}

func mustSize(t *testing.T, p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// proxied points S3 at a fault proxy in front of versitygw.
func proxied(t *testing.T, cfg faultproxy.Config) *faultproxy.Proxy {
	s := serve(t)
	p, err := faultproxy.Start("127.0.0.1:0", s.s3.URL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	s3test.SetEnv(t, p.URL())
	return p
}

func TestRetriesThroughFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  faultproxy.Config
	}{
		{"503", faultproxy.Config{Every503: 2}},
		// Two resets in a row for every object: net/http retries the first itself, the store
		// the second.
		{"reset", faultproxy.Config{Decide: firstTwo(faultproxy.ResetBefore)}},
		{"reset mid-body", faultproxy.Config{EveryMidBody: 3}},
		{"all three", faultproxy.Config{Every503: 5, EveryReset: 7, EveryMidBody: 3, Delay: time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proxied(t, tc.cfg)
			for _, store := range []string{"v3.zarr", "v2-plain.zarr"} {
				st, err := objstore.OpenStore("s3://"+bucket+"/"+store, fastRetries)
				if err != nil {
					t.Fatal(err)
				}
				rh, err := zarr.Open(st)
				if err != nil {
					t.Fatalf("open %s through faults: %v", store, err)
				}
				lh, err := zarr.OpenPath(filepath.Join(srv.dir, store))
				if err != nil {
					t.Fatal(err)
				}
				for _, path := range []string{"sharded_end", "i2_blosc", "i2_blosc_lz4", "f4_zstd_nested", "str_vlen"} {
					la, err := lh.OpenArray(path)
					if err != nil {
						continue
					}
					ra, err := rh.OpenArray(path)
					if err != nil {
						t.Fatal(err)
					}
					sameArray(t, store, la, ra)
				}
				stats, _ := objstore.StatsOf(st)
				if stats.Retries == 0 {
					t.Fatalf("%s: no retries counted (%+v) though the proxy injected %d faults", store, stats, p.Stats().Faults)
				}
			}
			if p.Stats().Faults == 0 {
				t.Fatal("the proxy injected no faults")
			}
		})
	}
}

// firstTwo answers the first two requests of every URL path with a, then forwards.
func firstTwo(a faultproxy.Action) func(uint64, *http.Request) faultproxy.Action {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(_ uint64, r *http.Request) faultproxy.Action {
		mu.Lock()
		defer mu.Unlock()
		seen[r.URL.Path]++
		if seen[r.URL.Path] <= 2 {
			return a
		}
		return faultproxy.Forward
	}
}

func TestGivesUpNamingTheObject(t *testing.T) {
	p := proxied(t, faultproxy.Config{Decide: func(n uint64, r *http.Request) faultproxy.Action {
		if strings.Contains(r.URL.Path, "/i2_blosc/c/") {
			return faultproxy.Unavailable
		}
		return faultproxy.Forward
	}})
	st, err := objstore.OpenStore("s3://"+bucket+"/v3.zarr", fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	a, err := zarr.OpenArray(st, "i2_blosc")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.DecodeChunk([]int{0, 0}, nil)
	msg := fmtErr(err)
	for _, want := range []string{"s3://fixtures/v3.zarr/i2_blosc/c/0/0", "503", "gave up after 5 attempts"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not say %q", msg, want)
		}
	}
	if got := p.Stats().Faults; got != 5 {
		t.Fatalf("%d requests refused; want 5 (1 + 4 retries)", got)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestClearErrors(t *testing.T) {
	s := serve(t)
	check := func(what string, err error, target error, words ...string) {
		t.Helper()
		if err == nil || (target != nil && !errors.Is(err, target)) {
			t.Fatalf("%s: %v; want an error wrapping %v", what, err, target)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q does not name %q", what, err, w)
			}
		}
	}
	_, err := objstore.OpenPath("s3://no-such-bucket/v3.zarr")
	check("missing bucket", err, objstore.ErrNoBucket, `bucket "no-such-bucket" does not exist`, s.s3.URL[len("http://"):])

	_, err = objstore.OpenArrayPath("s3://" + bucket + "/v3.zarr/no_such_array")
	check("missing array", err, nil, "no_such_array", "s3://fixtures/v3.zarr")

	_, err = objstore.OpenArrayPath(s.http + "/v3-plain.zarr/no_such_array")
	check("missing array over HTTP", err, zarr.ErrNotFound, "no_such_array", s.http+"/v3-plain.zarr")

	_, err = objstore.OpenPath("s3://" + bucket + "/no-such.zarr")
	check("missing store", err, nil, "s3://fixtures/no-such.zarr")

	// A missing chunk reads as the fill value, as from disk.
	missing := filepath.Join(s.dir, "v3-plain.zarr", "fill_int")
	local, err := zarr.OpenArrayPath(missing)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := objstore.OpenArrayPath("s3://" + bucket + "/v3-plain.zarr/fill_int")
	if err != nil {
		t.Fatal(err)
	}
	sameArray(t, "v3-plain.zarr", local, remote)

	// An HTTP server that refuses: the error names the URL.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer refusing.Close()
	_, err = objstore.OpenPath(refusing.URL + "/v3.zarr")
	check("HTTP 403", err, objstore.ErrDenied, "GET "+refusing.URL+"/v3.zarr/zarr.json", "403")

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	_, err = objstore.OpenPath("s3://" + bucket + "/v3.zarr")
	check("wrong secret", err, objstore.ErrDenied, "s3://fixtures/v3.zarr/zarr.json", "AWS_ACCESS_KEY_ID "+s3test.AccessKey+" from the environment")

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	_, err = objstore.OpenPath("s3://" + bucket + "/v3.zarr")
	check("anonymous", err, objstore.ErrDenied, "anonymous")

	t.Setenv("AWS_ENDPOINT_URL", "127.0.0.1:9")
	_, err = objstore.OpenPath("s3://" + bucket + "/v3.zarr")
	check("bad endpoint", err, nil, "AWS_ENDPOINT_URL", "http://")
}

func TestProfileCredentials(t *testing.T) {
	serve(t)
	creds := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(creds, []byte("[bench]\naws_access_key_id = "+s3test.AccessKey+"\naws_secret_access_key = "+s3test.SecretKey+"\n"), 0o600)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "bench")
	if _, err := objstore.OpenPath("s3://" + bucket + "/v3.zarr"); err != nil {
		t.Fatalf("open with profile bench of %s: %v", creds, err)
	}
	t.Setenv("AWS_PROFILE", "other")
	_, err := objstore.OpenPath("s3://" + bucket + "/v3.zarr")
	if !errors.Is(err, objstore.ErrDenied) {
		t.Fatalf("profile other (absent): %v; want access denied (anonymous)", err)
	}
}
