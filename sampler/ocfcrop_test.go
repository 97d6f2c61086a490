package sampler

import (
	"math"
	"strings"
	"testing"
)

// The crop index rule of ocf-data-sampler 1.0.24's select_spatial_slice_pixels, written out by
// hand for small axes (the Python tests compare whole samples with ocf-data-sampler itself).
func TestOCFCropStart(t *testing.T) {
	asc := []float64{0, 10, 20, 30, 40, 50, 60, 70}
	desc := []float64{70, 60, 50, 40, 30, 20, 10, 0}
	cases := []struct {
		name  string
		c     []float64
		v     float64
		size  int
		start int    // store index; -1: refused
		why   string // part of the reason when refused
	}{
		{"centre", asc, 31, 4, 1, ""},                    // nearest index 3: [1, 5)
		{"tie takes the first index", asc, 35, 4, 1, ""}, // 30 and 40 tie: index 3
		{"just above a tie", asc, 35.5, 4, 2, ""},
		{"the last centre that fits", asc, 49, 4, 3, ""},  // index 5: [3, 7)
		{"c + size/2 == n fits", asc, 59, 4, 4, ""},       // index 6: [4, 8)
		{"left edge", asc, 12, 4, -1, "leaves the grid"},  // index 1: [-1, 3)
		{"right edge", asc, 69, 4, -1, "leaves the grid"}, // index 7: [5, 9)
		{"on the first coordinate", asc, 0, 2, -1, "strictly inside"},
		{"on the last coordinate", asc, 70, 2, -1, "strictly inside"},
		{"outside", asc, -5, 2, -1, "strictly inside"},
		{"NaN", asc, math.NaN(), 2, -1, "strictly inside"},
		// Descending store: ocf sees 0..70 increasing; increasing indices [1, 5) are store
		// indices [3, 7).
		{"descending centre", desc, 31, 4, 3, ""},
		{"descending tie", desc, 35, 4, 3, ""},
		{"descending right edge", desc, 69, 4, -1, "leaves the grid"},
		{"descending c + size/2 == n", desc, 59, 4, 0, ""},
	}
	for _, c := range cases {
		start, why := newOCFAxis(c.c).cropStart(c.v, c.size)
		if start != c.start || c.start < 0 && !strings.Contains(why, c.why) {
			t.Errorf("%s: cropStart(%v, %d) = %d (%q), want %d (%q)", c.name, c.v, c.size, start, why, c.start, c.why)
		}
	}
}

// ocfTranspose: (planes, y, x) in store order to (planes, x, y) with both increasing.
func TestOCFTranspose(t *testing.T) {
	h, w := 2, 3
	// store value = 10*y + x (store indices), two planes (+100 for the second)
	src := make([]float32, 2*h*w)
	for p := 0; p < 2; p++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				src[p*h*w+y*w+x] = float32(100*p + 10*y + x)
			}
		}
	}
	for _, c := range []struct{ yDesc, xDesc bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		dst := make([]float32, len(src))
		ocfTranspose(dst, src, 2, h, w, c.yDesc, c.xDesc)
		for p := 0; p < 2; p++ {
			for xi := 0; xi < w; xi++ {
				for yi := 0; yi < h; yi++ {
					sy, sx := yi, xi
					if c.yDesc {
						sy = h - 1 - yi
					}
					if c.xDesc {
						sx = w - 1 - xi
					}
					if got, want := dst[p*h*w+xi*h+yi], float32(100*p+10*sy+sx); got != want {
						t.Fatalf("%+v: [%d, %d, %d] = %v, want %v", c, p, xi, yi, got, want)
					}
				}
			}
		}
	}
}

func TestOCFCropCoords(t *testing.T) {
	out := make([]float64, 3)
	cropCoords([]float64{70, 60, 50, 40, 30}, 1, out) // store 60, 50, 40
	if out[0] != 40 || out[1] != 50 || out[2] != 60 {
		t.Fatalf("descending crop coordinates %v, want [40 50 60]", out)
	}
	cropCoords([]float64{0, 1, 2, 3}, 1, out)
	if out[0] != 1 || out[2] != 3 {
		t.Fatalf("ascending crop coordinates %v, want [1 2 3]", out)
	}
}
