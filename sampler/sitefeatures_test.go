package sampler

import (
	"strings"
	"testing"

	"github.com/gobatch/gobatch/features"
)

// The site features' values are compared with ocf-data-sampler in features' tests and in
// python/tests/ocf/test_ocf_values.py; here: where they go (the tensors, each row its own t0) and
// what is refused, naming the key.

func TestSiteFeaturesTensorsAndRows(t *testing.T) {
	j, _, err := newSheared(t, `locations = "pv"`, "", `datetime_features = true
t0_embedding = ["1h:cyclic", "2y:linear"]`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range j.Tensors() {
		names = append(names, tn.Name)
	}
	if got := strings.Join(names, ","); got != "satellite,nwp,pv,t0,x,y,pv_system,location_id,date_sin,date_cos,time_sin,time_cos,t0_embedding" {
		t.Fatalf("tensors %s", got)
	}
	buf := batchBuf(j)
	embs := []features.Embedding{{Hours: 1, Cyclic: true}, {Years: 2}}
	want := make([]float32, 3)
	n := j.points[0].s.Steps()
	for b := uint64(0); b < 5; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		t0s, lids := bytesAsInt64(buf[3]), bytesAsInt64(buf[7])
		for e := 0; e < 4; e++ {
			if lids[e] == 0 {
				t.Fatalf("batch %d row %d: no location", b, e)
			}
			sp := j.points[0].s
			for k := 0; k < n; k++ {
				tk := t0s[e] + (sp.IntervalStartMinutes+int64(k)*sp.TimeResolutionMinutes)*60
				ds, dc, ts, tc := features.DateTime(tk)
				for i, v := range []float64{ds, dc, ts, tc} {
					if got := bytesAsFloat32(buf[8+i])[e*n+k]; got != float32(v) {
						t.Fatalf("batch %d row %d step %d: tensor %s is %v, want %v", b, e, k, names[8+i], got, float32(v))
					}
				}
			}
			features.T0Embedding(want, t0s[e], embs)
			if got := bytesAsFloat32(buf[12])[e*3 : e*3+3]; !equalFloat32s(got, want) {
				t.Fatalf("batch %d row %d: t0_embedding %v, want %v", b, e, got, want)
			}
		}
	}
}

func equalFloat32s(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestSiteFeaturesRefusedNamingTheKey(t *testing.T) {
	cases := []struct{ anchor, nwp, pv, want string }{
		{`locations = "pv"`, "datetime_features = true", "", "source[1].datetime_features: datetime_features, solar_position and t0_embedding belong to the points source"},
		{"", "", "datetime_features = true", `source[2].datetime_features: datetime_features, solar_position and t0_embedding need the examples centred on this source's systems (the anchor's locations = "pv")`},
		{`locations = "pv"`, "", `t0_embedding = ["3d:cyclic"]`, `source[2].t0_embedding: element 0 ("3d:cyclic"): period "3d"`},
		{`locations = "pv"`, "", `t0_embedding = ["1h"]`, `source[2].t0_embedding: element 0 ("1h"): kind ""`},
		{`locations = "pv"`, "", `solar_position = { time_resolution_minutes = 30, interval_start_minutes = -45, interval_end_minutes = 0 }`, "source[2].solar_position.interval_start_minutes: -45 is not a multiple"},
		{`locations = "pv"`, "", `solar_position = { time_resolution_minutes = 30, interval_start_minutes = -60, interval_end_minutes = 0 }`, "source[2].solar_position: needs the systems' positions in longitude/latitude"},
	}
	for _, c := range cases {
		j, _, err := newSheared(t, c.anchor, c.nwp, c.pv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s / %s / %s: error %v\nwant it to contain %q", c.anchor, c.nwp, c.pv, err, c.want)
		}
		if j != nil {
			j.Close()
		}
	}
}

// BenchmarkFillSiteFeatures is the cost of the datetime features and the t0 embedding in a
// warm Fill of the in-memory nowcast: "none" is the same job without them, the baseline of the
// same run. (The solar position costs features.BenchmarkSun per step and example.)
func BenchmarkFillSiteFeatures(b *testing.B) {
	for _, c := range []struct{ name, pv string }{
		{"none", ""},
		{"features", "datetime_features = true\nt0_embedding = [\"1h:cyclic\", \"24h:cyclic\", \"1y:cyclic\"]"},
	} {
		b.Run(c.name, func(b *testing.B) {
			j, _, err := newSheared(b, `locations = "pv"`, "", c.pv)
			if err != nil {
				b.Fatal(err)
			}
			buf := batchBuf(j)
			for g := uint64(0); g < 300; g++ { // warm: every chunk decoded
				if err := j.Fill(ctx, g, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := j.Fill(ctx, uint64(i%300), buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
