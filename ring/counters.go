package ring

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
)

// CounterKind says how producer processes combine their figures in a counter's values
// (PROTOCOL.md 2.5a).
type CounterKind uint16

// Counter kinds.
const (
	CounterSum   CounterKind = 1 // a count: each producer adds what it counted since its last report
	CounterGauge CounterKind = 2 // a level: stored, last writer wins
)

// CounterScope says what one value of a counter stands for.
type CounterScope uint16

// Counter scopes.
const (
	ScopeJob    CounterScope = 0 // one value for the whole job
	ScopeSource CounterScope = 1 // MaxCounterSources values, value i for the configuration's source[i]
)

// CounterDef is one entry of a ring's counter table (PROTOCOL.md 2.8): a statistic a
// consumer shows under Name without knowing it in advance.
type CounterDef struct {
	Name  string // 1 to MaxCounterName bytes of [A-Za-z0-9_]
	Kind  CounterKind
	Scope CounterScope
}

// Width is the number of values the entry has.
func (d CounterDef) Width() int {
	if d.Scope == ScopeSource {
		return MaxCounterSources
	}
	return 1
}

// CounterValues is one counter of a ring with its values (one, or one per source).
type CounterValues struct {
	CounterDef
	Values []uint64
}

// validateCounters checks a counter table against PROTOCOL.md 2.8, naming the entry at fault.
func validateCounters(defs []CounterDef) error {
	if len(defs) > MaxCounters {
		return fmt.Errorf("%d counters, want at most %d", len(defs), MaxCounters)
	}
	seen := make(map[string]bool, len(defs))
	values := 0
	for i, d := range defs {
		if err := ValidateTensorName(d.Name); err != nil || len(d.Name) > MaxCounterName {
			return fmt.Errorf("counter %d: name %q: want 1 to %d bytes of [A-Za-z0-9_]", i, d.Name, MaxCounterName)
		}
		if seen[d.Name] {
			return fmt.Errorf("counter %d: name %q used twice", i, d.Name)
		}
		seen[d.Name] = true
		if d.Kind != CounterSum && d.Kind != CounterGauge {
			return fmt.Errorf("counter %q: kind %d, want %d (counter) or %d (gauge)", d.Name, d.Kind, CounterSum, CounterGauge)
		}
		if d.Scope != ScopeJob && d.Scope != ScopeSource {
			return fmt.Errorf("counter %q: scope %d, want %d (job) or %d (per source)", d.Name, d.Scope, ScopeJob, ScopeSource)
		}
		values += d.Width()
	}
	if values > MaxCounterValues {
		return fmt.Errorf("the counters have %d values, want at most %d", values, MaxCounterValues)
	}
	return nil
}

// counterFirsts returns the index of each entry's first value: one after another from 0.
func counterFirsts(defs []CounterDef) []int {
	out, first := make([]int, len(defs)), 0
	for k, d := range defs {
		out[k] = first
		first += d.Width()
	}
	return out
}

func counterEntry(k int) uint64 { return offCounterTable + uint64(k)*counterStride }

// writeCounterTable writes the table of l (validated) for Create, before READY: the entries'
// values lie one after another from value 0.
func (r *Ring) writeCounterTable(defs []CounterDef) {
	*r.u32(offCounterCount) = uint32(len(defs))
	for k, d := range defs {
		e := counterEntry(k)
		copy(r.mem[e+cdName:e+cdName+CounterNameBytes], d.Name)
		*r.u16(e + cdKind) = uint16(d.Kind)
		*r.u16(e + cdScope) = uint16(d.Scope)
		*r.u16(e + cdWidth) = uint16(d.Width())
		*r.u16(e + cdFirst) = uint16(r.counterFirst[k])
	}
}

// readCounterTable reads and checks the counter table of an attached ring (PROTOCOL.md 3.6
// step 4), naming the entry at fault.
func (r *Ring) readCounterTable() ([]CounterDef, error) {
	n := *r.u32(offCounterCount)
	if n > MaxCounters {
		return nil, headerErr("counter_count", "%d, want at most %d", n, MaxCounters)
	}
	defs := make([]CounterDef, n)
	next := 0
	for k := range defs {
		e := counterEntry(k)
		raw := r.mem[e+cdName : e+cdName+CounterNameBytes]
		name, _, _ := strings.Cut(string(raw), "\x00")
		if strings.Trim(string(raw[len(name):]), "\x00") != "" {
			return nil, headerErr(fmt.Sprintf("counter[%d].name", k), "padding is not NUL")
		}
		d := CounterDef{Name: name, Kind: CounterKind(*r.u16(e + cdKind)), Scope: CounterScope(*r.u16(e + cdScope))}
		if err := validateCounters(append(defs[:k:k], d)); err != nil {
			return nil, headerErr(fmt.Sprintf("counter[%d]", k), "%v", err)
		}
		if w, f := int(*r.u16(e + cdWidth)), int(*r.u16(e + cdFirst)); w != d.Width() || f != next {
			return nil, headerErr(fmt.Sprintf("counter[%d]", k), "%q: width %d first %d, want %d and %d", name, w, f, d.Width(), next)
		}
		defs[k] = d
		next += d.Width()
	}
	return defs, nil
}

// CounterIndex returns the position of the counter named def.Name in the ring's table, or
// -1 when the ring has no such counter of def's kind and scope (a ring made by another
// build: PROTOCOL.md 2.5a).
func (r *Ring) CounterIndex(def CounterDef) int {
	for k, d := range r.layout.Counters {
		if d == def {
			return k
		}
	}
	return -1
}

// counterValue returns value v of entry k.
func (r *Ring) counterValue(k, v int) *uint64 {
	return r.u64(offCounterValues + 8*uint64(r.counterFirst[k]+v))
}

// UpdateCounter adds values (a counter: what this process counted since its last update) to
// entry k of the table (CounterIndex), or stores them (a gauge). Values beyond the entry's
// width are ignored; a zero addition touches nothing.
func (r *Ring) UpdateCounter(k int, values []uint64) {
	defer r.recoverFault(debug.SetPanicOnFault(true), nil)
	d := r.layout.Counters[k]
	for v := 0; v < min(len(values), d.Width()); v++ {
		switch {
		case d.Kind == CounterGauge:
			atomic.StoreUint64(r.counterValue(k, v), values[v])
		case values[v] != 0:
			atomic.AddUint64(r.counterValue(k, v), values[v])
		}
	}
}

// Counters reads every counter of the table (PROTOCOL.md 2.8).
func (r *Ring) Counters() (out []CounterValues) {
	defer r.recoverFault(debug.SetPanicOnFault(true), nil)
	for k, d := range r.layout.Counters {
		c := CounterValues{CounterDef: d, Values: make([]uint64, d.Width())}
		for v := range c.Values {
			c.Values[v] = atomic.LoadUint64(r.counterValue(k, v))
		}
		out = append(out, c)
	}
	return out
}

// Counter returns the values of the counter named name (nil when the ring has none).
func (r *Ring) Counter(name string) []uint64 {
	for _, c := range r.Counters() {
		if c.Name == name {
			return c.Values
		}
	}
	return nil
}
