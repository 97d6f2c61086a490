package sampler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// holeyArray is a satellite array whose store lacks the chunks missing says, and whose reads
// block until release is closed when block is set (a hung mount).
type holeyArray struct {
	*memArray
	missing func(idx []int) bool
	block   chan struct{}  // nil: reads return at once
	delay   time.Duration  // each read takes this long (a slow disk)
	served  atomic.Uint64  // chunks read as the fill value
	reads   atomic.Uint64  // reads begun
	onRead  func(n uint64) // called as read n (from 1) begins
}

func (h *holeyArray) DecodeChunkFound(idx []int, dst []byte) (bool, error) {
	if n := h.reads.Add(1); h.onRead != nil {
		h.onRead(n)
	}
	if h.block != nil {
		<-h.block
	}
	time.Sleep(h.delay)
	if h.missing != nil && h.missing(idx) {
		for i := 0; i+1 < len(dst); i += 2 { // int16 fill -1
			dst[i], dst[i+1] = 0xff, 0xff
		}
		h.served.Add(1)
		return false, nil
	}
	return true, h.memArray.decode(idx, dst)
}

func (h *holeyArray) MissingChunkError(idx []int) error { return h.ChunkError(idx, nil) }

func (h *holeyArray) ChunkError(idx []int, err error) error {
	if err == nil {
		err = errors.New("chunk not stored")
	}
	return fmt.Errorf("store satellite.zarr: key data/%d.%d.%d.%d: %w", idx[0], idx[1], idx[2], idx[3], err)
}

// holeyDS serves the satellite's data array as h (a holeyArray, or another wrapper).
type holeyDS struct {
	*memDataset
	h Array
}

func (d *holeyDS) Array(n string) (Array, error) {
	if n == "data" {
		return d.h, nil
	}
	return d.memDataset.Array(n)
}

func newHoleyJob(t *testing.T, extra string, h func(*holeyArray)) (*Job, *holeyArray, error) {
	t.Helper()
	cfg, err := parseCfg(t, fmt.Sprintf(memConfig, extra))
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	ha := &holeyArray{memArray: ds["satellite.zarr"].arrays["data"]}
	h(ha)
	open := memOpen(ds)
	j, err := NewJob(cfg, Options{Open: func(p string) (Dataset, error) {
		if filepath.Base(p) == "satellite.zarr" {
			return &holeyDS{memDataset: ds["satellite.zarr"], h: ha}, nil
		}
		return open(p)
	}})
	if err == nil {
		t.Cleanup(j.Close)
	}
	return j, ha, err
}

// TestMissingChunksCounted: the chunks read as the fill value are counted per source, among
// the chunks decoded; sources whose arrays cannot tell count none missing.
func TestMissingChunksCounted(t *testing.T) {
	j, h, err := newHoleyJob(t, "", func(h *holeyArray) { h.missing = func(idx []int) bool { return idx[0]%2 == 1 } })
	if err != nil {
		t.Fatal(err)
	}
	buf := batchBuf(j)
	for b := uint64(0); b < 6; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
	}
	st := j.Stats()
	if st.ChunksMissing[0] == 0 || st.ChunksMissing[0] != h.served.Load() {
		t.Fatalf("satellite: %d missing counted, %d read as the fill value", st.ChunksMissing[0], h.served.Load())
	}
	if st.ChunksDecoded[0] != st.Cache.Misses-st.ChunksDecoded[1]-st.ChunksDecoded[2] || st.ChunksDecoded[0] <= st.ChunksMissing[0] {
		t.Fatalf("decoded %v (cache misses %d), missing %d", st.ChunksDecoded[:3], st.Cache.Misses, st.ChunksMissing[0])
	}
	if st.ChunksDecoded[1] == 0 || st.ChunksMissing[1] != 0 || st.ChunksMissing[2] != 0 {
		t.Fatalf("nwp and pv: decoded %v missing %v; want decoded chunks and none missing", st.ChunksDecoded[1:3], st.ChunksMissing[1:3])
	}
}

// TestMissingChunksError: with missing_chunks = "error" a chunk that is not stored fails the
// fill, naming the source, the store and the chunk key; stored chunks still read.
func TestMissingChunksError(t *testing.T) {
	j, _, err := newHoleyJob(t, `missing_chunks = "error"`, func(h *holeyArray) { h.missing = func([]int) bool { return true } })
	if err != nil {
		t.Fatal(err)
	}
	err = j.Fill(ctx, 0, batchBuf(j))
	if err == nil {
		t.Fatal("a batch from a store with no chunk filled without error")
	}
	for _, want := range []string{"source[0] (satellite.zarr/data)", "store satellite.zarr", "key data/", `missing_chunks = "error"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if _, err := parseCfg(t, fmt.Sprintf(memConfig, `missing_chunks = "skip"`)); err == nil ||
		!strings.Contains(err.Error(), `source[0].missing_chunks: unknown policy "skip"`) {
		t.Errorf("missing_chunks = \"skip\": %v", err)
	}
}

// TestChunkDeadline: a read that never returns (a hung mount) fails the fill after
// chunk_deadline_s with an error naming the chunk; the blocked read is abandoned, not waited for.
func TestChunkDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	j, _, err := newHoleyJob(t, "chunk_deadline_s = 0.2", func(h *holeyArray) { h.block = release })
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = j.Fill(ctx, 0, batchBuf(j)) // the read never returns: only the deadline ends the fill
	if !errors.Is(err, ErrChunkDeadline) || !strings.Contains(err.Error(), "key data/") || !strings.Contains(err.Error(), "source[0]") {
		t.Fatalf("fill with a hung read: %v; want ErrChunkDeadline naming the source and the chunk", err)
	}
	t.Logf("hung read reported after %v (the deadline, 200 ms, twice: the prefetch's, then the gather's)", time.Since(start))
	if _, err := parseCfg(t, fmt.Sprintf(memConfig, "chunk_deadline_s = -1")); err == nil || !strings.Contains(err.Error(), "source[0].chunk_deadline_s") {
		t.Errorf("chunk_deadline_s = -1: %v", err)
	}
}

// TestCoverage: a source whose grid lies away from every anchor centre is refused naming both
// extents; one that reaches some of them is accepted.
func TestCoverage(t *testing.T) {
	// The NWP grid (10 columns 8 km apart from x = 200 km, crops of 4) against the anchor's
	// centres (x 208 .. 270 km): shifted by 40 km it misses the outermost centres (their crops
	// clamp at its border, as where a regional NWP meets a wider satellite view); by 90 km
	// east (80 km west) the nearest centre is still within reach of a crop (half a crop and
	// one pixel, 24 km); by 100 km east, 90 km west or 10,000 km it misses them all.
	for _, c := range []struct {
		shift float64
		ok    bool
	}{{0, true}, {40000, true}, {-40000, true}, {90000, true}, {-80000, true}, {100000, false}, {-90000, false}, {1e7, false}} {
		cfg, err := parseCfg(t, fmt.Sprintf(memConfig, ""))
		if err != nil {
			t.Fatal(err)
		}
		ds := newMemNowcast(smallMem)
		for i := range ds["nwp.zarr"].arrays["x"].raw {
			ds["nwp.zarr"].arrays["x"].raw[i] += c.shift
		}
		j, err := NewJob(cfg, Options{Open: memOpen(ds)})
		if c.ok {
			if err != nil {
				t.Errorf("shift %g: %v", c.shift, err)
			} else {
				j.Close()
			}
			continue
		}
		if err == nil {
			j.Close()
			t.Errorf("shift %g: accepted", c.shift)
			continue
		}
		lo := fmt.Sprintf("%.6g", 200000+c.shift)
		for _, want := range []string{"source[1].store", "the grid of nwp (x " + lo + " .. ", "does not cover the anchor's centres (x 208000 .. 270000"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("shift %g: %v: does not say %q", c.shift, err, want)
			}
		}
	}
}

// TestFillStopsOnCancel: a fill whose context ends while it reads a batch's chunks (some 30,
// from a slow store) stops reading: the prefetch takes no more chunks and the gather stops
// between examples, so only the reads already begun and those of the example being gathered
// follow the cancellation, and the fill returns its error. (The context ends when the
// watchdog sees the consumer gone.) The cancellation comes at an exact read, not a time.
func TestFillStopsOnCancel(t *testing.T) {
	// The reads of the whole batch, uncancelled.
	j, h, err := newHoleyJob(t, "", func(*holeyArray) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Fill(context.Background(), 0, batchBuf(j)); err != nil {
		t.Fatal(err)
	}
	all := h.reads.Load()
	const trials = 10
	worst := uint64(0)
	for trial := 0; trial < trials; trial++ {
		cctx, cancel := context.WithCancel(context.Background())
		at := 1 + uint64(trial)*(all-1)/(2*trials) // within the batch's first half
		var after atomic.Uint64                    // reads begun after the cancellation
		j, _, err := newHoleyJob(t, "", func(h *holeyArray) {
			h.delay = time.Millisecond
			h.onRead = func(n uint64) {
				if n == at {
					cancel()
				} else if n > at {
					after.Add(1)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- j.Fill(cctx, 0, batchBuf(j)) }()
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a hang detector: the fill takes milliseconds
			t.Fatal("the fill did not stop after the cancellation")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("trial %d: %v; want the cancellation", trial, err)
		}
		// Reads already handed to the prefetch's workers may still begin; nothing more.
		if n := after.Load(); n > uint64(j.prefetchWorkers()) {
			t.Errorf("trial %d: cancelled at read %d of %d; %d more reads began after it, want at most %d (the prefetch's workers)",
				trial, at, all, n, j.prefetchWorkers())
		}
		worst = max(worst, after.Load())
	}
	t.Logf("a batch of %d reads: at most %d began after a cancellation", all, worst)
}

// BenchmarkChunkDeadline: a chunk load with and without a deadline (the deadline's goroutine
// and timer, against the decode of a 12 x 4 x 16 x 16 int16 chunk).
func BenchmarkChunkDeadline(b *testing.B) {
	cfg, err := parseCfg(b, fmt.Sprintf(memConfig, ""))
	if err != nil {
		b.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	c := j.srcs[0].data()
	dst := make([]byte, c.chunkBytes())
	for _, d := range []time.Duration{0, time.Minute} {
		b.Run(fmt.Sprint("deadline=", d), func(b *testing.B) {
			c.deadline = d
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.loadChunk(c.key(i%4), dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
