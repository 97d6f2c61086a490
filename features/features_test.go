package features

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"testing"
)

// readCSV reads a reference table written by testdata/gen_reference.py with
// ocf-data-sampler's own functions: its header, then rows of numbers.
func readCSV(t *testing.T, name string) [][]float64 {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float64
	for _, r := range recs[1:] {
		row := make([]float64, len(r))
		for i, s := range r {
			if row[i], err = strconv.ParseFloat(s, 64); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// TestSunMatchesOCF compares the normalised azimuth and elevation with ocf-data-sampler's
// make_sun_position_numpy_sample (pvlib nrel_numpy) over 3000 random (time, site) of 2016-2026
// at 49-61 N, 8 W - 2 E: within 1e-4 of the normalised values.
func TestSunMatchesOCF(t *testing.T) {
	rows := readCSV(t, "sun_ocf.csv")
	var worstAz, worstEl float64
	for _, r := range rows {
		az, el := SunNormalised(r[0], r[1], r[2])
		dAz, dEl := math.Abs(az-r[3]), math.Abs(el-r[4])
		if dAz > 0.5 { // azimuth wraps at north
			dAz = 1 - dAz
		}
		worstAz, worstEl = max(worstAz, dAz), max(worstEl, dEl)
		if dAz > 1e-4 || dEl > 1e-4 {
			t.Errorf("t=%v lon=%v lat=%v: (%v, %v), ocf (%v, %v)", r[0], r[1], r[2], az, el, r[3], r[4])
		}
	}
	t.Logf("%d positions; largest differences: azimuth %.3g, elevation %.3g (normalised)", len(rows), worstAz, worstEl)
}

// TestDateTimeAndEmbeddingMatchOCF compares the datetime encodings and a t0 embedding of six
// periods with ocf-data-sampler's encode_datetimes and get_t0_embedding.
func TestDateTimeAndEmbeddingMatchOCF(t *testing.T) {
	embs := []Embedding{}
	for _, p := range [][2]string{{"1h", "cyclic"}, {"6h", "linear"}, {"24h", "cyclic"}, {"1y", "cyclic"}, {"2y", "linear"}, {"4y", "cyclic"}} {
		e, err := ParseEmbedding(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		embs = append(embs, e)
	}
	emb := make([]float32, 10)
	for _, r := range readCSV(t, "datetime_ocf.csv") {
		ds, dc, ts, tc := DateTime(int64(r[0]))
		for i, v := range []float64{ds, dc, ts, tc} {
			if math.Abs(v-r[1+i]) > 1e-12 {
				t.Errorf("t=%v: encoding %d is %v, ocf %v", r[0], i, v, r[1+i])
			}
		}
		T0Embedding(emb, int64(r[0]), embs)
		for i, v := range emb {
			if v != float32(r[5+i]) {
				t.Errorf("t=%v: embedding[%d] is %v, ocf %v", r[0], i, v, float32(r[5+i]))
			}
		}
	}
}

func TestParseEmbeddingRefuses(t *testing.T) {
	for _, p := range [][2]string{{"0h", "cyclic"}, {"25h", "linear"}, {"0y", "cyclic"}, {"h", "cyclic"}, {"3d", "linear"}, {"1h", "sine"}, {"-1y", "linear"}} {
		if _, err := ParseEmbedding(p[0], p[1]); err == nil {
			t.Errorf("%v accepted", p)
		}
	}
}

// BenchmarkSun is the cost of one solar position; it allocates nothing.
func BenchmarkSun(b *testing.B) {
	b.ReportAllocs()
	var s float64
	for i := 0; i < b.N; i++ {
		az, el := SunNormalised(1.7e9+float64(i%100000)*300, -1.5, 52.5)
		s += az + el
	}
	if s == 0 {
		b.Fatal(s)
	}
}

func TestSunAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Sun(1.7e9, -1.5, 52.5) }); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}

// TestSunCache: the cache gives SunAt's position for every time asked, bit for bit,
// whether the time was kept, never seen, or pushed out by another time in its slot (times
// 512 minutes apart share one), and allocates nothing.
func TestSunCache(t *testing.T) {
	var c SunCache
	base := int64(1_700_000_000)
	times := []int64{base, base + 300, base, base + 512*60, base, -3600, base + 300, 0, base + 512*60}
	for i, tt := range times {
		if got, want := c.At(tt), SunAt(float64(tt)); got != want {
			t.Fatalf("time %d (%d): cache %+v, SunAt %+v", i, tt, got, want)
		}
	}
	lon, lat := -1.5, 52.6
	az, el := c.At(base).Seen(lon, lat)
	if waz, wel := Sun(float64(base), lon, lat); az != waz || el != wel {
		t.Fatalf("Seen from the cache: %v %v, Sun: %v %v", az, el, waz, wel)
	}
	if n := testing.AllocsPerRun(100, func() { c.At(base + 600) }); n != 0 {
		t.Fatalf("%v allocations per At", n)
	}
}
