package sampler

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestLocalityResidentSetRotates(t *testing.T) {
	extra := "sampling = \"locality\"\nsegment_steps = 24\nresident_segments = 2\nrotate_every_batches = 2"
	j, _ := newMemJob(t, smallMem, extra, Options{})
	if j.Mode() != SampleLocality {
		t.Fatalf("mode %s", j.Mode())
	}
	// 150 times in tiles of 24: 7 tiles; candidates 12..137 fall in tiles 0..5.
	if n := len(j.loc.segs); n != 6 {
		t.Fatalf("%d non-empty segments", n)
	}
	segsOf := func(g uint64) map[int]bool {
		s := map[int]bool{}
		for e := 0; e < j.size; e++ {
			_, ti, _, _ := j.Draw(g, e)
			s[ti/24] = true
		}
		return s
	}
	window := func(q uint64) map[int]bool { // the resident segments, as tile numbers
		s := map[int]bool{}
		for r := uint64(0); r < 2; r++ {
			s[j.loc.segs[j.loc.seq(q+r)]] = true
		}
		return s
	}
	counts := map[int]int{}
	const batches = 6 * 2 * 2 * 30 // 30 passes of the sequence
	for g := uint64(0); g < batches; g++ {
		got, res := segsOf(g), window(g/2)
		for s := range got {
			if !res[s] {
				t.Fatalf("batch %d drew from segment %d outside the resident set %v", g, s, res)
			}
			counts[s]++
		}
		if len(got) > 2 {
			t.Fatalf("batch %d mixes %d segments", g, len(got))
		}
	}
	// Every pass of the sequence visits every segment once.
	for p := uint64(0); p < 5; p++ {
		seen := map[int]bool{}
		for i := uint64(0); i < 6; i++ {
			seen[j.loc.seq(p*6+i)] = true
		}
		if len(seen) != 6 {
			t.Fatalf("pass %d visits %d segments", p, len(seen))
		}
	}
	// Coverage: each segment is drawn in a similar share of batches.
	for s := 0; s < 6; s++ {
		if c := counts[s]; c < batches*2/6*6/10 || c > batches*2/6*14/10 {
			t.Errorf("segment %d in %d of %d batches", s, c, batches)
		}
	}
}

func TestLocalityDeterministicAndSameExamples(t *testing.T) {
	extra := "sampling = \"locality\"\nsegment_steps = 24\nresident_segments = 3\nrotate_every_batches = 3"
	a, ds := newMemJob(t, smallMem, extra, Options{})
	b, _ := newMemJob(t, smallMem, extra, Options{})
	x := fillRange(t, a, 0, 30, 1)
	y := fillRange(t, b, 0, 30, 3)
	for i := range x {
		if !bytes.Equal(x[i], y[i]) {
			t.Fatalf("locality batch %d differs between 1 and 3 readers", i)
		}
	}
	// The examples are still exact (the draw changes, the example definition does not).
	buf := batchBuf(a)
	if err := a.Fill(ctx, 17, buf); err != nil {
		t.Fatal(err)
	}
	for e := 0; e < 4; e++ {
		_, ti, cy, cx := a.Draw(17, e)
		ws, _, _, _ := refExample(ds, ti, cy, cx)
		per := len(ws)
		sameFloats(t, "locality satellite", bytesAsFloat32(buf[0])[e*per:(e+1)*per], ws)
	}
	if st := a.Stats(); st.SegmentsPerBatch < 1 || st.SegmentsPerBatch > 3 || st.ResidentSegments != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAutoModeAndTooSmallCache(t *testing.T) {
	j, _ := newMemJob(t, smallMem, "", Options{})
	if j.Mode() != SampleRandom {
		t.Fatalf("64 MB cache for %d bytes: mode %s", j.DataBytes(), j.Mode())
	}
	cfg, err := parseCfg(t, memConfigFmt("sampling = \"locality\"\nsegment_steps = 240"))
	if err != nil {
		t.Fatal(err)
	}
	// 16 MiB is the smallest cache_mb; make one segment (240 steps, 64 x 64 pixels of int16,
	// held as such) too big.
	ds := newMemNowcast(memParams{T: 600, P: 64, S: 23, satChunkT: 12, satChunkP: 32})
	_, err = NewJob(cfg, Options{Open: memOpen(ds), CacheMB: 16})
	if err == nil || !strings.Contains(err.Error(), "too small for locality sampling") ||
		!strings.Contains(err.Error(), "cache_mb (cache_mb=, --cache-mb, the anchor source's cache_mb) >= ") ||
		!strings.Contains(err.Error(), "a smaller segment_steps (segment_steps=, --segment-steps, ") {
		t.Fatalf("tiny cache: %v; want the limit and both settings named for every interface", err)
	}
	t.Log(err)

	// The same with sampling = "auto": random draws with evictions, the same batches as random
	// sampling with a cache that holds everything, and the reason in Why, with numbers.
	cfg, err = parseCfg(t, memConfigFmt("segment_steps = 240"))
	if err != nil {
		t.Fatal(err)
	}
	j, err = NewJob(cfg, Options{Open: memOpen(ds), CacheMB: 4})
	if err != nil {
		t.Fatalf("auto with a tiny cache: %v", err)
	}
	defer j.Close()
	why := j.Why()
	t.Log(why)
	if j.Mode() != SampleRandom || !strings.Contains(why, "auto chose random with evictions: cache_mb 4 holds 20% of the 20 MB") ||
		!regexp.MustCompile(`cache_mb >= \d+ would allow locality sampling, >= \d+ would hold everything`).MatchString(why) {
		t.Fatalf("mode %s, why %q", j.Mode(), why)
	}
	if st := j.Stats(); st.Why != why {
		t.Fatalf("Stats().Why %q", st.Why)
	}
	big, err := NewJob(cfg, Options{Open: memOpen(ds), CacheMB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if big.Mode() != SampleRandom || !strings.Contains(big.Why(), "auto chose random: the") {
		t.Fatalf("1 GB cache: mode %s, why %q", big.Mode(), big.Why())
	}
	a, b := fillRange(t, j, 0, 20, 2), fillRange(t, big, 0, 20, 2)
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			t.Fatalf("batch %d differs from random sampling with the data in the cache", k)
		}
	}
	if st := j.Cache().Stats(); st.Evictions == 0 {
		t.Fatal("no evictions: the cache was not tiny")
	}
}

func TestLocalityChoosesSegmentLength(t *testing.T) {
	// A 64 x 64 anchor in chunks of 12 steps x 32 x 32 and a 16 MiB budget: the automatic
	// segment length must fit the budget and keep the most t0 candidates resident.
	p := memParams{T: 1200, P: 64, S: 23, satChunkT: 12, satChunkP: 32}
	cfg, err := parseCfg(t, memConfigFmt("sampling = \"locality\""))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(p)), CacheMB: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l := j.loc
	if l.steps%12 != 0 || l.resident < 1 || int64(l.resident+1)*l.segBytes > j.cache.Budget() {
		t.Fatalf("segment of %d steps (%d bytes) x %d resident in a %d-byte cache", l.steps, l.segBytes, l.resident, j.cache.Budget())
	}
	// No other length keeps more candidates resident.
	for m := 1; m <= 8; m++ {
		c := segmentsOf(j, cfg.Sources[0].Spec.(*Spec), 12*m)
		r := int(j.cache.Budget()*9/10/c.segBytes) - 1
		if r*c.steps > l.resident*l.steps {
			t.Errorf("length %d keeps %d resident, the chosen %d keeps %d", c.steps, r*c.steps, l.steps, l.resident*l.steps)
		}
	}
	t.Logf("segments of %d steps, %d resident, %.1f MiB each", l.steps, l.resident, float64(l.segBytes)/(1<<20))
	buf := batchBuf(j)
	for b := uint64(0); b < 30; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
	}
	if st := j.Cache().Stats(); st.PeakBytes > j.cache.Budget()+8*j.anchor.c.chunkBytes() {
		t.Errorf("peak %d bytes for a budget of %d", st.PeakBytes, j.cache.Budget())
	}
}
