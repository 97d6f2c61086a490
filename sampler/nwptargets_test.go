package sampler

import (
	"math"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/internal/ocfref"
)

// TestTargetsDiff: each accumulated channel becomes v[k+1] - v[k] (the last from the step after
// the window), normalised with its own constants; the other channels are untouched.
func TestTargetsDiff(t *testing.T) {
	const T, C, plane = 3, 2, 2
	// channel 0 plain, channel 1 accumulated: values 10*step + pixel
	out := make([]float32, T*C*plane)
	for k := range T {
		for p := range plane {
			out[(k*C+0)*plane+p] = float32(-(k + 1))
			out[(k*C+1)*plane+p] = float32(10*k*k + p)
		}
	}
	next := []float32{10 * T * T, 10*T*T + 1}
	o := targetWindow{accum: []int{1}, norm: []normConsts{{mean: 5, std: 2, lo: math.Inf(-1), hi: 30}}}
	o.diff(out, next, T, C, plane)
	for k := range T {
		for p := range plane {
			d := float64(10*(k+1)*(k+1) - 10*k*k)
			want := float32((min(d, 30) - 5) / 2)
			if got := out[(k*C+1)*plane+p]; got != want {
				t.Errorf("step %d pixel %d: %v, want %v", k, p, got, want)
			}
			if got := out[(k*C+0)*plane+p]; got != float32(-(k + 1)) {
				t.Errorf("plain channel changed at step %d: %v", k, got)
			}
		}
	}
}

// TestDropoutDraws: a list gives each timedelta its probability, one number splits evenly;
// the frequencies over many examples lie within 5 standard deviations of the binomial's mean.
func TestDropoutDraws(t *testing.T) {
	j := &Job{seed: 7}
	tds := []int64{-30, -60, -90}
	for _, sp := range []*Spec{
		{DropoutTimedeltasMinutes: tds, DropoutFraction: 0.6, DropoutFractions: []float64{0.1, 0.2, 0.3}},
		{DropoutTimedeltasMinutes: tds, DropoutFraction: 0.6},
	} {
		const n = 60000
		counts := map[int64]int{}
		for g := range uint64(n / 20) {
			for e := range uint64(20) {
				counts[j.drawDropout(sp, 2, g, e)]++
			}
		}
		probs := map[int64]float64{math.MaxInt64: 0.4}
		for k, td := range tds {
			p := 0.2
			if sp.DropoutFractions != nil {
				p = sp.DropoutFractions[k]
			}
			probs[td*60] = p
		}
		for cut, p := range probs {
			mean, sd := n*p, math.Sqrt(n*p*(1-p))
			if got := float64(counts[cut]); math.Abs(got-mean) > 5*sd {
				t.Errorf("fractions %v: cut %d drawn %v times, want %v ± %v", sp.DropoutFractions, cut, got, mean, 5*sd)
			}
		}
	}
}

// ocfNWPConfig is the in-memory job under ocf's rules, its NWP with an accumulated channel w,
// normalisation and dropout of -180 min with probability 0.5.
func ocfNWPConfig(nwp string) string {
	text := memConfigFmt(`rules = "ocf"`)
	return strings.Replace(text, "min_staleness_minutes = 60\n", nwp, 1)
}

func TestOCFNWPStalenessAboveTheSteps(t *testing.T) {
	cfg, err := parseCfg(t, ocfNWPConfig("max_staleness_minutes = 661\n"))
	if err != nil {
		t.Fatal(err)
	}
	// the last step 15 h - interval_end 2 h = 780 min; with w accumulated 720 min
	if _, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))}); err != nil {
		t.Fatalf("661 <= 780 refused: %v", err)
	}
	cfg, _ = parseCfg(t, ocfNWPConfig("max_staleness_minutes = 721\naccum_channels = [\"w\"]\n"))
	_, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
	if err == nil || !strings.Contains(err.Error(), "source[1].max_staleness_minutes") || !strings.Contains(err.Error(), "at most 720") {
		t.Fatalf("got %v", err)
	}
}

// TestOCFNWPJob fills batches under ocf's rules and checks every example's time tensors and
// NWP values against ocfref.BrutePick on the store's coordinates: the store's value is linear in
// its flat index, so w's difference is the same at every pixel wherever the crop is, and u's
// value less its (run, step) part is the same at every step.
func TestOCFNWPJob(t *testing.T) {
	const mean, std = 3.0, 2.0
	cfg, err := parseCfg(t, ocfNWPConfig("accum_channels = [\"w\"]\nnormalise_mean = [0, 0, 3]\nnormalise_std = [1, 1, 2]\n"+
		"nan_fill = -7\ndropout_timedeltas_minutes = [-180]\ndropout_fraction = 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	idx := map[string]int{}
	for i, ten := range j.Tensors() {
		idx[ten.Name] = i
	}
	for _, name := range []string{"nwp_init_time_utc", "nwp_step", "nwp_target_time_utc"} {
		if _, ok := idx[name]; !ok {
			t.Fatalf("no tensor %s in %v", name, j.Tensors())
		}
	}
	n := ds["nwp.zarr"].arrays
	inits, steps := n["init_time"].ints, n["step"].ints
	const S, V, Q = 16, 3, 10
	plane := 4 * 4
	flat := func(r, s int) float64 { return 0.25 * float64((r*S+s)*V*Q*Q) } // the (run, step) part
	find := func(vals []int64, v int64) int {
		for i, x := range vals {
			if x == v {
				return i
			}
		}
		t.Fatalf("%d not in %v", v, vals)
		return -1
	}
	var dropped, mixed int
	for g := range uint64(6) {
		buf := batchBuf(j)
		if err := j.Fill(ctx, g, buf); err != nil {
			t.Fatal(err)
		}
		out := bytesAsFloat32(buf[idx["nwp"]])
		initT, stepT, targetT := bytesAsFloat64(buf[idx["nwp_init_time_utc"]]), bytesAsInt64(buf[idx["nwp_step"]]), bytesAsFloat64(buf[idx["nwp_target_time_utc"]])
		for e := range j.size {
			ex := example{cut: make([]int64, len(j.srcs))}
			j.draw(g, e, &ex, nil)
			avail := available(&ex, 1)
			if avail != ex.t0 {
				dropped++
			}
			start := ocfref.Ceil(ex.t0-3600, 3600)
			runs, leads, ok := ocfref.BrutePick(inits, steps, start, 3600, 5, avail)
			if !ok {
				t.Fatalf("batch %d example %d: t0 %d has no window", g, e, ex.t0)
			}
			if runs[0] != runs[3] {
				mixed++
			}
			base := out[e*4*V*plane:]
			for k := range 4 {
				r, s := find(inits, runs[k]), find(steps, leads[k])
				if initT[e*4+k] != float64(runs[k])*1e9 || stepT[e*4+k] != leads[k]/3600 || targetT[e*4+k] != float64(runs[k]+leads[k])*1e9 {
					t.Errorf("batch %d example %d step %d: init %v step %v target %v; want run %d lead %d", g, e, k,
						initT[e*4+k], stepT[e*4+k], targetT[e*4+k], runs[k], leads[k])
				}
				r2, s2 := find(inits, runs[k+1]), find(steps, leads[k+1])
				wantW := float32((float64(float32(flat(r2, s2)-flat(r, s))) - mean) / std)
				for p := range plane {
					if got := base[(k*V+2)*plane+p]; got != wantW {
						t.Fatalf("batch %d example %d step %d pixel %d: w %v, want %v", g, e, k, p, got, wantW)
					}
					if got, first := float64(base[(k*V+0)*plane+p])-flat(r, s), float64(base[p])-flat(find(inits, runs[0]), find(steps, leads[0])); got != first {
						t.Fatalf("batch %d example %d step %d pixel %d: u less its run and step %v, at step 0 %v", g, e, k, p, got, first)
					}
				}
			}
		}
	}
	if dropped == 0 || dropped == 6*j.size || mixed == 0 {
		t.Fatalf("%d of %d examples dropped out, %d mixed: the test proves too little", dropped, 6*j.size, mixed)
	}
}

func TestOCFNWPNameTooLongForItsTimeTensors(t *testing.T) {
	text := strings.Replace(ocfNWPConfig(""), `name = "nwp"`, `name = "nwp_sixteen_char"`, 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
	if err == nil || !strings.Contains(err.Error(), "source[1]") || !strings.Contains(err.Error(), `"nwp_sixteen_char" is too long`) {
		t.Fatalf("got %v", err)
	}
}

func TestOCFNWPFillAllocatesNothingWhenWarm(t *testing.T) {
	cfg, err := parseCfg(t, ocfNWPConfig("accum_channels = [\"w\"]\ndropout_timedeltas_minutes = [-180]\ndropout_fraction = 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	buf := batchBuf(j)
	if err := j.Fill(ctx, 0, buf); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := j.Fill(ctx, 0, buf); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("%v allocations per warm Fill", n)
	}
}
