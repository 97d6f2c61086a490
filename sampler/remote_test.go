package sampler

import (
	"bytes"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/internal/faultproxy"
	"github.com/gobatch/gobatch/internal/s3test"
	"github.com/gobatch/gobatch/readers/zarr"
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

	// The default: each source's window adapts below DefaultRemoteDepth, through the same
	// delay and 503s; the batches are the same.
	auto, err := NewJob(loadPreset(t, nil), Options{DataRoot: "s3://nowcast"})
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	got = fillRange(t, auto, 0, 4, 2)
	for b := range want {
		if !bytes.Equal(got[b], want[b]) {
			t.Fatalf("batch %d through S3 with the adaptive window differs from the batch from disk", b)
		}
	}
	for _, s := range auto.srcs {
		// The bound: DefaultRemoteDepth, or what fetch_buffer_mb holds of large chunks.
		if c := s.data(); c.window == nil || c.window.Bound() != c.depth || c.depth <= depth || c.depth > DefaultRemoteDepth {
			t.Fatalf("%s: no adaptive window below %d (depth %d)", s.spec().Field, DefaultRemoteDepth, c.depth)
		}
	}
	if st2 := p.Stats(); st2.Faults == st.Faults || st2.MaxInFlight > int64(DefaultRemoteDepth*len(auto.srcs)) {
		t.Fatalf("adaptive: %d 503s injected, at most %d in flight (bound %d x %d sources)", st2.Faults-st.Faults, st2.MaxInFlight, DefaultRemoteDepth, len(auto.srcs))
	}
}

// TestRemoteOpenAtOnce: a job over stores in object storage opens them all at once and reads
// their coordinates together (coordwarm.go), through a proxy adding 40 ms per request and a 503
// now and then: many requests were in flight during the open, each metadata document and
// coordinate chunk was fetched once (no source read one again), and the batches equal disk.
func TestRemoteOpenAtOnce(t *testing.T) {
	dir := nowcastData(t, "0.25", 64)
	srv := s3test.Serve(t, map[string]string{"nowcast": dir})
	p, err := faultproxy.Start("127.0.0.1:0", srv.URL, faultproxy.Config{Delay: 40 * time.Millisecond, Every503: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s3test.SetEnv(t, p.URL())
	remote, err := NewJob(loadPreset(t, nil), Options{DataRoot: "s3://nowcast"})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	st := p.Stats()
	// What opening reads: each store's zarr.json (absent: these are v2 stores) and
	// .zmetadata, and every chunk of its one-dimensional arrays.
	want := uint64(0)
	for _, name := range []string{"satellite.zarr", "nwp.zarr", "pv.zarr"} {
		h, err := zarr.OpenPath(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want += 2
		for _, path := range h.Arrays() {
			if a, err := h.OpenArray(path); err == nil && a.NDim() == 1 {
				want += uint64((a.Shape[0] + a.Chunks[0] - 1) / a.Chunks[0])
			}
		}
	}
	if st.Forwarded != want || st.Faults == 0 {
		t.Fatalf("opening fetched %d objects (%d 503s injected); want each of the %d metadata documents and coordinate chunks once, some after a 503",
			st.Forwarded, st.Faults, want)
	}
	if st.MaxInFlight < 6 {
		t.Fatalf("at most %d requests in flight while opening; want the stores and their coordinates read together", st.MaxInFlight)
	}
	local, err := NewJob(loadPreset(t, nil), Options{DataRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	want2, got := fillRange(t, local, 0, 2, 2), fillRange(t, remote, 0, 2, 2)
	for b := range want2 {
		if !bytes.Equal(got[b], want2[b]) {
			t.Fatalf("batch %d through S3 differs from the batch from disk", b)
		}
	}
}

// TestFetchDepth: fetch_depth as given, else DefaultRemoteDepth for a remote store and one
// read per core for a local one; fetch_buffer_mb caps it for large chunks.
func TestFetchDepth(t *testing.T) {
	if isRemote(&zarrDataset{store: mustStore(t, t.TempDir())}) {
		t.Fatal("a directory store counts as remote")
	}
	for _, tc := range []struct {
		depth    int
		bufferMB int64
		remote   bool
		perRead  int64
		want     int
	}{
		{0, 256, false, 2 << 20, runtime.GOMAXPROCS(0)},
		{0, 256, true, 2 << 20, DefaultRemoteDepth},
		{10, 256, true, 2 << 20, 10},
		{32, 256, true, 64 << 20, 4}, // 4 reads of a 32 MB chunk, stored and decoded: 256 MB
		{0, 1, true, 64 << 20, 1},
	} {
		sp := &Spec{FetchDepth: tc.depth, FetchBufferMB: tc.bufferMB}
		if got := fetchDepth(sp, tc.remote, tc.perRead); got != tc.want {
			t.Errorf("fetch_depth %d, fetch_buffer_mb %d, remote %v, %d bytes a read: %d reads in flight, want %d",
				tc.depth, tc.bufferMB, tc.remote, tc.perRead, got, tc.want)
		}
	}
}

// TestFetchAhead: a Fill starts the prefetch of the batch fetch_ahead_batches further in the
// rank's stream, whose own Fill then finds every chunk cached; off (the local default), it
// decodes them itself. Batches are the same either way.
func TestFetchAhead(t *testing.T) {
	stream := Stream{Rank: 1, WorldSize: 2}
	ref, _ := newMemJob(t, smallMem, "", Options{Stream: stream})
	if ref.ahead.batches != 0 {
		t.Fatalf("fetching ahead is on (%d batches) for local stores", ref.ahead.batches)
	}
	want := fillStream(t, ref, stream, 0, 1, 1) // stream batch 0: global 1
	misses := ref.Cache().Stats().Misses
	if _, err := fillOne(ref, stream.Global(3)); err != nil {
		t.Fatal(err)
	}
	if ref.Cache().Stats().Misses == misses {
		t.Skip("batch 3 needs no chunk batch 0 did not: nothing to fetch ahead in this data")
	}

	j, _ := newMemJob(t, smallMem, "", Options{Stream: stream})
	j.ahead = newAheadFetcher(3, stream)
	got := fillStream(t, j, stream, 0, 1, 1)
	if !bytes.Equal(got[0], want[0]) {
		t.Fatal("batch 0 differs when fetching ahead")
	}
	j.waitAhead()       // the prefetch of stream batch 3 (global 7)
	j.ahead.batches = 0 // and none from the next Fill, whose misses would count below
	before := j.Cache().Stats().Misses
	buf, err := fillOne(j, stream.Global(3))
	if err != nil {
		t.Fatal(err)
	}
	if m := j.Cache().Stats().Misses - before; m != 0 {
		t.Fatalf("stream batch 3 decoded %d chunks itself; fetching ahead should have loaded them", m)
	}
	wantBuf, _ := fillOne(ref, stream.Global(3))
	if !bytes.Equal(bytes.Join(buf, nil), bytes.Join(wantBuf, nil)) {
		t.Fatal("stream batch 3 differs when fetched ahead")
	}
}

func fillOne(j *Job, g uint64) ([][]byte, error) {
	buf := batchBuf(j)
	return buf, j.Fill(ctx, g, buf)
}
