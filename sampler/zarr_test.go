package sampler

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/readers/zarr"
)

// nowcastData returns a directory with a nowcast-ref dataset written by tools/gen_nowcast.py:
// $GOBATCH_NOWCAST_DIR, or one generated (once, kept in the temp dir) with the project's venv.
func nowcastData(t testing.TB, days string, pixels int) string {
	t.Helper()
	if d := os.Getenv("GOBATCH_NOWCAST_DIR"); d != "" {
		return d
	}
	py, _ := filepath.Abs("../.venv/bin/python")
	gen, _ := filepath.Abs("../tools/gen_nowcast.py")
	if _, err := os.Stat(py); err != nil {
		t.Skip("no .venv (make venv) and no GOBATCH_NOWCAST_DIR: cannot generate the dataset")
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("gobatch-sampler-nowcast-%sd-%dpx", days, pixels))
	cmd := exec.Command(py, gen, "--out", dir, "--days", days, "--pixels", fmt.Sprint(pixels), "--quiet")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen_nowcast: %v\n%s", err, out)
	}
	return dir
}

func loadPreset(t testing.TB, mutate func(*config.Config)) *config.Config {
	t.Helper()
	cfg, err := config.Load("../presets/nowcast.toml")
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

// TestPresetAgainstReadBox fills batches from the shipped preset and checks every example
// against a box read through the Zarr reader's own ReadBox with CF decoding (a different code
// path from the sampler's chunk cache and gather).
func TestPresetAgainstReadBox(t *testing.T) {
	dir := nowcastData(t, "0.25", 64)
	j, err := NewJob(loadPreset(t, nil), Options{DataRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	want := map[string][]int{
		"satellite": {32, 19, 12, 32, 32}, "nwp": {32, 4, 10, 8, 8}, "pv": {32, 19, 16},
		"t0": {32}, "x": {32}, "y": {32}, "pv_system": {32, 16},
	}
	for _, tn := range j.Tensors() {
		if fmt.Sprint(tn.Shape) != fmt.Sprint(want[tn.Name]) {
			t.Errorf("tensor %s shape %v, want %v", tn.Name, tn.Shape, want[tn.Name])
		}
	}
	sat, err := zarr.OpenArray(mustStore(t, filepath.Join(dir, "satellite.zarr")), "data")
	if err != nil {
		t.Fatal(err)
	}
	buf := batchBuf(j)
	box := make([]float32, 19*12*32*32)
	nan := 0
	for b := uint64(0); b < 2; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		got := bytesAsFloat32(buf[0])
		t0s := bytesAsInt64(buf[3])
		for e := 0; e < 32; e++ {
			t0, ti, cy, cx := j.Draw(b, e)
			if t0s[e] != t0 || t0 != 1609459200+int64(ti)*300 {
				t.Fatalf("t0 %d, draw %d, index %d", t0s[e], t0, ti)
			}
			if (e+int(b))%4 != 0 {
				continue // a quarter of the examples: ReadBox decodes without a cache
			}
			err := sat.ReadBoxFloat32([]int{ti - 6, 0, cy - 16, cx - 16}, []int{ti + 13, 12, cy + 16, cx + 16}, box, &zarr.ReadOptions{CF: true})
			if err != nil {
				t.Fatal(err)
			}
			sameFloats(t, fmt.Sprintf("batch %d example %d satellite", b, e), got[e*len(box):(e+1)*len(box)], box)
			for _, v := range box {
				if v != v {
					nan++
				}
			}
		}
		for i, v := range bytesAsFloat32(buf[1]) {
			if math.IsNaN(float64(v)) {
				t.Fatalf("nwp value %d is NaN", i)
			}
		}
	}
	t.Logf("%d NaN (fill) satellite values in 16 examples", nan)
}

func mustStore(t testing.TB, path string) zarr.Store {
	s, err := zarr.NewDirStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
