package feed

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// A joiner of another build publishes only the counters the ring's table has under the same
// name, kind and scope, and leaves the others alone (PROTOCOL.md 2.5a).
func TestCountersPublishOnlyWhatTheRingHas(t *testing.T) {
	l := ring.Layout{Slots: 2, Tensors: []ring.Tensor{{Name: "x", DType: ring.Uint8, Shape: []int{1}}}, Counters: []ring.CounterDef{
		{Name: "cache_hits", Kind: ring.CounterSum}, {Name: "cache_misses", Kind: ring.CounterGauge}, {Name: "older_stat", Kind: ring.CounterSum},
	}}
	r, err := ring.Create(make([]byte, l.SegmentBytes()), l, false)
	if err != nil {
		t.Fatal(err)
	}
	var st sampler.Stats
	st.Cache.Hits, st.Cache.Misses = 5, 3
	var c Counters
	c.Publish(r, st)
	if h, m, o := r.Counter("cache_hits"), r.Counter("cache_misses"), r.Counter("older_stat"); h[0] != 5 || m[0] != 0 || o[0] != 0 {
		t.Errorf("cache_hits %v, cache_misses (a gauge in this ring) %v, older_stat %v; want 5, 0, 0", h, m, o)
	}
}

// A --join producer of this build refuses a ring of layout 1 (the fixed job counters of
// earlier builds), naming both versions, before it registers.
func TestJoinRefusesLayout1(t *testing.T) {
	r := namedRing(t, "old")
	binary.LittleEndian.PutUint32(r.Seg.Bytes()[8:], 1) // layout_version (PROTOCOL.md 2.1)
	_, err := JoinNamed("old", -1, r.Layout(), false, 1)
	if err == nil || !strings.Contains(err.Error(), "incompatible gobatch ring: layout_version 1 (0x1), this build reads 4") {
		t.Fatalf("join of a layout 1 ring: %v", err)
	}
	if n := len(r.R.Stats().Producers); n != 1 {
		t.Errorf("%d producer entries after the refused join, want the creator's alone", n)
	}
}
