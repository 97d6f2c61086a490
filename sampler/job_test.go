package sampler

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
)

// refExample recomputes one example from the whole in-memory arrays, following docs/WORKLOAD.md's
// steps with direct index arithmetic (no chunks, no cache). Sizes are those of memConfig.
func refExample(ds map[string]*memDataset, ti, cy, cx int) (sat, nwp, pv []float32, ids []int64) {
	s := ds["satellite.zarr"].arrays
	data := s["data"]
	T, C, P := data.shape[0], data.shape[1], data.shape[2]
	_ = T
	for k := 0; k < 19; k++ {
		t := ti - 6 + k
		for c := 0; c < C; c++ {
			for y := cy - 4; y < cy+4; y++ {
				for x := cx - 4; x < cx+4; x++ {
					raw := data.raw[((t*C+c)*P+y)*P+x]
					v := float32(math.NaN())
					if raw != -1 {
						v = float32(raw * 0.001)
					}
					sat = append(sat, v)
				}
			}
		}
	}
	t0 := s["time"].ints[ti]
	sy, sx := s["y"].raw[cy], s["x"].raw[cx]

	n := ds["nwp.zarr"].arrays
	u := n["UKV"]
	inits := n["init_time"].ints
	run := -1
	for r, v := range inits {
		if v <= t0-3600 {
			run = r
		}
	}
	lead := int((t0 - 3600 - inits[run]) / 3600)
	start := func(coord []float64, v float64, size int) int {
		best := 0
		for i := range coord {
			if math.Abs(coord[i]-v) < math.Abs(coord[best]-v) {
				best = i
			}
		}
		return min(max(best-size/2, 0), len(coord)-size)
	}
	Q, V := u.shape[3], u.shape[2]
	y0, x0 := start(n["y"].raw, sy, 4), start(n["x"].raw, sx, 4)
	for st := lead; st < lead+4; st++ {
		for v := 0; v < V; v++ {
			for y := y0; y < y0+4; y++ {
				for x := x0; x < x0+4; x++ {
					nwp = append(nwp, float32(u.raw[(((run*16+st)*V+v)*Q+y)*Q+x]))
				}
			}
		}
	}

	p := ds["pv.zarr"].arrays
	pw := p["power"]
	S := pw.shape[1]
	idx := make([]int, S)
	for i := range idx {
		idx[i] = i
	}
	d := func(i int) float64 { return math.Hypot(p["x"].raw[i]-sx, p["y"].raw[i]-sy) }
	sort.SliceStable(idx, func(a, b int) bool { return d(idx[a]) < d(idx[b]) })
	sel := append([]int(nil), idx[:5]...)
	sort.SliceStable(sel, func(a, b int) bool { return p["system"].ints[sel[a]] < p["system"].ints[sel[b]] })
	for k := 0; k < 19; k++ {
		t := ti - 6 + k
		for _, sys := range sel {
			pv = append(pv, float32(pw.raw[t*S+sys]))
		}
	}
	for _, sys := range sel {
		ids = append(ids, p["system"].ints[sys])
	}
	return
}

func sameFloats(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s: value %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestFillMatchesReference(t *testing.T) {
	j, ds := newMemJob(t, smallMem, "", Options{})
	names := []string{}
	for _, tn := range j.Tensors() {
		names = append(names, tn.Name)
	}
	if got := strings.Join(names, ","); got != "satellite,nwp,pv,t0,x,y,pv_system" {
		t.Fatalf("tensors %s", got)
	}
	buf := batchBuf(j)
	sawNaN := false
	for b := uint64(0); b < 40; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		sat, nwp, pv := bytesAsFloat32(buf[0]), bytesAsFloat32(buf[1]), bytesAsFloat32(buf[2])
		t0s, xs, ys, ids := bytesAsInt64(buf[3]), bytesAsFloat64(buf[4]), bytesAsFloat64(buf[5]), bytesAsInt64(buf[6])
		for e := 0; e < 4; e++ {
			t0, ti, cy, cx := j.Draw(b, e)
			if t0s[e] != t0 || xs[e] != 200000+2000*float64(cx) || ys[e] != 900000-2000*float64(cy) {
				t.Fatalf("batch %d example %d: metadata %d %v %v", b, e, t0s[e], xs[e], ys[e])
			}
			if ti < 12 || ti+12 >= smallMem.T || cy < 4 || cy >= smallMem.P-4 || cx < 4 || cx >= smallMem.P-4 {
				t.Fatalf("draw out of range: ti %d cy %d cx %d", ti, cy, cx)
			}
			ws, wn, wp, wid := refExample(ds, ti, cy, cx)
			sameFloats(t, "satellite", sat[e*len(ws):(e+1)*len(ws)], ws)
			sameFloats(t, "nwp", nwp[e*len(wn):(e+1)*len(wn)], wn)
			sameFloats(t, "pv", pv[e*len(wp):(e+1)*len(wp)], wp)
			for q := range wid {
				if ids[e*5+q] != wid[q] {
					t.Fatalf("pv_system %v, want %v", ids[e*5:e*5+5], wid)
				}
			}
			for _, v := range ws {
				sawNaN = sawNaN || v != v
			}
		}
	}
	if !sawNaN {
		t.Error("no fill value decoded to NaN in 160 examples: the test data is too clean")
	}
	if j.Candidates() != smallMem.T-12-12 { // i >= 12 (an NWP run 60 min old), i + 12 < T
		t.Errorf("%d candidates, want %d", j.Candidates(), smallMem.T-24)
	}
}

// fillRange fills global batches from..to-1 with readers goroutines.
func fillRange(t *testing.T, j *Job, from, to uint64, readers int) [][]byte {
	t.Helper()
	return fillStream(t, j, Stream{}, from, to, readers)
}

// fillStream fills batches from..to-1 of stream s with readers goroutines.
func fillStream(t *testing.T, j *Job, s Stream, from, to uint64, readers int) [][]byte {
	t.Helper()
	out := make([][]byte, to-from)
	var wg sync.WaitGroup
	next := make(chan uint64)
	errs := make(chan error, readers)
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := batchBuf(j)
			for b := range next {
				if err := j.Fill(ctx, s.Global(b), buf); err != nil {
					errs <- err
					return
				}
				out[b-from] = bytes.Join(buf, nil)
			}
		}()
	}
	// Hand batches out in a scrambled order.
	order := make([]uint64, 0, to-from)
	for b := from; b < to; b++ {
		order = append(order, b)
	}
	sort.Slice(order, func(a, b int) bool { return mix64(order[a]) < mix64(order[b]) })
	for _, b := range order {
		next <- b
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return out
}

func TestDeterministicAcrossReadersResumeAndDDP(t *testing.T) {
	j1, _ := newMemJob(t, smallMem, "", Options{})
	one := fillRange(t, j1, 0, 24, 1)
	j3, _ := newMemJob(t, smallMem, "", Options{})
	three := fillRange(t, j3, 0, 24, 3)
	for b := range one {
		if !bytes.Equal(one[b], three[b]) {
			t.Fatalf("batch %d differs between 1 and 3 readers", b)
		}
	}
	// Resume: a fresh job started at batch 10 produces batches 10.. of the stream.
	jr, _ := newMemJob(t, smallMem, "", Options{})
	resumed := fillRange(t, jr, 10, 24, 2)
	for b := range resumed {
		if !bytes.Equal(resumed[b], one[10+b]) {
			t.Fatalf("resumed batch %d differs", 10+b)
		}
	}
	// DDP: rank r of 3 produces global batches k*3 + r.
	seen := map[string]int{}
	for r := 0; r < 3; r++ {
		jd, _ := newMemJob(t, smallMem, "", Options{})
		rank, err := NewStream(r, 3)
		if err != nil {
			t.Fatal(err)
		}
		part := fillStream(t, jd, rank, 0, 8, 2)
		for k := range part {
			if !bytes.Equal(part[k], one[k*3+r]) {
				t.Fatalf("rank %d batch %d is not global batch %d", r, k, k*3+r)
			}
			seen[string(part[k])]++
		}
	}
	if len(seen) != 24 {
		t.Fatalf("3 ranks x 8 batches gave %d distinct batches, want 24", len(seen))
	}
	// A different seed gives a different stream.
	js, _ := newMemJob(t, smallMem, "", Options{})
	js.seed = 8
	if other := fillRange(t, js, 0, 1, 1); bytes.Equal(other[0], one[0]) {
		t.Fatal("seed 8 gives the same batch 0 as seed 7")
	}
}

func TestFillRejectsWrongBuffers(t *testing.T) {
	j, _ := newMemJob(t, smallMem, "", Options{})
	buf := batchBuf(j)
	if err := j.Fill(ctx, 0, buf[:3]); err == nil {
		t.Error("3 tensors accepted")
	}
	buf[1] = buf[1][:10]
	if err := j.Fill(ctx, 0, buf); err == nil || !strings.Contains(err.Error(), "nwp") {
		t.Errorf("short tensor: %v", err)
	}
}

func TestDecodeErrorNamesChunk(t *testing.T) {
	cfg, err := parseCfg(t, strings.Replace(memConfigFmt(""), "size = 4", "size = 32", 1))
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	ds["satellite.zarr"].arrays["data"].failChunk = []int{5, 0, 1, 1}
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	buf := batchBuf(j)
	var ferr error
	for b := uint64(0); b < 50 && ferr == nil; b++ {
		ferr = j.Fill(ctx, b, buf)
	}
	if ferr == nil || !strings.Contains(ferr.Error(), "chunk [5 0 1 1]") || !strings.Contains(ferr.Error(), "source[0]") {
		t.Fatalf("error %v", ferr)
	}
}

func memConfigFmt(extra string) string { return strings.Replace(memConfig, "%s", extra, 1) }

func TestDropout(t *testing.T) {
	j, ds := newMemJob(t, smallMem, "dropout_timedeltas_minutes = [-10]\ndropout_fraction = 1.0", Options{})
	buf := batchBuf(j)
	if err := j.Fill(ctx, 3, buf); err != nil {
		t.Fatal(err)
	}
	sat := bytesAsFloat32(buf[0])
	per := 19 * 4 * 8 * 8
	for e := 0; e < 4; e++ {
		_, ti, cy, cx := j.Draw(3, e)
		ws, _, _, _ := refExample(ds, ti, cy, cx)
		// steps at or before t0 - 10 min are kept (k <= 4), the rest are NaN
		for k := 0; k < 19; k++ {
			got := sat[e*per+k*256 : e*per+(k+1)*256]
			if k <= 4 {
				sameFloats(t, "kept step", got, ws[k*256:(k+1)*256])
				continue
			}
			for _, v := range got {
				if v == v {
					t.Fatalf("example %d step %d: %v after the dropout time", e, k, v)
				}
			}
		}
	}
}

func TestNormaliseAndNaNPolicy(t *testing.T) {
	j, ds := newMemJob(t, smallMem, "normalise_mean = [0.5, 0, 0, 0]\nnormalise_std = [0.25, 1, 1, 2]\nnan_policy = \"zero\"", Options{})
	buf := batchBuf(j)
	if err := j.Fill(ctx, 0, buf); err != nil {
		t.Fatal(err)
	}
	sat := bytesAsFloat32(buf[0])
	_, ti, cy, cx := j.Draw(0, 0)
	ws, _, _, _ := refExample(ds, ti, cy, cx)
	mean, std := []float64{0.5, 0, 0, 0}, []float64{0.25, 1, 1, 2}
	for i, w := range ws {
		c := i / 64 % 4
		want := float32((float64(w) - mean[c]) / std[c])
		if w != w {
			want = 0
		}
		if sat[i] != want {
			t.Fatalf("value %d (channel %d): %v, want %v", i, c, sat[i], want)
		}
	}
}

// TestClipAndNaNFill: ocf-data-sampler's normalisation, (clip(v, lo, hi) - mean) / std per
// channel (an absent bound is infinite), then NaN -> nan_fill (its dropout_value).
func TestClipAndNaNFill(t *testing.T) {
	j, ds := newMemJob(t, smallMem, "normalise_mean = [0.5, 0, 0, 0.25]\nnormalise_std = [0.25, 1, 1, 2]\n"+
		"normalise_clip_min = [0.2, -inf, 0.1, -inf]\nnormalise_clip_max = [0.7, inf, inf, 0.4]\nnan_fill = -1.5", Options{})
	buf := batchBuf(j)
	lo, hi := []float64{0.2, math.Inf(-1), 0.1, math.Inf(-1)}, []float64{0.7, math.Inf(1), math.Inf(1), 0.4}
	mean, std := []float64{0.5, 0, 0, 0.25}, []float64{0.25, 1, 1, 2}
	var clipped, filled int
	for b := uint64(0); b < 20; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		sat := bytesAsFloat32(buf[0])
		for e := 0; e < 4; e++ {
			_, ti, cy, cx := j.Draw(b, e)
			ws, _, _, _ := refExample(ds, ti, cy, cx)
			for i, w := range ws {
				c := i / 64 % 4
				x := math.Min(math.Max(float64(w), lo[c]), hi[c])
				want := float32((x - mean[c]) / std[c])
				if w != w {
					want, filled = -1.5, filled+1
				} else if x != float64(w) {
					clipped++
				}
				if got := sat[e*len(ws)+i]; got != want {
					t.Fatalf("batch %d example %d value %d (channel %d): %v, want %v (stored %v)", b, e, i, c, got, want, w)
				}
			}
		}
	}
	if clipped == 0 || filled == 0 {
		t.Fatalf("%d clipped, %d filled: the test proves nothing", clipped, filled)
	}
}

func TestFillAllocatesNothingWhenWarm(t *testing.T) {
	for _, extra := range []string{"", "sampling = \"locality\"\nsegment_steps = 24\nresident_segments = 6"} {
		j, _ := newMemJob(t, smallMem, extra, Options{})
		if allocs := warmFillAllocs(t, j); allocs != 0 {
			t.Errorf("mode %s: %.1f allocations per warm Fill", j.Mode(), allocs)
		}
	}
}

// warmFillAllocs fills global batches 0..299 (every chunk decoded, reader state pooled), then
// returns the allocations of one more Fill of those batches, averaged over 50.
func warmFillAllocs(t *testing.T, j *Job) float64 {
	t.Helper()
	buf := batchBuf(j)
	for b := uint64(0); b < 300; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
	}
	k := uint64(0)
	return testing.AllocsPerRun(50, func() {
		if err := j.Fill(ctx, k%300, buf); err != nil {
			t.Fatal(err)
		}
		k++
	})
}
