package sampler

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
)

// Errors found while parsing: the field, its line and what was expected.
func TestSpecErrors(t *testing.T) {
	base := memConfigFmt("")
	cases := []struct {
		name, from, to string
		want           []string // substrings of the error
	}{
		{"interval not a multiple", "interval_end_minutes = 60\nimage_size_pixels_height = 8", "interval_end_minutes = 62\nimage_size_pixels_height = 8",
			[]string{"source[0].interval_end_minutes", "test.toml:", "not a multiple of time_resolution_minutes (5)"}},
		{"end before start", "interval_start_minutes = -60\ninterval_end_minutes = 120", "interval_start_minutes = 120\ninterval_end_minutes = -60",
			[]string{"source[1].interval_end_minutes", "before interval_start_minutes"}},
		{"unknown role", `role = "nwp"`, `role = "forecast"`, []string{"source[1].role", `unknown role "forecast"`}},
		{"nearest_k zero", "nearest_k = 5", "nearest_k = 0", []string{"source[2].nearest_k", "out of range"}},
		{"key of another role", "nearest_k = 5", "nearest_k = 5\nimage_size_pixels_height = 3", []string{"source[2].image_size_pixels_height", "unknown key"}},
		{"anchor on nwp", "min_staleness_minutes = 60", "min_staleness_minutes = 60\nanchor = true", []string{"source[1].anchor", "an NWP source cannot be the anchor"}},
		{"normalise length", "cache_mb = 64", "cache_mb = 64\nnormalise_mean = [1, 2]\nnormalise_std = [1, 2]", []string{"source[0].normalise_mean", "2 values; expected 4"}},
		{"normalise std zero", "cache_mb = 64", "cache_mb = 64\nnormalise_mean = [1, 2, 3, 4]\nnormalise_std = [1, 0, 1, 1]", []string{"source[0].normalise_std", "element 1"}},
		{"dropout positive", "cache_mb = 64", "cache_mb = 64\ndropout_timedeltas_minutes = [15]\ndropout_fraction = 0.5", []string{"source[0].dropout_timedeltas_minutes", "out of range"}},
		{"accum not a channel", `channels = ["u", "v", "w"]`, `channels = ["u", "v", "w"]` + "\naccum_channels = [\"q\"]", []string{"source[1].accum_channels", `"q" is not among the channels`}},
		{"dropout list length", "cache_mb = 64", "cache_mb = 64\ndropout_timedeltas_minutes = [-15, -30]\ndropout_fraction = [0.5]", []string{"source[0].dropout_fraction", "1 probabilities for 2"}},
		{"dropout list sum", "cache_mb = 64", "cache_mb = 64\ndropout_timedeltas_minutes = [-15, -30]\ndropout_fraction = [0.5, 0.75]", []string{"source[0].dropout_fraction", "add up to 1.25"}},
		{"staleness order", "min_staleness_minutes = 60", "min_staleness_minutes = 60\nmax_staleness_minutes = 30", []string{"source[1].max_staleness_minutes", "below min_staleness_minutes"}},
		{"clip without max", "cache_mb = 64", "cache_mb = 64\nnormalise_mean = [1, 2, 3, 4]\nnormalise_std = [1, 1, 1, 1]\nnormalise_clip_min = [0, 0, 0, 0]", []string{"source[0].normalise_clip_max", "missing"}},
		{"clip without mean", "cache_mb = 64", "cache_mb = 64\nnormalise_clip_min = [0, 0, 0, 0]\nnormalise_clip_max = [1, 1, 1, 1]", []string{"source[0].normalise_clip_min", "without normalise_mean"}},
		{"clip length", "cache_mb = 64", "cache_mb = 64\nnormalise_mean = [1, 2, 3, 4]\nnormalise_std = [1, 1, 1, 1]\nnormalise_clip_min = [0, 0, 0]\nnormalise_clip_max = [1, 1, 1, 1]", []string{"source[0].normalise_clip_min", "3 and 4 values; expected one per normalise_mean value (4)"}},
		{"clip order", "cache_mb = 64", "cache_mb = 64\nnormalise_mean = [1, 2, 3, 4]\nnormalise_std = [1, 1, 1, 1]\nnormalise_clip_min = [0, -inf, 2, 0]\nnormalise_clip_max = [1, 1, 2, inf]", []string{"source[0].normalise_clip_min", "element 2 (2) is not below normalise_clip_max's (2)"}},
		{"nan_fill and nan_policy", "cache_mb = 64", "cache_mb = 64\nnan_policy = \"zero\"\nnan_fill = -1", []string{"source[0].nan_fill", "set together with nan_policy"}},
		{"nan_fill nan", "cache_mb = 64", "cache_mb = 64\nnan_fill = nan", []string{"source[0].nan_fill", "expected a finite float32 number"}},
		{"sampling mode", "cache_mb = 64", "cache_mb = 64\nsampling = \"shuffle\"", []string{"source[0].sampling", `unknown mode "shuffle"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("test bug: %q not in the config", c.from)
			}
			_, err := parseCfg(t, strings.Replace(base, c.from, c.to, 1))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Errors found while opening the stores name the field too.
func TestJobErrors(t *testing.T) {
	base := memConfigFmt("")
	cases := []struct {
		name, from, to string
		want           []string
	}{
		// channels is optional for a store without a channel axis, so that its absence is
		// judged once the store is open.
		{"missing channels", `channels = ["u", "v", "w"]`, ``, []string{"source[1].channels", "missing required key"}},
		{"channel not in store", `channels = ["u", "v", "w"]`, `channels = ["u", "q"]`, []string{"source[1].channels", `"q" is not a variable`, `"u", "v", "w"`}},
		{"no valid t0", "interval_start_minutes = -30\ninterval_end_minutes = 60\nimage_size_pixels_height = 8",
			"interval_start_minutes = -30\ninterval_end_minutes = 6000\nimage_size_pixels_height = 8",
			[]string{"no valid t0", "source[0] (satellite) rejects 150", "time window"}},
		{"no run old enough", "min_staleness_minutes = 60", "min_staleness_minutes = 60000", []string{"no valid t0", "source[1] (nwp)", "no run with init_time <= t0 - 60000 min"}},
		{"crop too large", "image_size_pixels_height = 8\nimage_size_pixels_width = 8", "image_size_pixels_height = 48\nimage_size_pixels_width = 8",
			[]string{"source[0].image_size_pixels_height", "48 does not fit the anchor grid of 40 rows"}},
		{"dropout on nwp", "min_staleness_minutes = 60", "min_staleness_minutes = 60\ndropout_timedeltas_minutes = [-60]\ndropout_fraction = 0.5", []string{"source[1].dropout_fraction", `not in gobatch's rules; expected rules = "ocf" on the anchor`}},
		{"accum under gobatch", `channels = ["u", "v", "w"]`, `channels = ["u", "v", "w"]` + "\naccum_channels = [\"w\"]", []string{"source[1].accum_channels", `not in gobatch's rules; expected rules = "ocf" on the anchor`}},
		{"two anchors", `role = "nwp"`, "role = \"grid\"\nanchor = true", nil}, // nwp as grid fails on dims first
		{"second anchor on points", "nearest_k = 5", "nearest_k = 5\nanchor = true", []string{"source[2].anchor", "a second anchor"}},
		{"missing store", `store = "pv.zarr"`, `store = "nope.zarr"`, []string{"source[2].store", "no store"}},
		{"missing variable", `variable = "UKV"`, `variable = "ukv"`, []string{"source[1].variable", `no array "ukv"`}},
		{"resolution not a multiple of the store step", "nearest_k = 5\ntime_resolution_minutes = 5\ninterval_start_minutes = -30\ninterval_end_minutes = 60\n",
			"nearest_k = 5\ntime_resolution_minutes = 7\ninterval_start_minutes = -35\ninterval_end_minutes = 63\n",
			[]string{"source[2]", "not a multiple"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("test bug: %q not in the config", c.from)
			}
			text := strings.Replace(base, c.from, c.to, 1)
			cfg, err := parseCfg(t, text)
			if err != nil {
				if c.want == nil {
					return
				}
				t.Fatalf("parse: %v", err)
			}
			_, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.File != "/data/test.toml" {
				t.Errorf("not a FieldError of the file: %#v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTwoAnchorsAndNoAnchor(t *testing.T) {
	base := memConfigFmt("")
	two := base + `
[[source]]
name = "sat2"
kind = "zarr"
store = "satellite.zarr"
variable = "data"
anchor = true
time_resolution_minutes = 5
interval_start_minutes = 0
interval_end_minutes = 0
image_size_pixels_height = 4
image_size_pixels_width = 4
channels = ["A"]
`
	cfg, err := parseCfg(t, two)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))}); err == nil || !strings.Contains(err.Error(), "source[3].anchor") {
		t.Fatalf("two anchors: %v", err)
	}
	cfg, err = parseCfg(t, strings.Replace(base, "anchor = true\n", "", 1))
	if err == nil || !strings.Contains(err.Error(), "source[0].cache_mb: unknown key") {
		t.Fatalf("cache_mb off the anchor: %v", err)
	}
	cfg, err = parseCfg(t, strings.Replace(strings.Replace(base, "anchor = true\n", "", 1), "cache_mb = 64\n", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))}); err == nil || !strings.Contains(err.Error(), "no anchor") {
		t.Fatalf("no anchor: %v", err)
	}
	// A second, non-anchor grid source is cropped by nearest coordinate like NWP.
	cfg, err = parseCfg(t, strings.Replace(two, "anchor = true\ntime_resolution_minutes = 5\ninterval_start_minutes = 0", "time_resolution_minutes = 5\ninterval_start_minutes = 0", 1))
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
	// sat2 on the same grid: its 4 x 4 crop starts at nearest - 2 = cy - 2, the centre of the
	// anchor's 8 x 8 crop (rows 2..5, columns 2..5), time step t0 = anchor step 6, channel A.
	sat, sat2 := bytesAsFloat32(buf[0]), bytesAsFloat32(buf[3])
	for e := 0; e < 4; e++ {
		for y := 0; y < 4; y++ {
			for x := 0; x < 4; x++ {
				a := sat[e*19*4*64+6*4*64+(y+2)*8+(x+2)]
				b := sat2[e*16+y*4+x]
				if a != b && !(a != a && b != b) {
					t.Fatalf("example %d (%d, %d): sat2 %v, anchor %v", e, y, x, b, a)
				}
			}
		}
	}
}

func TestJobErrorHasLine(t *testing.T) {
	text := strings.Replace(memConfigFmt(""), `channels = ["u", "v", "w"]`, `channels = ["u", "q"]`, 1)
	path := t.TempDir() + "/job.toml"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
	want := 0
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, `channels = ["u", "q"]`) {
			want = i + 1
		}
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("job.toml:%d: source[1].channels", want)) {
		t.Fatalf("error %v, want line %d", err, want)
	}
}
