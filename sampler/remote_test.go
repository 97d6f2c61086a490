package sampler

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/internal/faultproxy"
	"github.com/gobatch/gobatch/internal/s3test"
)

// TestRemoteStoresEqualDisk fills batches of the preset from the nowcast-ref stores served by
// a real S3 server behind a proxy adding 5 ms per request: they equal the batches from disk
// byte for byte, and the prefetch kept more reads in flight than there are cores, never more
// than the sources' fetch_depth allows.
func TestRemoteStoresEqualDisk(t *testing.T) {
	dir := nowcastData(t, "0.25", 64)
	srv := s3test.Serve(t, map[string]string{"nowcast": dir})
	p, err := faultproxy.Start("127.0.0.1:0", srv.URL, faultproxy.Config{Delay: 5 * time.Millisecond, Every503: 17})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s3test.SetEnv(t, p.URL())
	const depth = 6
	withDepth := func(cfg *config.Config) {
		for _, s := range cfg.Sources {
			s.Spec.(*Spec).FetchDepth = depth
		}
	}
	local, err := NewJob(loadPreset(t, nil), Options{DataRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	remote, err := NewJob(loadPreset(t, withDepth), Options{DataRoot: "s3://nowcast"})
	if err != nil {
		t.Fatalf("open the preset over s3://nowcast: %v", err)
	}
	defer remote.Close()
	want := fillRange(t, local, 0, 4, 2)
	got := fillRange(t, remote, 0, 4, 2)
	for b := range want {
		if !bytes.Equal(got[b], want[b]) {
			t.Fatalf("batch %d through S3 differs from the batch from disk", b)
		}
	}
	st := p.Stats()
	if st.Faults == 0 {
		t.Fatal("no 503 injected")
	}
	if st.MaxInFlight <= int64(runtime.GOMAXPROCS(0)) || st.MaxInFlight > int64(depth*len(remote.srcs)) {
		t.Fatalf("%d requests in flight at most; want more than GOMAXPROCS (%d), at most fetch_depth %d x %d sources",
			st.MaxInFlight, runtime.GOMAXPROCS(0), depth, len(remote.srcs))
	}
	t.Logf("%d requests (%d bytes), at most %d in flight", st.Requests, st.Bytes, st.MaxInFlight)
}

// TestFetchDepth: fetch_depth as given, else objstore's default for a remote store and one
// read per core for a local one; fetch_buffer_mb caps it for large chunks.
func TestFetchDepth(t *testing.T) {
	local, remote := &zarrDataset{store: mustStore(t, t.TempDir())}, remoteStub{}
	for _, tc := range []struct {
		depth    int
		bufferMB int64
		ds       Dataset
		chunk    int64
		want     int
	}{
		{0, 256, local, 1 << 20, runtime.GOMAXPROCS(0)},
		{0, 256, remote, 1 << 20, 32},
		{10, 256, remote, 1 << 20, 10},
		{0, 256, remote, 32 << 20, 4}, // 4 reads of a 32 MB chunk, compressed and decoded: 256 MB
		{0, 1, remote, 32 << 20, 1},
	} {
		sp := &Spec{FetchDepth: tc.depth, FetchBufferMB: tc.bufferMB}
		if got := fetchDepth(sp, tc.ds, tc.chunk); got != tc.want {
			t.Errorf("fetch_depth %d, fetch_buffer_mb %d, %T, %d-byte chunks: %d reads in flight, want %d",
				tc.depth, tc.bufferMB, tc.ds, tc.chunk, got, tc.want)
		}
	}
}

type remoteStub struct{ Dataset }

func (remoteStub) remote() bool { return true }
