package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/feed"
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
	dir := nowcastDir(t)
	flags.dataRoot = dir
	src, err := openSources(cfg, flags.sourceFlags, stream, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l, err := feed.Window{Start: 5, StartSet: true}.Layout(cfg, src)
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

// The start-up log says, per source, how many anchor times it rejects as t0 and why the first.
func TestRunSourcesLogRejections(t *testing.T) {
	dir := nowcastDir(t)
	cfg, err := config.Load("../../presets/nowcast.toml")
	if err != nil {
		t.Fatal(err)
	}
	flags := runFlags{config: "x.toml", ring: "r", memfd: -1, readers: 1, sourceFlags: sourceFlags{world: 1, dataRoot: dir}}
	stream, err := flags.check(nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	src, err := openSources(cfg, flags.sourceFlags, stream, zerolog.New(&buf).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	want := src.rejections
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m["message"] == "t0 rejections" {
			got = append(got, m)
		}
	}
	if len(got) != len(cfg.Sources) || len(want) != len(cfg.Sources) {
		t.Fatalf("%d rejection lines, %d rejections for %d sources:\n%s", len(got), len(want), len(cfg.Sources), buf.String())
	}
	for i, m := range got {
		if m["source"] != want[i].Field || m["name"] != cfg.Sources[i].Name || m["rejected_t0"] != float64(want[i].Count) || m["first"] != want[i].First {
			t.Errorf("line %d: %v, want %+v", i, m, want[i])
		}
	}
	// The satellite window (30 min before t0, 60 after) leaves the axis at 6 + 12 times.
	if want[0].Count != 18 || !strings.Contains(want[0].First, "leaves the time coordinate") {
		t.Errorf("satellite: %+v", want[0])
	}
}

// nowcastDir is the nowcast-ref dataset the sampler tests write ($GOBATCH_NOWCAST_DIR or their
// temporary copy); the test is skipped without one.
func nowcastDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GOBATCH_NOWCAST_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gobatch-sampler-nowcast-0.25d-64px") // sampler tests' data
	}
	if _, err := os.Stat(filepath.Join(dir, "nowcast.json")); err != nil {
		t.Skip("no nowcast-ref dataset (run the sampler tests, or set GOBATCH_NOWCAST_DIR)")
	}
	return dir
}
