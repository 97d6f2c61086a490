package sampler

import (
	"strings"
	"testing"
)

// FuzzJobConfig feeds edited sampler configurations through config.Parse and NewJob (over the
// in-memory dataset) and, when both accept, fills a batch: whatever the numbers, the result is
// an error naming a field or a filled batch, never a panic.
//
//	go test -run - -fuzz FuzzJobConfig -fuzztime 60s ./sampler
func FuzzJobConfig(f *testing.F) {
	f.Add("interval_start_minutes = -30", "interval_start_minutes = -30")
	f.Add("image_size_pixels_height = 8", "image_size_pixels_height = 40")
	f.Add("image_size_pixels_width = 8", "image_size_pixels_width = 1")
	f.Add("nearest_k = 5", "nearest_k = 23")
	f.Add("min_staleness_minutes = 60", "min_staleness_minutes = 0\nmax_staleness_minutes = 1")
	f.Add("interval_end_minutes = 120", "interval_end_minutes = 960")
	f.Add("cache_mb = 64", "cache_mb = 16\nsampling = \"locality\"\nsegment_steps = 1")
	f.Add("cache_mb = 64", "cache_mb = 64\ndropout_timedeltas_minutes = [0, -5]\ndropout_fraction = 0.5")
	f.Add(`channels = ["u", "v", "w"]`, `channels = ["w"]`)
	f.Add("time_resolution_minutes = 60", "time_resolution_minutes = 180")
	f.Fuzz(func(t *testing.T, from, to string) {
		base := memConfigFmt("")
		if from == "" || !strings.Contains(base, from) || len(to) > 200 {
			return
		}
		cfg, err := parseCfg(t, strings.Replace(base, from, to, 1))
		if err != nil {
			return
		}
		j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
		if err != nil {
			if !strings.Contains(err.Error(), "source") && !strings.Contains(err.Error(), "batch") {
				t.Fatalf("error names no field: %v", err)
			}
			return
		}
		defer j.Close()
		buf := batchBuf(j)
		if err := j.Fill(ctx, 3, buf); err != nil {
			t.Fatalf("accepted config fails to fill: %v", err)
		}
	})
}
