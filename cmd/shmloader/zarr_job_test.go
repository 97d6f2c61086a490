package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
	"github.com/rs/zerolog"
)

func TestZarrJobLayoutAndFlags(t *testing.T) {
	cfg, err := config.Load("../../presets/nowcast.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !hasZarrSources(cfg) {
		t.Fatal("the preset has no zarr sources")
	}
	if _, err := newZarrJob(cfg, t.TempDir(), &zarrFlags{rank: 2, worldSize: 2}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "--rank 2") {
		t.Fatalf("rank 2 of 2: %v", err)
	}
	_, err = newZarrJob(cfg, t.TempDir(), &zarrFlags{worldSize: 1}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "source[0].store") {
		t.Fatalf("empty data root: %v", err)
	}
	dir := os.Getenv("GOBATCH_NOWCAST_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gobatch-sampler-nowcast-0.25d-64px") // sampler tests' data
	}
	if _, err := os.Stat(filepath.Join(dir, "nowcast.json")); err != nil {
		t.Skip("no nowcast-ref dataset (run the sampler tests, or set GOBATCH_NOWCAST_DIR)")
	}
	j, err := newZarrJob(cfg, dir, &zarrFlags{worldSize: 1}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l, err := j.layout(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range l.Tensors {
		names = append(names, tn.Name)
	}
	if got := strings.Join(names, ","); got != "satellite,nwp,pv,t0,x,y,pv_system" || l.StartBatch != 5 || l.BatchSize != 32 {
		t.Fatalf("layout %s start %d size %d", got, l.StartBatch, l.BatchSize)
	}
}
