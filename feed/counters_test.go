package feed

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// namedRing creates a named ring in a temporary shm.Dir with the job's counter table.
func namedRing(t *testing.T, name string) *Ring {
	t.Helper()
	old := shm.Dir
	shm.Dir = t.TempDir()
	t.Cleanup(func() { shm.Dir = old })
	l := ring.Layout{Slots: 2, TotalBatches: 1, Tensors: []ring.Tensor{{Name: "x", DType: ring.Uint8, Shape: []int{1}}}}
	r, err := CreateNamed(name, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Unlink(); r.Close() })
	return r
}

// Publish adds what a source counted since the last Publish (counters) and stores its levels
// (gauges); a ring attached by another process reads the same table and values.
func TestCountersPublish(t *testing.T) {
	r := namedRing(t, "counters")
	var st sampler.Stats
	st.Cache.Hits, st.Cache.Misses, st.Cache.ResidentBytes, st.Cache.BudgetBytes = 10, 4, 300, 1000
	st.ChunksDecoded[1], st.ChunksMissing[1] = 6, 2
	var c Counters
	c.Publish(r.R, st)
	st.Cache.Hits, st.Cache.ResidentBytes, st.SegmentsSum, st.Batches = 15, 200, 9, 3
	st.ChunksDecoded[1] = 8
	c.Publish(r.R, st)
	c.Publish(r.R, st) // nothing new
	seg, o, err := ring.AttachNamed(t.Context(), "counters", true)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	for name, want := range map[string]uint64{"cache_hits": 15, "cache_misses": 4, "cache_bytes": 200, "cache_budget_bytes": 1000,
		"segments_sum": 9, "segments_batches": 3} {
		if got := o.Counter(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %v, want [%d]", name, got, want)
		}
	}
	if d, m := o.Counter("chunks_decoded"), o.Counter("chunks_missing"); d[1] != 8 || m[1] != 2 || d[0] != 0 {
		t.Errorf("per source: decoded %v missing %v", d[:3], m[:3])
	}
}

// A counter added to the Go table alone (here a test-only registration) is published and
// shows up in the Python consumer's stats() under its name: neither libgobatch nor the Python
// package knows it. It needs the built library and the project's venv (make build).
func TestNewCounterReachesPython(t *testing.T) {
	py, _ := filepath.Abs("../.venv/bin/python")
	lib, _ := filepath.Abs("../build/libgobatch.so")
	pkg, _ := filepath.Abs("../python")
	for _, p := range []string{py, lib} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s: %v (run make build in a checkout with its venv)", p, err)
		}
	}
	saved := counters
	t.Cleanup(func() { counters = saved })
	counters = append(counters[:len(counters):len(counters)],
		sum("test_fills_seen", func(st sampler.Stats) uint64 { return st.Batches * 7 }),
		counter{ring.CounterDef{Name: "test_per_source", Kind: ring.CounterGauge, Scope: ring.ScopeSource},
			func(st sampler.Stats) []uint64 { return []uint64{1, 0, st.Batches} }})

	r := namedRing(t, "newcounter")
	var c Counters
	c.Publish(r.R, sampler.Stats{Batches: 6})
	cmd := exec.Command(py, "-c", `import gobatch, json, sys
with gobatch.attach("newcounter", timeout=5) as r:
    print(json.dumps(r.stats()))`)
	cmd.Env = append(os.Environ(), "GOBATCH_LIB="+lib, "PYTHONPATH="+pkg, "GOBATCH_SHM_DIR="+shm.Dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var stats map[string]any
	if err := json.Unmarshal(out, &stats); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if stats["test_fills_seen"] != 42.0 {
		t.Errorf("stats()[test_fills_seen] = %v, want 42: %s", stats["test_fills_seen"], out)
	}
	if got, _ := json.Marshal(stats["test_per_source"]); string(got) != "[1,0,6]" {
		t.Errorf("stats()[test_per_source] = %s, want [1,0,6]", got)
	}
	if stats["cache_hits"] != 0.0 || stats["cache_hit_rate"] != 0.0 {
		t.Errorf("the table's other counters: cache_hits %v, cache_hit_rate %v", stats["cache_hits"], stats["cache_hit_rate"])
	}
}
