package sampler

import (
	"sort"
	"testing"
	"time"
)

// BenchmarkFillChannelLast fills the same in-memory data stored in canonical order (time,
// channel, y, x) and channel last (time, y, x, channel), side by side in one run: alternate
// batches of each, so that both see the same machine. The cache holds canonical chunks either
// way, so the warm Fill (ratio, the channel-last batches/s over the canonical) should be 1 up to
// noise; cold-ratio compares the first pass, where every chunk is decoded (and transposed).
//
//	go test -run - -bench ChannelLast ./sampler
func BenchmarkFillChannelLast(b *testing.B) {
	p := memParams{T: 150, P: 64, S: 40, satChunkT: 12, satChunkP: 32}
	canon := newMemNowcast(p)
	last := newMemNowcast(p)
	last["satellite.zarr"].arrays["data"] = permuted(last["satellite.zarr"].arrays["data"], []int{0, 2, 3, 1}, []string{"time", "y", "x", "channel"})
	open := func(ds map[string]*memDataset) *Job {
		cfg, err := parseCfg(b, memConfigFmt(""))
		if err != nil {
			b.Fatal(err)
		}
		j, err := NewJob(cfg, Options{Open: memOpen(ds)})
		if err != nil {
			b.Fatal(err)
		}
		return j
	}
	jobs := [2]*Job{open(canon), open(last)}
	defer jobs[0].Close()
	defer jobs[1].Close()
	bufs := [2][][]byte{batchBuf(jobs[0]), batchBuf(jobs[1])}
	var cold [2]time.Duration
	for i, j := range jobs { // warm: until a pass decodes nothing new
		t := time.Now()
		for pass := 0; pass < 20; pass++ {
			before := j.Cache().Stats().Misses
			for g := uint64(0); g < 200; g++ {
				if err := j.Fill(ctx, uint64(pass)*200+g, bufs[i]); err != nil {
					b.Fatal(err)
				}
			}
			if j.Cache().Stats().Misses == before {
				break
			}
		}
		cold[i] = time.Since(t)
	}
	// Per-batch times, alternating which layout goes first; medians resist the noise of a
	// shared machine better than sums.
	var warm [2][]time.Duration
	misses := [2]uint64{jobs[0].Cache().Stats().Misses, jobs[1].Cache().Stats().Misses}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		g := uint64(1<<20 + n)
		for k := 0; k < 2; k++ {
			i := (n + k) % 2
			t := time.Now()
			if err := jobs[i].Fill(ctx, g, bufs[i]); err != nil {
				b.Fatal(err)
			}
			warm[i] = append(warm[i], time.Since(t))
		}
	}
	b.StopTimer()
	for i, j := range jobs {
		if m := j.Cache().Stats().Misses - misses[i]; m > 0 {
			b.Fatalf("layout %d: %d cache misses after the warm-up", i, m)
		}
	}
	med := [2]float64{median(warm[0]), median(warm[1])}
	b.ReportMetric(1/med[0], "canonical-batches/s")
	b.ReportMetric(1/med[1], "channel-last-batches/s")
	b.ReportMetric(med[0]/med[1], "ratio")
	b.ReportMetric(cold[0].Seconds()/cold[1].Seconds(), "cold-ratio")
}

// median is the median of ds in seconds.
func median(ds []time.Duration) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[len(s)/2].Seconds()
}

// BenchmarkTransposeChunk is the transposition of one channel-last satellite chunk of
// nowcast-ref's size (12 times, 128 x 128 pixels, 12 channels) into canonical order, which a
// cache miss on such a store adds to the decode.
func BenchmarkTransposeChunk(b *testing.B) {
	arr := &memArray{shape: []int{12, 128, 128, 12}, chunks: []int{12, 128, 128, 12}, kind: 'f', size: 4}
	m := &dimMap{perm: []int{0, 3, 1, 2}, axes: make([]string, 4), names: make([]string, 4)}
	c, err := newChunked(0, "bench", arr, m)
	if err != nil {
		b.Fatal(err)
	}
	src := make([]float32, c.elems)
	dst := make([]float32, c.elems)
	b.SetBytes(int64(c.elems) * 4)
	for i := 0; i < b.N; i++ {
		transposeChunk(dst, src, c.chunks, c.tstride)
	}
}
