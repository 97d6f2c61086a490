package ring

import (
	"strings"
	"testing"
)

// testCounters is a counter table of each kind and scope.
var testCounters = []CounterDef{
	{Name: "hits", Kind: CounterSum, Scope: ScopeJob},
	{Name: "decoded", Kind: CounterSum, Scope: ScopeSource},
	{Name: "resident_bytes", Kind: CounterGauge, Scope: ScopeJob},
}

// Counters add up across reports (several producer processes each add their deltas), per
// source apart from each other; gauges hold the last value; an attacher reads the same table.
func TestCounterTable(t *testing.T) {
	l := Layout{Slots: 2, Tensors: []Tensor{{Name: "x", DType: Uint8, Shape: []int{1, 8}}}, Counters: testCounters}
	mem := heapMem(l.SegmentBytes())
	r, err := Create(mem, l, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Counters() {
		for _, v := range c.Values {
			if v != 0 {
				t.Fatalf("fresh ring: %+v", c)
			}
		}
	}
	hits, dec, res := r.CounterIndex(testCounters[0]), r.CounterIndex(testCounters[1]), r.CounterIndex(testCounters[2])
	src := make([]uint64, MaxCounterSources)
	src[0], src[MaxCounterSources-1] = 24, 5
	for _, d := range [][3][]uint64{{{5}, src, {100}}, {{3}, src, {80}}} {
		r.UpdateCounter(hits, d[0])
		r.UpdateCounter(dec, d[1])
		r.UpdateCounter(res, d[2])
	}
	o, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Layout().Counters; len(got) != 3 || got[0] != testCounters[0] || got[1] != testCounters[1] || got[2] != testCounters[2] {
		t.Fatalf("attacher's table %+v, want %+v", got, testCounters)
	}
	if v := o.Counter("hits"); len(v) != 1 || v[0] != 8 {
		t.Errorf("hits %v, want [8]", v)
	}
	if v := o.Counter("resident_bytes"); len(v) != 1 || v[0] != 80 {
		t.Errorf("gauge %v, want the last value [80]", v)
	}
	v := o.Counter("decoded")
	if len(v) != MaxCounterSources || v[0] != 48 || v[MaxCounterSources-1] != 10 {
		t.Fatalf("per source %v, want 48 for source 0 and 10 for source %d", v, MaxCounterSources-1)
	}
	for i := 1; i < MaxCounterSources-1; i++ {
		if v[i] != 0 {
			t.Fatalf("source %d: %d, want 0", i, v[i])
		}
	}
	// The values lie one after another from value 0, as PROTOCOL.md 2.8 says.
	if got := le64(mem[offCounterValues:]); got != 8 {
		t.Errorf("value 0 = %d, want hits 8", got)
	}
	if got := le64(mem[offCounterValues+8*(1+MaxCounterSources):]); got != 80 {
		t.Errorf("value 33 = %d, want resident_bytes 80", got)
	}
	if s := o.Stats().String(); !strings.Contains(s, "counter decoded: [48 0 0") || !strings.Contains(s, "counter hits: 8\n") {
		t.Errorf("stat output does not show the counters:\n%s", s)
	}
	if r.CounterIndex(CounterDef{Name: "hits", Kind: CounterGauge}) != -1 || r.CounterIndex(CounterDef{Name: "other", Kind: CounterSum}) != -1 {
		t.Error("CounterIndex found a counter of another kind or name")
	}
}

func TestCounterTableValidate(t *testing.T) {
	base := Layout{Slots: 2, Tensors: []Tensor{{Name: "x", DType: Uint8, Shape: []int{1}}}}
	many := make([]CounterDef, MaxCounters+1)
	for i := range many {
		many[i] = CounterDef{Name: "c" + strings.Repeat("x", i%20) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Kind: CounterSum}
	}
	wide := make([]CounterDef, MaxCounterValues/MaxCounterSources+1)
	for i := range wide {
		wide[i] = CounterDef{Name: many[i].Name, Kind: CounterSum, Scope: ScopeSource}
	}
	for _, c := range []struct {
		defs []CounterDef
		want string
	}{
		{[]CounterDef{{Name: "", Kind: CounterSum}}, "counter 0: name"},
		{[]CounterDef{{Name: strings.Repeat("a", MaxCounterName+1), Kind: CounterSum}}, "want 1 to 23 bytes"},
		{[]CounterDef{{Name: "a-b", Kind: CounterSum}}, "[A-Za-z0-9_]"},
		{[]CounterDef{{Name: "a", Kind: CounterSum}, {Name: "a", Kind: CounterGauge}}, "used twice"},
		{[]CounterDef{{Name: "a"}}, "kind 0"},
		{[]CounterDef{{Name: "a", Kind: CounterSum, Scope: 7}}, "scope 7"},
		{many, "65 counters"},
		{wide, "values, want at most 768"},
	} {
		l := base
		l.Counters = c.defs
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Validate = %v, want %q", c.defs[0], err, c.want)
		}
	}
	l := base
	l.Counters = wide[:len(wide)-1]
	if err := l.Validate(); err != nil {
		t.Errorf("a table of exactly %d values: %v", MaxCounterValues, err)
	}
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
