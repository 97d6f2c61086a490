package sampler

import (
	"strings"
	"testing"
)

// concurrentJob is the site-anchored memory job with [batch] concurrent = true (no batch size:
// the locations are the batch), order stream or epochs.
func concurrentJob(t *testing.T, order string) (*Job, map[string]*memDataset) {
	t.Helper()
	text := strings.Replace(memConfigFmt(`locations = "pv"`), "size = 4\n", "concurrent = true\norder = \""+order+"\"\n", 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j, ds
}

// Concurrent batches: every batch is one t0 with every location in order, each row the
// example of that (t0, location) by the independent reference; with epochs every t0
// candidate once per epoch.
func TestConcurrentBatches(t *testing.T) {
	for _, order := range []string{"stream", "epochs"} {
		j, ds := concurrentJob(t, order)
		L := j.Locations()
		if j.size != L || j.Tensors()[0].Shape[0] != L || L < 3 {
			t.Fatalf("%s: batch of %d (%v) for %d locations", order, j.size, j.Tensors()[0].Shape, L)
		}
		buf := batchBuf(j)
		times := ds["satellite.zarr"].arrays["time"].ints
		t0s := map[int64]int{}
		batches := uint64(12)
		if order == "epochs" {
			batches = j.Stats().EpochBatches
			if batches != uint64(j.Candidates()) || j.Stats().Samples != batches*uint64(L) {
				t.Fatalf("epochs: %d batches, %d samples; want one per t0 candidate (%d), times %d locations", batches, j.Stats().Samples, j.Candidates(), L)
			}
		}
		for b := uint64(0); b < batches; b++ {
			if err := j.Fill(ctx, b, buf); err != nil {
				t.Fatal(err)
			}
			sats, nwps, pvs := bytesAsFloat32(buf[0]), bytesAsFloat32(buf[1]), bytesAsFloat32(buf[2])
			bt0, lids := bytesAsInt64(buf[3]), bytesAsInt64(buf[7])
			for e := 0; e < L; e++ {
				t0, ti, cy, cx := j.Draw(b, e)
				id, lcy, lcx := j.Location(e)
				if lids[e] != id || cy != lcy || cx != lcx || bt0[e] != bt0[0] || times[ti] != t0 || t0 != bt0[e] {
					t.Fatalf("%s batch %d row %d: location %d at (%d, %d), t0 %d; want location %d (row %d) at (%d, %d), the batch's t0 %d",
						order, b, e, lids[e], cy, cx, bt0[e], id, e, lcy, lcx, bt0[0])
				}
				ws, wn, wp, _ := refExample(ds, ti, cy, cx)
				sameFloats(t, "satellite", sats[e*len(ws):(e+1)*len(ws)], ws)
				sameFloats(t, "nwp", nwps[e*len(wn):(e+1)*len(wn)], wn)
				sameFloats(t, "pv", pvs[e*len(wp):(e+1)*len(wp)], wp)
			}
			t0s[bt0[0]]++
		}
		if order == "epochs" {
			for t0, n := range t0s {
				if n != 1 {
					t.Fatalf("epochs: t0 %d in %d batches of one epoch", t0, n)
				}
			}
			if len(t0s) != j.Candidates() {
				t.Fatalf("epochs: %d t0s in an epoch, want %d", len(t0s), j.Candidates())
			}
		}
	}
}

// A batch size other than the locations' number, or concurrent batches without locations, are
// refused naming the key.
func TestConcurrentRefusals(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"size = 4\n", "size = 4\nconcurrent = true\n", "batch.size: 4 with concurrent batches of"},
		{"locations = \"pv\"", "", "batch.concurrent: true, but the examples are not centred on locations"},
	} {
		text := strings.Replace(memConfigFmt(`locations = "pv"`), c.from, c.to, 1)
		if !strings.Contains(text, "concurrent") {
			text = strings.Replace(text, "size = 4\n", "concurrent = true\n", 1)
		}
		cfg, err := parseCfg(t, text)
		if err == nil {
			var j *Job
			if j, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))}); err == nil {
				j.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.to, err, c.want)
		}
	}
}

// TestConcurrentEpochsBlockShuffle: with the data larger than the cache, concurrent epochs walk
// the t0s in the block shuffle's time segments: every t0 candidate once per epoch, each
// batch's rows the reference's examples, and far fewer chunks decoded than the permutation of
// the t0s (sampling = "random") over the same cache.
func TestConcurrentEpochsBlockShuffle(t *testing.T) {
	t.Parallel() // whole epochs, long under -race
	job := func(extra string) (*Job, map[string]*memDataset) {
		text := strings.Replace(epochsConfig(`locations = "pv"`+extra), "size = 4\n", "concurrent = true\n", 1)
		cfg, err := parseCfg(t, text)
		if err != nil {
			t.Fatal(err)
		}
		ds := newMemNowcast(bigSites)
		j, err := NewJob(cfg, Options{Open: memOpen(ds), CacheMB: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(j.Close)
		return j, ds
	}
	j, ds := job("")
	if j.epochs.blocks == nil || !strings.Contains(j.Why(), "block shuffle") {
		t.Fatalf("no block shuffle: %s", j.Why())
	}
	times := ds["satellite.zarr"].arrays["time"].ints
	buf := batchBuf(j)
	B := j.Stats().EpochBatches
	if B != uint64(j.Candidates()) {
		t.Fatalf("%d batches an epoch for %d t0 candidates", B, j.Candidates())
	}
	seen := map[int64]bool{}
	for b := range B {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		t0 := bytesAsInt64(buf[3])[0]
		if seen[t0] {
			t.Fatalf("t0 %d twice in an epoch", t0)
		}
		seen[t0] = true
		if b%97 == 0 { // the rows of some batches against the reference
			sats := bytesAsFloat32(buf[0])
			for e := 0; e < j.Locations(); e++ {
				bt0, ti, cy, cx := j.Draw(b, e)
				ws, _, _, _ := refExample(ds, ti, cy, cx)
				if times[ti] != bt0 || bt0 != t0 {
					t.Fatalf("batch %d row %d: t0 %d, want the batch's %d", b, e, bt0, t0)
				}
				sameFloats(t, "satellite", sats[e*len(ws):(e+1)*len(ws)], ws)
			}
		}
	}
	r, _ := job("\nsampling = \"random\"")
	if r.epochs.blocks != nil {
		t.Fatal("sampling = random: a block shuffle")
	}
	rbuf := batchBuf(r)
	for b := range B {
		if err := r.Fill(ctx, b, rbuf); err != nil {
			t.Fatal(err)
		}
	}
	blockDec, randDec := j.Stats().ChunksDecoded[0], r.Stats().ChunksDecoded[0]
	t.Logf("satellite chunks decoded in an epoch: %d in the block shuffle, %d at random; %s", blockDec, randDec, j.Why())
	if blockDec*3 > randDec {
		t.Errorf("the block shuffle decoded %d satellite chunks, the permutation %d: want a third or less", blockDec, randDec)
	}
}
