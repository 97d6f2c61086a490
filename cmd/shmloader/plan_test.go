package main

import (
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/internal/s3test"
	"github.com/gobatch/gobatch/sampler"
)

func TestPlanSynthetic(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(oneSource[:strings.Index(oneSource, "batches")]+"[ring]\nslots = 3\n"+oneSource[strings.Index(oneSource, "[[source]]"):]), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := makePlan(cfg, sourceFlags{world: 1}, sampler.Stream{WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].Kind != "synthetic" || rep.Sources[0].Field != "source[0]" ||
		rep.BatchBytes != 2*3*4 || rep.RingSlots != 3 || rep.Mode != "" || rep.Order != config.OrderStream {
		t.Fatalf("%+v", rep)
	}
	text := rep.text()
	for _, want := range []string{"source[0] x: synthetic", "batch 24 B in 1 tensor", "x            int32 [2 3] 24 B", "ring 3 slots"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
}

func TestPlanNowcast(t *testing.T) {
	dir := nowcastDir(t)
	cfg, err := config.Load("../../presets/nowcast.toml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := makePlan(cfg, sourceFlags{dataRoot: dir, world: 1, cacheMB: 64}, sampler.Stream{WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 3 || strings.Join(rep.Sources[0].Dims, ",") != "time,channel,y,x" || rep.Sources[0].WindowSteps != 19 ||
		rep.Candidates < 1 || rep.CacheBytes != 64<<20 || rep.Mode != sampler.SampleRandom {
		t.Fatalf("%+v", rep)
	}
	if text := rep.text(); !strings.Contains(text, "random sampling") || !strings.Contains(text, "t0 candidates") ||
		!strings.Contains(text, "source[0] (satellite) rejects 18: at t0 ") || !strings.Contains(text, "source[2] (pv) rejects ") {
		t.Fatalf("plan text:\n%s", text)
	}
	if len(rep.Rejections) != 3 || rep.Rejections[1].Field != "source[1]" || rep.Rejections[1].Name != "nwp" {
		t.Fatalf("rejections %+v", rep.Rejections)
	}
	if _, err := makePlan(cfg, sourceFlags{dataRoot: t.TempDir(), world: 1}, sampler.Stream{WorldSize: 1}); err == nil || !strings.Contains(err.Error(), "source[0].store") {
		t.Fatalf("empty data root: %v", err)
	}
}

// TestPlanRemote plans the preset over the nowcast-ref stores served by a real S3 server
// (data root s3://nowcast): the report equals the one from disk but for the store names.
func TestPlanRemote(t *testing.T) {
	dir := nowcastDir(t)
	s := s3test.Serve(t, map[string]string{"nowcast": dir})
	s3test.SetEnv(t, s.URL)
	cfg, err := config.Load("../../presets/nowcast.toml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := makePlan(cfg, sourceFlags{dataRoot: dir, world: 1, cacheMB: 64}, sampler.Stream{WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := makePlan(cfg, sourceFlags{dataRoot: "s3://nowcast", world: 1, cacheMB: 64}, sampler.Stream{WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Sources {
		if !strings.HasPrefix(got.Sources[i].Store, "s3://nowcast/") {
			t.Fatalf("source %d store %q", i, got.Sources[i].Store)
		}
		got.Sources[i].Store = want.Sources[i].Store
	}
	got.DataRoot = want.DataRoot
	if g, w := got.text(), want.text(); g != w {
		t.Fatalf("plan over S3:\n%s\nwant (from disk):\n%s", g, w)
	}
}
