package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
)

func TestRunSourcesLayoutAndFlags(t *testing.T) {
	cfg, err := config.Load("../../presets/nowcast.toml")
	if err != nil {
		t.Fatal(err)
	}
	flags := runFlags{config: "x.toml", ring: "r", memfd: -1, readers: 1, sourceFlags: sourceFlags{rank: 2, world: 2}}
	if _, err := flags.check(nil); err == nil || !strings.Contains(err.Error(), "--rank 2") {
		t.Fatalf("rank 2 of 2: %v", err)
	}
	flags.rank, flags.world, flags.cacheMB = 0, 1, 8
	if _, err := flags.check(nil); err == nil || !strings.Contains(err.Error(), "--cache-mb: 8 MiB is out of range") {
		t.Fatalf("--cache-mb 8: %v", err)
	}
	flags.cacheMB = 0
	stream, err := flags.check(nil)
	if err != nil {
		t.Fatal(err)
	}
	flags.dataRoot = t.TempDir()
	if _, err = openSources(cfg, flags.sourceFlags, stream, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "source[0].store") {
		t.Fatalf("empty data root: %v", err)
	}
	dir := os.Getenv("GOBATCH_NOWCAST_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gobatch-sampler-nowcast-0.25d-64px") // sampler tests' data
	}
	if _, err := os.Stat(filepath.Join(dir, "nowcast.json")); err != nil {
		t.Skip("no nowcast-ref dataset (run the sampler tests, or set GOBATCH_NOWCAST_DIR)")
	}
	flags.dataRoot = dir
	src, err := openSources(cfg, flags.sourceFlags, stream, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l, err := layoutFor(cfg, src.Tensors(), 5)
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
