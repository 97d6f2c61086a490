package sampler

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// A crop as large as the whole anchor grid (even and odd sizes): one centre, the whole field.
func TestCropOfTheWholeGrid(t *testing.T) {
	for _, P := range []int{40, 39} {
		p := smallMem
		p.P = P
		cfg := memConfigFmt("")
		cfg = cfg[:strings.Index(cfg, "[[source]]\nname = \"nwp\"")] // the satellite alone
		cfg = strings.NewReplacer("image_size_pixels_height = 8", "image_size_pixels_height = "+strconv.Itoa(P),
			"image_size_pixels_width = 8", "image_size_pixels_width = "+strconv.Itoa(P)).Replace(cfg)
		c, err := parseCfg(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ds := newMemNowcast(p)
		j, err := NewJob(c, Options{Open: memOpen(ds)})
		if err != nil {
			t.Fatalf("%d x %d crop of a %d x %d grid: %v", P, P, P, P, err)
		}
		defer j.Close()
		data := ds["satellite.zarr"].arrays["data"]
		C := data.shape[1]
		buf := batchBuf(j)
		for b := uint64(0); b < 3; b++ {
			if err := j.Fill(ctx, b, buf); err != nil {
				t.Fatal(err)
			}
			sat := bytesAsFloat32(buf[0])
			per := len(sat) / j.size
			for e := 0; e < j.size; e++ {
				_, ti, cy, cx := j.Draw(b, e)
				if cy != P/2 || cx != P/2 {
					t.Fatalf("P %d: centre (%d, %d), want (%d, %d)", P, cy, cx, P/2, P/2)
				}
				i := 0
				for k := 0; k < 19; k++ {
					for ch := 0; ch < C; ch++ {
						for y := 0; y < P; y++ {
							for x := 0; x < P; x++ {
								raw := data.raw[(((ti-6+k)*C+ch)*P+y)*P+x]
								want := float32(raw * 0.001)
								got := sat[e*per+i]
								if raw == -1 && !math.IsNaN(float64(got)) || raw != -1 && got != want {
									t.Fatalf("P %d: batch %d example %d [%d %d %d %d] = %v, want %v (raw %v)", P, b, e, k, ch, y, x, got, want, raw)
								}
								i++
							}
						}
					}
				}
			}
		}
	}
}
