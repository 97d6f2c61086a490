package config

import (
	"flag"
	"fmt"
	"io"
	"strconv"
)

// Overrides are gobatch's own [batch] and [ring] options given outside the file: shmloader's
// flags (--batch-size, --seed, --order, --t0-start, --t0-end, --slots) and gobatch.Loader's
// keywords of the same names. They replace the file's values. An ocf-data-sampler YAML file cannot hold them (it must stay
// loadable by ocf-data-sampler, which refuses unknown keys), so for one --batch-size is
// required.
type Overrides struct {
	BatchSize int     // 0: the file's batch.size
	Seed      *uint64 // nil: the file's batch.seed
	Order     string  // "": the file's batch.order
	T0Start   string  // "": the file's batch.t0_start (ISO 8601)
	T0End     string  // "": the file's batch.t0_end
	Slots     int     // 0: the file's ring.slots
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
	fs.StringVar(&o.T0Start, "t0-start", "", "first t0, ISO 8601, included (replaces the file's batch.t0_start)")
	fs.StringVar(&o.T0End, "t0-end", "", "last t0, ISO 8601, included (replaces the file's batch.t0_end)")
	fs.IntVar(&o.Slots, "slots", 0, "batches the ring holds at once (replaces the file's ring.slots)")
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
	if o.T0Start != "" {
		a = append(a, "--t0-start", o.T0Start)
	}
	if o.T0End != "" {
		a = append(a, "--t0-end", o.T0End)
	}
	if o.Slots != 0 {
		a = append(a, "--slots", strconv.Itoa(o.Slots))
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
	if o.T0Start != "" {
		set("batch", "t0_start", o.T0Start)
	}
	if o.T0End != "" {
		set("batch", "t0_end", o.T0End)
	}
	if o.Slots != 0 {
		set("ring", "slots", int64(o.Slots))
	}
}
