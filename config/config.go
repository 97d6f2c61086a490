package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/gobatch/gobatch/ring"
)

// Config is a validated configuration.
type Config struct {
	File string // the file it was read from
	// BaseDir is what relative store paths are resolved against when no data root is given:
	// the file's directory, or for an ocf-data-sampler YAML file the working directory, as
	// ocf-data-sampler resolves them.
	BaseDir string
	// SHA256 is the hex sha256 of the bytes parsed: a node loader refuses a rank whose
	// configuration's differs.
	SHA256  string
	Batch   Batch
	Ring    Ring
	Node    Node
	Sources []Source

	lines   lineIndex    // where each field is written in File
	aliases fieldAliases // how File names gobatch's fields, where it names them otherwise
	secrets []Secret     // values taken from the environment, never shown (Redact)
}

// Redact is s with every value the configuration took from the environment replaced by its
// variable's reference (${NAME}): for every message, log line and plan that may quote such a
// value (a store path built from one, say). Errorf redacts its message already.
func (c *Config) Redact(s string) string { return redact(s, c.secrets) }

// Errorf returns a problem with field ("source[2].store") found after parsing, for instance
// while a source opens its data: the file, the field's line in it (0 when unknown) and the
// message, like the parser's own errors.
func (c *Config) Errorf(field, format string, args ...any) *FieldError {
	return &FieldError{File: c.File, Line: c.lines.find(field), Field: c.aliases.name(field), Msg: c.Redact(fmt.Sprintf(format, args...))}
}

// Batch is the [batch] table.
type Batch struct {
	Size    int    // examples per batch, >= 1; 0 with Concurrent: the number of locations
	Seed    uint64 // the stream is a pure function of (config, seed)
	Batches uint64 // batches in the stream; 0 = unbounded
	Order   string // OrderStream (default) or OrderEpochs
	// KeepLast ([batch] drop_last = false), with epochs: the last batch of an epoch is
	// completed by the epoch's first samples again (DistributedSampler's padding), so that
	// every sample is in the epoch (a validation pass); false (drop_last = true, the default):
	// an epoch is the whole batches of its samples, the rest dropped, as DataLoader's
	// drop_last.
	KeepLast bool
	// Concurrent ([batch] concurrent = true): every batch is one t0 with every location, in
	// location order (ocf-data-sampler's PVNetConcurrentDataset); the order draws t0s, and
	// the batch size is the number of locations (size may be left out).
	Concurrent bool
	// Periods restrict the t0 of the examples, for train/validation splits: a t0 in any of
	// them ([batch] time_periods, as ocf-data-sampler's and PVNet's time_periods; or t0_start
	// .. t0_end, one period); nil: every t0.
	Periods []Period
	// PeriodsKey is the key the periods come from: "time_periods", "t0_start" (with or without
	// t0_end) or "t0_end"; "" without periods.
	PeriodsKey string
}

// Period is a range of t0s (ISO 8601 times), both ends included; a nil end is open.
type Period struct{ Start, End *time.Time }

// Batch orders ([batch] order).
const (
	// OrderStream: every example is drawn independently from the whole sample space; the
	// stream has no epochs (today's endless stream).
	OrderStream = "stream"
	// OrderEpochs: the stream is a sequence of epochs, each a seeded permutation of the whole
	// sample space, every sample once (package sampler, epochs.go).
	OrderEpochs = "epochs"
)

// Ring is the [ring] table.
type Ring struct {
	Slots int // batches in flight, 1..MaxSlots (default 4)
}

// Node is the [node] table: how `shmloader serve`, one loader feeding every local rank of a
// node, treats its ranks.
type Node struct {
	// OnRankDeath is what the node loader does when a rank's process dies with its ring open:
	// RankDeathStop (default) fails every rank's ring, RankDeathContinue stops that rank's ring
	// and serves the others.
	OnRankDeath string
}

// [node] on_rank_death values.
const (
	// RankDeathStop: every rank gets an error naming the dead one (torchrun restarts the whole
	// group anyway).
	RankDeathStop = "stop"
	// RankDeathContinue: the dead rank's ring stops; the others go on.
	RankDeathContinue = "continue"
)

// Source is one [[source]] table: a tensor of every batch.
type Source struct {
	Index int    // position in the file, 0-based
	Name  string // tensor name: ring.TensorNameRule, unique
	Kind  string // a registered kind
	Spec  Spec   // the kind's decoded keys
}

// Spec is the kind-specific part of a source, as returned by a Kind's decoder.
type Spec interface {
	// Example is the shape of one example and its element type; the source's tensor in a batch
	// has shape [batch.size, shape...].
	Example() (shape []int, dtype ring.DType)
}

// Tensor is the tensor a source contributes to each batch.
type Tensor struct {
	Name  string
	DType ring.DType
	Shape []int // [batch.size, example shape...]
}

// NBytes is the tensor's size in bytes, by the ring's rule (product(shape) x itemsize).
func (t Tensor) NBytes() int64 { return t.Ring().Nbytes() }

// Ring is the tensor as a ring layout describes it.
func (t Tensor) Ring() ring.Tensor { return ring.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape} }

// Tensors lists the tensors of a batch in source order.
func (c *Config) Tensors() []Tensor {
	out := make([]Tensor, len(c.Sources))
	for i, s := range c.Sources {
		shape, dt := s.Spec.Example()
		out[i] = Tensor{Name: s.Name, DType: dt, Shape: append([]int{c.Batch.Size}, shape...)}
	}
	return out
}

// Limits of docs/PROTOCOL.md, as the ring declares them (the only declaration).
const (
	MaxSlots    = ring.MaxSlots
	MaxSources  = ring.MaxTensors  // tensor_count
	MaxExampleD = ring.MaxDims - 1 // ndim <= MaxDims including the batch dimension
	MaxNameLen  = ring.MaxTensorName
	// MaxBatchBytes bounds one batch (all tensors) so that size arithmetic cannot overflow;
	// far beyond any shared-memory segment.
	MaxBatchBytes = 1 << 40
	DefaultSlots  = 4
)

// A Kind decodes the keys of a source table other than name and kind. It reads them through t,
// records problems with t.Errorf (or the getters do), and returns nil if the source is unusable.
// The parser reports keys the decoder did not read as unknown.
type Kind func(t *Table) Spec

var (
	kindsMu sync.Mutex
	kinds   = map[string]Kind{}
)

// RegisterKind makes a source kind known. It panics if name is already registered (a
// programming error: kinds register from init functions).
func RegisterKind(name string, k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[name]; dup {
		panic("config: source kind " + name + " registered twice")
	}
	kinds[name] = k
}

func lookupKind(name string) (Kind, []string) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return kinds[name], names
}

// Format is a configuration syntax.
type Format int

const (
	TOML Format = iota
	JSON
	// foreignFormats and above: a registered foreign format (foreign.go), by registration order.
	foreignFormats
)

// FormatOf picks the format from a file name: JSON for ".json", a foreign format registered
// for its extension (RegisterForeign), TOML otherwise.
func FormatOf(path string) Format {
	ext := strings.ToLower(filepath.Ext(path))
	if ext == ".json" {
		return JSON
	}
	if f, ok := foreignByExt(ext); ok {
		return f
	}
	return TOML
}

// StdinName names a configuration read from stdin in errors: the dict gobatch.Loader and
// gobatch.plan serialise there.
const StdinName = "<config dict>"

// Read loads the configuration at path, or with path "-" the JSON document read from stdin
// (named StdinName in errors), with gobatch's options o given outside the file: shmloader's
// --config and its batch flags.
func Read(path string, stdin io.Reader, o Overrides) (*Config, error) {
	if path != "-" {
		return LoadWith(path, o)
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("read config from stdin: %w", err)
	}
	return ParseWith(StdinName, data, JSON, o)
}

// Load reads and validates the configuration file at path. A problem with the contents is
// returned as Errors; a file that cannot be read as a *os.PathError.
func Load(path string) (*Config, error) { return LoadWith(path, Overrides{}) }

// LoadWith is Load with gobatch's options given outside the file.
func LoadWith(path string, o Overrides) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseWith(path, data, FormatOf(path), o)
}

// Parse validates the configuration in data; file names it in error messages.
func Parse(file string, data []byte, format Format) (*Config, error) {
	return ParseWith(file, data, format, Overrides{})
}

// LoadIn is LoadWith for a process whose working directory is not the one the file's
// relative paths mean (a sharing node loader opening a rank's configuration): wd stands for
// it where a format resolves store paths from the working directory.
func LoadIn(path string, o Overrides, wd string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(path, data, FormatOf(path), o, wd)
}

// ParseWith is Parse with gobatch's options given outside the file.
func ParseWith(file string, data []byte, format Format, o Overrides) (*Config, error) {
	return parse(file, data, format, o, "")
}

// parse is ParseWith with the working directory wd ("": this process's).
func parse(file string, data []byte, format Format, o Overrides, wd string) (*Config, error) {
	c := &collector{file: file}
	var raw map[string]any
	base := filepath.Dir(file)
	switch f, foreign := foreignOf(format); {
	case format == JSON:
		raw = decodeJSON(c, data)
	case foreign:
		raw = decodeForeign(c, f, data)
		if wd == "" {
			wd, _ = os.Getwd()
		}
		if wd != "" && f.PathsFromWorkingDir {
			base = wd
		}
		if raw != nil && o.BatchSize == 0 && !o.Concurrent {
			c.add("batch.size", "missing; %s cannot hold it: expected --batch-size N (shmloader) or batch_size=N (gobatch.Loader)", f.What)
			return nil, c.err()
		}
	default:
		raw = decodeTOML(c, data)
	}
	if raw == nil {
		return nil, c.err()
	}
	o.apply(raw)
	cfg := build(newTable("", raw, c))
	sum := sha256.Sum256(data)
	cfg.File, cfg.BaseDir, cfg.SHA256, cfg.lines, cfg.aliases, cfg.secrets = file, base, hex.EncodeToString(sum[:]), c.lines, c.aliases, c.secrets
	if err := c.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func decodeTOML(c *collector, data []byte) map[string]any {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			c.errs = append(c.errs, &FieldError{File: c.file, Line: pe.Position.Line,
				Msg: "TOML syntax error: " + pe.Message})
		} else {
			c.errs = append(c.errs, &FieldError{File: c.file, Msg: "TOML: " + err.Error()})
		}
		return nil
	}
	c.lines = tomlLines(data)
	return raw
}

func decodeJSON(c *collector, data []byte) map[string]any {
	lines, dups, err := jsonLines(data)
	if err != nil {
		line := 0
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = lineAt(data, int(se.Offset))
		}
		c.errs = append(c.errs, &FieldError{File: c.file, Line: line, Msg: "JSON syntax error: " + err.Error()})
		return nil
	}
	c.lines = lines
	for _, d := range dups {
		c.add(d, "duplicate key")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil { // jsonLines accepted it, so this does not fail
		c.add("", "JSON: %v", err)
		return nil
	}
	raw, ok := v.(map[string]any)
	if !ok {
		c.errs = append(c.errs, &FieldError{File: c.file, Line: 1,
			Msg: "expected a JSON object at the top level, got " + describe(v)})
		return nil
	}
	return raw
}

func build(top *Table) *Config {
	cfg := &Config{}
	if b := top.Sub("batch"); b != nil {
		cfg.Batch.Size = int(b.Int("size", 0, 1, math.MaxUint32)) // 0 with concurrent: the job's number of locations
		cfg.Batch.Seed = uint64(b.Int("seed", 0, 0, math.MaxInt64))
		cfg.Batch.Batches = uint64(b.Int("batches", 0, 0, math.MaxInt64))
		cfg.Batch.Periods, cfg.Batch.PeriodsKey = buildPeriods(b)
		cfg.Batch.Order = buildOrder(b, cfg.Batch.Batches)
		if cfg.Batch.KeepLast = !b.Bool("drop_last", true); cfg.Batch.KeepLast && cfg.Batch.Order != OrderEpochs {
			b.Errorf("drop_last", "false with order = %q: only an epoch has a last batch; expected order = %q", cfg.Batch.Order, OrderEpochs)
		}
		if cfg.Batch.Concurrent = b.Bool("concurrent", false); !cfg.Batch.Concurrent && !b.Has("size") {
			b.missing("size", "an integer"+rangeText(1, math.MaxUint32))
		}
		b.Done()
	} else if !top.Has("batch") {
		top.Errorf("batch", "missing required table [batch]; expected at least size = N")
	}
	cfg.Ring.Slots = DefaultSlots
	if r := top.Sub("ring"); r != nil {
		// Two slots at least: a training loop holds the batch it works on while it asks for
		// the next, so a ring of one slot would stop at the second batch.
		cfg.Ring.Slots = int(r.Int("slots", DefaultSlots, 2, MaxSlots))
		r.Done()
	}
	cfg.Node.OnRankDeath = RankDeathStop
	if n := top.Sub("node"); n != nil {
		cfg.Node.OnRankDeath = buildRankDeath(n)
		n.Done()
	}
	cfg.Sources = buildSources(top, cfg.Batch.Size)
	top.Done()
	return cfg
}

// t0Layouts are the ISO 8601 forms t0_start and t0_end accept (and a space for the T); a time
// without a zone is UTC, a date alone is its midnight.
var t0Layouts = []string{
	time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02",
}

// t0Bound reads an ISO 8601 time (a string, or a TOML date-time or date) at key; nil when the
// key is absent or wrong (which is recorded).
// buildPeriods reads [batch] time_periods (a list of [start, end] ISO 8601 times, "" for an
// open end) or t0_start .. t0_end (one period), not both.
func buildPeriods(b *Table) ([]Period, string) {
	if b.Has("time_periods") && (b.Has("t0_start") || b.Has("t0_end")) {
		b.Errorf("time_periods", "given with t0_start or t0_end; expected one of them (t0_start .. t0_end is one period)")
		return nil, ""
	}
	if !b.Has("time_periods") {
		p := Period{t0Bound(b, "t0_start"), t0Bound(b, "t0_end")}
		if p.Start == nil && p.End == nil {
			return nil, ""
		}
		if p.Start != nil && p.End != nil && p.End.Before(*p.Start) {
			b.Errorf("t0_end", "%s is before t0_start (%s); expected t0_start <= t0_end (both included)",
				p.End.Format(time.RFC3339), p.Start.Format(time.RFC3339))
		}
		if p.Start == nil {
			return []Period{p}, "t0_end"
		}
		return []Period{p}, "t0_start"
	}
	const want = `a list of [start, end] pairs of ISO 8601 times ("" for an open end), such as [["2021-01-01", "2021-06-30"], ["2022-01-01", ""]]`
	v, _ := b.get("time_periods")
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		b.Errorf("time_periods", "%s; expected %s", describe(v), want)
		return nil, ""
	}
	out := make([]Period, 0, len(list))
	for i, e := range list {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			b.Errorf("time_periods", "element %d is %s; expected %s", i, describe(e), want)
			continue
		}
		var p Period
		for k, dst := range []**time.Time{&p.Start, &p.End} {
			if s, ok := pair[k].(string); ok && strings.TrimSpace(s) == "" {
				continue // open
			}
			tm, msg := parseT0(pair[k])
			if msg != "" {
				b.Errorf("time_periods", "element %d: %s", i, msg)
				continue
			}
			*dst = tm
		}
		if p.Start != nil && p.End != nil && p.End.Before(*p.Start) {
			b.Errorf("time_periods", "element %d: %s is before %s; expected start <= end (both included)", i,
				p.End.Format(time.RFC3339), p.Start.Format(time.RFC3339))
		}
		out = append(out, p)
	}
	return out, "time_periods"
}

func t0Bound(t *Table, key string) *time.Time {
	v, ok := t.get(key)
	if !ok {
		return nil
	}
	tm, msg := parseT0(v)
	if msg != "" {
		t.Errorf(key, "%s", msg)
	}
	return tm
}

// parseT0 reads one t0 bound: an ISO 8601 string or a TOML date-time, as UTC; else why not.
func parseT0(v any) (*time.Time, string) {
	const want = `an ISO 8601 time such as "2021-06-01T00:00:00Z" or "2021-06-01"`
	var tm time.Time
	switch x := v.(type) {
	case time.Time:
		// A TOML local date-time or date has a zone of offset 0: UTC, as for strings. A local
		// time alone has year 0.
		if x.Year() == 0 {
			return nil, "a time of day without a date; expected " + want
		}
		tm = x
	case string:
		s := strings.Replace(strings.TrimSpace(x), " ", "T", 1)
		parsed := false
		for _, l := range t0Layouts {
			if p, err := time.Parse(l, s); err == nil {
				tm, parsed = p, true
				break
			}
		}
		if !parsed {
			return nil, fmt.Sprintf("%q is not an ISO 8601 time; expected %s", x, want)
		}
	default:
		return nil, fmt.Sprintf("expected %s, got %s", want, describe(v))
	}
	tm = tm.UTC()
	return &tm, ""
}

// buildOrder reads [batch] order. An epochs stream is made of whole epochs, whose length the
// data decides, so it is not also cut at a number of batches.
func buildOrder(b *Table, batches uint64) string {
	order := b.String("order", OrderStream)
	switch order {
	case OrderStream:
	case OrderEpochs:
		if batches != 0 {
			b.Errorf("batches", "%d with order = %q: an epochs stream is whole epochs of the sample space; expected batches unset (stop after the epochs you want in the trainer)", batches, OrderEpochs)
		}
	default:
		b.Errorf("order", "unknown order %q; expected %q or %q", order, OrderStream, OrderEpochs)
	}
	return order
}

// buildRankDeath reads [node] on_rank_death.
func buildRankDeath(n *Table) string {
	v := n.String("on_rank_death", RankDeathStop)
	if v != RankDeathStop && v != RankDeathContinue {
		n.Errorf("on_rank_death", "unknown value %q; expected %q (every rank fails when one dies) or %q (the others go on)",
			v, RankDeathStop, RankDeathContinue)
	}
	return v
}

func buildSources(top *Table, batchSize int) []Source {
	tables := top.Tables("source")
	if tables == nil {
		if !top.Has("source") {
			top.Errorf("source", "missing; expected at least one [[source]] table")
		}
		return nil
	}
	if len(tables) == 0 {
		top.Errorf("source", "empty; expected at least one [[source]] table")
		return nil
	}
	if len(tables) > MaxSources {
		top.Errorf("source", "%d sources; at most %d are supported", len(tables), MaxSources)
		return nil
	}
	var out []Source
	names := map[string]int{}
	batchBytes := int64(0)
	for i, t := range tables {
		s := Source{Index: i}
		if name, ok := t.MustString("name"); ok {
			switch {
			case ring.ValidateTensorName(name) != nil:
				t.Errorf("name", "invalid name %q; expected %s", name, ring.TensorNameRule)
			case names[name] > 0:
				t.Errorf("name", "duplicate name %q; source[%d] has it already", name, names[name]-1)
			default:
				names[name] = i + 1
			}
			s.Name = name
		}
		kindName, ok := t.MustString("kind")
		kind, known := lookupKind(kindName)
		if ok && kind == nil {
			t.Errorf("kind", "unknown kind %q; expected one of %s", kindName, strings.Join(known, ", "))
		}
		s.Kind = kindName
		if kind == nil {
			// Without a kind the other keys cannot be judged; report only name and kind.
			continue
		}
		s.Spec = kind(t)
		t.Done()
		if s.Spec == nil {
			continue
		}
		shape, dt := s.Spec.Example()
		if len(shape) > MaxExampleD {
			t.Errorf("shape", "%d dimensions; expected at most %d (%d with the batch dimension)", len(shape), MaxExampleD, ring.MaxDims)
			continue
		}
		// Bound the batch size in bytes without overflowing.
		n := int64(dt.Size()) * int64(max(batchSize, 1))
		for _, d := range shape {
			if d < 1 || n > MaxBatchBytes/int64(d) {
				n = MaxBatchBytes + 1
				break
			}
			n *= int64(d)
		}
		batchBytes += n
		if batchBytes > MaxBatchBytes {
			t.Errorf("shape", "a batch would exceed %d bytes; expected a smaller shape or batch.size", int64(MaxBatchBytes))
			continue
		}
		out = append(out, s)
	}
	return out
}

// Tables returns the array of tables at key ([[key]] in TOML, a list of objects in JSON), or
// nil when it is absent or not an array of tables (which is recorded).
func (t *Table) Tables(key string) []*Table {
	v, ok := t.get(key)
	if !ok {
		return nil
	}
	var maps []map[string]any
	switch x := v.(type) {
	case []map[string]any:
		maps = x
	case []any:
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				t.Errorf(fmt.Sprintf("%s[%d]", key, i), "expected a table, got %s", describe(e))
				return nil
			}
			maps = append(maps, m)
		}
	default:
		t.wrongType(key, "an array of tables ([["+key+"]])", v)
		return nil
	}
	out := make([]*Table, len(maps))
	for i, m := range maps {
		out[i] = newTable(fmt.Sprintf("%s[%d]", t.Field(key), i), m, t.c)
	}
	if out == nil {
		out = []*Table{}
	}
	return out
}
