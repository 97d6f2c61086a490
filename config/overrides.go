package config

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Overrides are gobatch's own [batch] and [ring] options, and the anchor source's
// segment_steps, given outside the file: shmloader's flags (--batch-size, --seed, --order, --drop-last,
// --t0-start, --t0-end, --slots, --segment-steps, --resident-segments) and gobatch.Loader's keywords of the same
// names (Spell). They replace the file's values. An ocf-data-sampler YAML file cannot hold them (it must stay
// loadable by ocf-data-sampler, which refuses unknown keys), so for one --batch-size is
// required.
type Overrides struct {
	BatchSize int     // 0: the file's batch.size
	Seed      *uint64 // nil: the file's batch.seed
	Order     string  // "": the file's batch.order
	DropLast  *bool   // nil: the file's batch.drop_last
	// Concurrent: batch.concurrent = true (every batch one t0 with every location); false:
	// the file's.
	Concurrent bool
	T0Start    string // "": the file's batch.t0_start (ISO 8601)
	T0End      string // "": the file's batch.t0_end
	// TimePeriods ("START/END", either side empty for an open end): the file's
	// batch.time_periods. Any of T0Start, T0End and TimePeriods replaces the file's t0
	// restriction as a whole.
	TimePeriods []string
	Slots       int // 0: the file's ring.slots
	// SegmentSteps: 0: the anchor source's segment_steps (locality sampling's and the epochs'
	// block shuffle's time steps per segment).
	SegmentSteps int
	// ResidentSegments: 0: the anchor source's resident_segments (the segments locality
	// sampling keeps, and the epochs' block shuffle mixes, at once).
	ResidentSegments int
}

// AddFlags registers the overrides' flags on fs.
func (o *Overrides) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.BatchSize, "batch-size", 0, "examples per batch (replaces the file's batch.size; required for an ocf-data-sampler YAML file)")
	fs.Func("seed", "the stream's seed `N` (replaces the file's batch.seed)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		o.Seed = &v
		return nil
	})
	fs.StringVar(&o.Order, "order", "", `"stream" or "epochs" (replaces the file's batch.order)`)
	fs.Func("drop-last", "with epochs, `BOOL` true (default) drops the last incomplete batch of each epoch, false completes it with the epoch's first samples (replaces the file's batch.drop_last)", func(s string) error {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		o.DropLast = &v
		return nil
	})
	fs.BoolVar(&o.Concurrent, "concurrent", false, "every batch is one t0 with every location, as PVNetConcurrentDataset's samples (sets batch.concurrent; the batch size is then the number of locations)")
	fs.StringVar(&o.T0Start, "t0-start", "", "first t0, ISO 8601, included (replaces the file's batch.t0_start)")
	fs.StringVar(&o.T0End, "t0-end", "", "last t0, ISO 8601, included (replaces the file's batch.t0_end)")
	fs.Func("time-period", "a range `START/END` of t0s, ISO 8601, both included, either side empty for an open end (repeatable: a t0 in any; replaces the file's batch.time_periods, t0_start and t0_end)", func(v string) error {
		if !strings.Contains(v, "/") {
			return fmt.Errorf("%q: want START/END", v)
		}
		o.TimePeriods = append(o.TimePeriods, v)
		return nil
	})
	fs.IntVar(&o.Slots, "slots", 0, "batches the ring holds at once (replaces the file's ring.slots)")
	fs.IntVar(&o.SegmentSteps, "segment-steps", 0, "anchor time steps per segment of locality sampling and of the epochs' block shuffle (replaces the anchor source's segment_steps)")
	fs.IntVar(&o.ResidentSegments, "resident-segments", 0, "segments locality sampling keeps and the epochs' block shuffle mixes at once; more than the cache holds mixes more, at the cost of decoding chunks again (replaces the anchor source's resident_segments)")
}

// Args is the overrides as the flags that give them, in a fixed order: the canonical form two
// processes compare (a node loader and a rank must produce the same stream).
func (o Overrides) Args() []string {
	var a []string
	if o.BatchSize != 0 {
		a = append(a, "--batch-size", strconv.Itoa(o.BatchSize))
	}
	if o.Seed != nil {
		a = append(a, "--seed", strconv.FormatUint(*o.Seed, 10))
	}
	if o.Order != "" {
		a = append(a, "--order", o.Order)
	}
	if o.DropLast != nil {
		a = append(a, "--drop-last", strconv.FormatBool(*o.DropLast))
	}
	if o.Concurrent {
		a = append(a, "--concurrent")
	}
	if o.T0Start != "" {
		a = append(a, "--t0-start", o.T0Start)
	}
	if o.T0End != "" {
		a = append(a, "--t0-end", o.T0End)
	}
	for _, p := range o.TimePeriods {
		a = append(a, "--time-period", p)
	}
	if o.Slots != 0 {
		a = append(a, "--slots", strconv.Itoa(o.Slots))
	}
	if o.SegmentSteps != 0 {
		a = append(a, "--segment-steps", strconv.Itoa(o.SegmentSteps))
	}
	if o.ResidentSegments != 0 {
		a = append(a, "--resident-segments", strconv.Itoa(o.ResidentSegments))
	}
	return a
}

// ParseArgs reads overrides from flags (Args' form, or any order), refusing any other flag.
func ParseArgs(args []string) (Overrides, error) {
	var o Overrides
	fs := flag.NewFlagSet("batch options", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Overrides{}, err
	}
	if fs.NArg() > 0 {
		return Overrides{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}

// apply writes the overrides into the decoded file's [batch] and [ring] tables.
func (o Overrides) apply(raw map[string]any) {
	set := func(table, k string, v any) {
		t, ok := raw[table].(map[string]any)
		if !ok {
			t = map[string]any{}
			raw[table] = t
		}
		t[k] = v
	}
	if o.BatchSize != 0 {
		set("batch", "size", int64(o.BatchSize))
	}
	if o.Seed != nil {
		set("batch", "seed", int64(*o.Seed))
	}
	if o.Order != "" {
		set("batch", "order", o.Order)
	}
	if o.DropLast != nil {
		set("batch", "drop_last", *o.DropLast)
	}
	if o.Concurrent {
		set("batch", "concurrent", true)
	}
	if o.T0Start != "" || o.T0End != "" || len(o.TimePeriods) > 0 {
		if b, ok := raw["batch"].(map[string]any); ok { // the file's restriction, replaced whole
			delete(b, "t0_start")
			delete(b, "t0_end")
			delete(b, "time_periods")
		}
	}
	if o.T0Start != "" {
		set("batch", "t0_start", o.T0Start)
	}
	if o.T0End != "" {
		set("batch", "t0_end", o.T0End)
	}
	if len(o.TimePeriods) > 0 {
		list := make([]any, len(o.TimePeriods))
		for i, p := range o.TimePeriods {
			s, e, _ := strings.Cut(p, "/")
			list[i] = []any{s, e}
		}
		set("batch", "time_periods", list)
	}
	if o.Slots != 0 {
		set("ring", "slots", int64(o.Slots))
	}
	for key, v := range map[string]int{"segment_steps": o.SegmentSteps, "resident_segments": o.ResidentSegments} {
		if v == 0 {
			continue
		}
		for _, src := range sourceTables(raw) {
			if anchor, _ := src["anchor"].(bool); anchor {
				src[key] = int64(v)
			}
		}
	}
}

// sourceTables returns the decoded file's [[source]] tables.
func sourceTables(raw map[string]any) []map[string]any {
	var out []map[string]any
	switch list := raw["source"].(type) {
	case []map[string]any:
		out = list
	case []any:
		for _, v := range list {
			if t, ok := v.(map[string]any); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// spellings: how a setting is given through each interface: gobatch.Loader's keyword,
// shmloader's flag, and the key of a TOML (or JSON) configuration. An ocf-data-sampler YAML
// holds none of gobatch's own settings (ocf-data-sampler refuses unknown keys): its users give
// them as keywords or flags.
var spellings = map[string][3]string{
	"batch_size":        {"batch_size=", "--batch-size", "[batch] size"},
	"seed":              {"seed=", "--seed", "[batch] seed"},
	"order":             {"order=", "--order", "[batch] order"},
	"drop_last":         {"drop_last=", "--drop-last", "[batch] drop_last"},
	"concurrent":        {"concurrent=", "--concurrent", "[batch] concurrent"},
	"t0_start":          {"t0_start=", "--t0-start", "[batch] t0_start"},
	"t0_end":            {"t0_end=", "--t0-end", "[batch] t0_end"},
	"time_periods":      {"time_periods=", "--time-period", "[batch] time_periods"},
	"slots":             {"slots=", "--slots", "[ring] slots"},
	"cache_mb":          {"cache_mb=", "--cache-mb", "the anchor source's cache_mb"},
	"segment_steps":     {"segment_steps=", "--segment-steps", "the anchor source's segment_steps"},
	"resident_segments": {"resident_segments=", "--resident-segments", "the anchor source's resident_segments"},
}

// Spell names setting the way each interface spells it, for messages that tell a user to
// change it: "slots (slots=, --slots, [ring] slots)". A setting without other spellings is
// returned as it is.
func Spell(setting string) string {
	s, ok := spellings[setting]
	if !ok {
		return setting
	}
	return fmt.Sprintf("%s (%s, %s, %s)", setting, s[0], s[1], s[2])
}
