package ocf

import (
	"fmt"
	"github.com/gobatch/gobatch/config"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// The validation of ocf-data-sampler 1.0.24's pydantic model (ocf_data_sampler/config/model.py):
// every model forbids unknown keys, fields are converted as pydantic's lax mode converts them,
// and a model's own checks (windows, dropout, normalisation constants) run once its fields
// are valid, as pydantic's "after" validators do.

// NWPProviders are the providers ocf-data-sampler 1.0.24 knows (case-insensitive).
var NWPProviders = []string{"ukv", "ecmwf", "mo_global", "gfs", "icon_eu", "cloudcasting", "gencast", "fgn"}

// Config is a validated ocf-data-sampler configuration.
type Config struct {
	Satellite     *Satellite
	NWP           []*NWP // in the file's order
	Generation    *Generation
	SolarPosition *Window
	T0Embedding   [][2]string // (period, "cyclic" | "linear")

	lines   map[string]int  // the line of every key (Line)
	secrets []config.Secret // the environment variables !ENV values took (envSecrets)
}

// Window is a time window relative to t0, in minutes, both ends included.
type Window struct{ Resolution, Start, End int64 }

// Dropout is a source's dropout: Fraction has one value (a float in the file) or one per
// timedelta (a list).
type Dropout struct {
	Timedeltas     []int64
	Fraction       []float64
	FractionIsList bool
	Value          float64
}

// Norm is one channel's normalisation constants; a clip bound is nil when absent.
type Norm struct {
	Mean, Std        float64
	ClipMin, ClipMax *float64
}

// Grid is what satellite and NWP share.
type Grid struct {
	Window
	Dropout
	Height, Width int64
	ZarrPaths     []string
	Channels      []string
	Norm          map[string]Norm
}

// Satellite is input_data.satellite.
type Satellite struct{ Grid }

// NWP is one provider of input_data.nwp.
type NWP struct {
	Key string // its key under nwp ("ukv")
	Grid
	Provider      string
	AccumChannels []string
	MaxStaleness  *int64
	Public        bool
}

// Generation is input_data.generation.
type Generation struct {
	Window
	Dropout
	ZarrPath string
	Public   bool
}

// Problem is one reason the file is refused: its line, the YAML key as a dotted path
// (input_data.nwp.ukv.channels) and the message.
type Problem = config.Problem

// checker walks the value tree, collecting problems.
type checker struct {
	problems []Problem
}

func (c *checker) bad(line int, field, format string, args ...any) {
	c.problems = append(c.problems, Problem{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// model is one pydantic model being read: its mapping, its path, and the keys it declares.
type model struct {
	c     *checker
	v     *value
	path  string
	n     int // problems when it started
	known map[string]bool
}

// open starts reading the mapping v as model path. It refuses anything but a mapping.
func (c *checker) open(v *value, path, what string) *model {
	if v.kind != kMap {
		c.bad(v.line, path, "expected a mapping (%s), got %s", what, v.kind)
		return nil
	}
	for _, k := range v.keys {
		if k.kind != kStr {
			c.bad(k.line, path, "key %s is %s; expected a string", k.s, k.kind)
		}
	}
	return &model{c: c, v: v, path: path, n: len(c.problems), known: map[string]bool{}}
}

func (m *model) field(key string) string {
	if m.path == "" {
		return key
	}
	return m.path + "." + key
}

// get is key's value (nil when absent), marking key as declared.
func (m *model) get(key string) *value {
	m.known[key] = true
	v, _ := m.v.get(key)
	return v
}

// required is key's value, or a problem when it is absent.
func (m *model) required(key, want string) *value {
	v := m.get(key)
	if v == nil {
		line := m.v.keyLine // the line naming the section that lacks it
		if line == 0 {
			line = m.v.line
		}
		m.c.bad(line, m.field(key), "missing; expected %s", want)
	}
	return v
}

// close refuses the keys the model does not declare (extra="forbid").
func (m *model) close() {
	for _, k := range m.v.keys {
		if k.kind == kStr && !m.known[k.s] {
			names := make([]string, 0, len(m.known))
			for n := range m.known {
				names = append(names, n)
			}
			sort.Strings(names)
			m.c.bad(k.line, m.field(k.s), "unknown key (extra keys are not permitted); expected one of %s", strings.Join(names, ", "))
		}
	}
}

// fieldsOK says whether the model's fields were all valid, so that its own checks may run.
func (m *model) fieldsOK() bool { return len(m.c.problems) == m.n }

func (m *model) int(key string, def int64, needed bool) int64 {
	var v *value
	if needed {
		v = m.required(key, "an integer")
	} else {
		v = m.get(key)
	}
	if v == nil {
		return def
	}
	i, msg := asInt(v)
	if msg != "" {
		m.c.bad(v.line, m.field(key), "%s", msg)
	}
	return i
}

func (m *model) float(key string, def float64, needed bool) float64 {
	var v *value
	if needed {
		v = m.required(key, "a number")
	} else {
		v = m.get(key)
	}
	if v == nil {
		return def
	}
	f, msg := asFloat(v)
	if msg != "" {
		m.c.bad(v.line, m.field(key), "%s", msg)
	}
	return f
}

// optFloat reads float | None.
func (m *model) optFloat(key string) *float64 {
	v := m.get(key)
	if v == nil || v.kind == kNull {
		return nil
	}
	f, msg := asFloat(v)
	if msg != "" {
		m.c.bad(v.line, m.field(key), "%s", msg)
	}
	return &f
}

func (m *model) str(key, def string, needed bool) string {
	var v *value
	if needed {
		v = m.required(key, "a string")
	} else {
		v = m.get(key)
	}
	if v == nil {
		return def
	}
	s, msg := asStr(v)
	if msg != "" {
		m.c.bad(v.line, m.field(key), "%s", msg)
	}
	return s
}

func (m *model) bool(key string) bool {
	v := m.get(key)
	if v == nil {
		return false
	}
	b, msg := asBool(v)
	if msg != "" {
		m.c.bad(v.line, m.field(key), "%s", msg)
	}
	return b
}

// list reads a list at key, each element through conv (nil when absent or wrong).
func (m *model) list(key string, needed bool, each func(e *value, field string)) *value {
	var v *value
	if needed {
		v = m.required(key, "a list")
	} else {
		v = m.get(key)
	}
	if v == nil {
		return nil
	}
	if v.kind != kSeq {
		m.c.bad(v.line, m.field(key), "expected a list, got %s", v.kind)
		return nil
	}
	for i, e := range v.items {
		each(e, fmt.Sprintf("%s[%d]", m.field(key), i))
	}
	return v
}

func (m *model) strs(key string, needed bool) []string {
	out := []string{}
	m.list(key, needed, func(e *value, field string) {
		s, msg := asStr(e)
		if msg != "" {
			m.c.bad(e.line, field, "%s", msg)
		}
		out = append(out, s)
	})
	return out
}

// Check validates the value tree as ocf_data_sampler.config.Configuration(**tree).
func check(root *value) (*Config, []Problem) {
	c := &checker{}
	if root.kind != kMap {
		c.bad(root.line, "", "expected a mapping with general and input_data at the top level, got %s", root.kind)
		return nil, c.problems
	}
	top := c.open(root, "", "the configuration")
	if g := top.get("general"); g != nil {
		if gm := c.open(g, "general", "name, description"); gm != nil {
			gm.str("name", "", false)
			gm.str("description", "", false)
			gm.close()
		}
	}
	cfg := &Config{}
	if in := top.get("input_data"); in != nil {
		c.inputData(in, cfg)
	}
	top.close()
	return cfg, c.problems
}

func (c *checker) inputData(v *value, cfg *Config) {
	m := c.open(v, "input_data", "satellite, nwp, generation, solar_position, t0_embedding")
	if m == nil {
		return
	}
	if s := m.get("satellite"); s != nil && s.kind != kNull {
		cfg.Satellite = c.satellite(s, "input_data.satellite")
	}
	if n := m.get("nwp"); n != nil && n.kind != kNull {
		if nm := c.open(n, "input_data.nwp", "a provider key such as ukv, each with an NWP configuration"); nm != nil {
			for i, k := range n.keys {
				if k.kind == kStr {
					cfg.NWP = append(cfg.NWP, c.nwp(n.items[i], k.s, "input_data.nwp."+k.s))
				}
			}
		}
	}
	if g := m.get("generation"); g != nil && g.kind != kNull {
		cfg.Generation = c.generation(g, "input_data.generation")
	}
	if s := m.get("solar_position"); s != nil && s.kind != kNull {
		if sm := c.open(s, "input_data.solar_position", "a time window"); sm != nil {
			w := c.window(sm)
			sm.close()
			cfg.SolarPosition = &w
			c.checkWindow(sm, w)
		}
	}
	if t := m.get("t0_embedding"); t != nil && t.kind != kNull {
		cfg.T0Embedding = c.t0Embedding(t, "input_data.t0_embedding")
	}
	m.close()
}

// window reads TimeWindowMixin's fields.
func (c *checker) window(m *model) Window {
	w := Window{
		Resolution: m.int("time_resolution_minutes", 0, true),
		Start:      m.int("interval_start_minutes", 0, true),
		End:        m.int("interval_end_minutes", 0, true),
	}
	if v := m.get("time_resolution_minutes"); v != nil {
		if i, msg := asInt(v); msg == "" && i <= 0 {
			c.bad(v.line, m.field("time_resolution_minutes"), "%d; expected a number of minutes > 0", i)
		}
	}
	return w
}

// checkWindow is TimeWindowMixin.validate_intervals.
func (c *checker) checkWindow(m *model, w Window) {
	if !m.fieldsOK() {
		return
	}
	line := func(k string) int {
		if v := m.get(k); v != nil {
			return v.line
		}
		return m.v.line
	}
	switch {
	case w.Start > w.End:
		c.bad(line("interval_start_minutes"), m.field("interval_start_minutes"), "%d is after interval_end_minutes (%d); expected start <= end", w.Start, w.End)
	case w.Start%w.Resolution != 0:
		c.bad(line("interval_start_minutes"), m.field("interval_start_minutes"), "%d is not a multiple of time_resolution_minutes (%d)", w.Start, w.Resolution)
	case w.End%w.Resolution != 0:
		c.bad(line("interval_end_minutes"), m.field("interval_end_minutes"), "%d is not a multiple of time_resolution_minutes (%d)", w.End, w.Resolution)
	}
}

// dropout reads and checks DropoutMixin.
func (c *checker) dropout(m *model) Dropout {
	d := Dropout{Timedeltas: []int64{}, Fraction: []float64{0}}
	m.list("dropout_timedeltas_minutes", false, func(e *value, field string) {
		i, msg := asInt(e)
		switch {
		case msg != "":
			c.bad(e.line, field, "%s", msg)
		case i > 0:
			c.bad(e.line, field, "%d; dropout timedeltas must be negative or zero", i)
		}
		d.Timedeltas = append(d.Timedeltas, i)
	})
	if f := m.get("dropout_fraction"); f != nil {
		field := m.field("dropout_fraction")
		if f.kind == kSeq {
			d.FractionIsList, d.Fraction = true, nil
			sum := 0.0
			for i, e := range f.items {
				x, msg := asFloat(e)
				if msg != "" {
					c.bad(e.line, fmt.Sprintf("%s[%d]", field, i), "%s", msg)
				}
				d.Fraction = append(d.Fraction, x)
				sum += x
			}
			switch {
			case len(f.items) == 0:
				c.bad(f.line, field, "an empty list; expected a number in [0, 1] or a non-empty list of them")
			case !allIn01(d.Fraction):
				c.bad(f.line, field, "%v; every dropout fraction must lie in [0, 1]", d.Fraction)
			case !(sum >= 0 && sum <= 1):
				c.bad(f.line, field, "%v sums to %v; expected a sum in [0, 1]", d.Fraction, sum)
			}
		} else {
			x, msg := asFloat(f)
			d.Fraction = []float64{x}
			switch {
			case msg != "":
				c.bad(f.line, field, "%s, or a list of numbers", msg)
			case !(x >= 0 && x <= 1):
				c.bad(f.line, field, "%v; expected a dropout fraction in [0, 1]", x)
			}
		}
	}
	d.Value = m.float("dropout_value", 0, false)
	return d
}

func allIn01(fs []float64) bool {
	for _, f := range fs {
		if !(f >= 0 && f <= 1) {
			return false
		}
	}
	return true
}

// checkDropout is DropoutMixin.dropout_instructions_consistent. pydantic compares the
// fraction with 0: a list never equals 0.
func (c *checker) checkDropout(m *model, d Dropout) {
	if !m.fieldsOK() {
		return
	}
	zero := !d.FractionIsList && d.Fraction[0] == 0
	switch {
	case zero && len(d.Timedeltas) > 0:
		c.bad(lineOf(m, "dropout_timedeltas_minutes"), m.field("dropout_timedeltas_minutes"), "%v with dropout_fraction 0; expected dropout_fraction > 0 to use dropout timedeltas", d.Timedeltas)
	case !zero && len(d.Timedeltas) == 0:
		c.bad(lineOf(m, "dropout_fraction"), m.field("dropout_fraction"), "%v needs dropout_timedeltas_minutes; expected a non-empty list of them", fracString(d))
	}
}

func fracString(d Dropout) string {
	if d.FractionIsList {
		return fmt.Sprint(d.Fraction)
	}
	return strconv.FormatFloat(d.Fraction[0], 'g', -1, 64)
}

func lineOf(m *model, key string) int {
	if v, k := m.v.get(key); v != nil {
		return k.line
	}
	return m.v.line
}

// spatial reads SpatialWindowMixin.
func (c *checker) spatial(m *model) (h, w int64) {
	h = m.int("image_size_pixels_height", 0, true)
	w = m.int("image_size_pixels_width", 0, true)
	for _, k := range []string{"image_size_pixels_height", "image_size_pixels_width"} {
		if v := m.get(k); v != nil {
			if i, msg := asInt(v); msg == "" && i < 0 {
				c.bad(v.line, m.field(k), "%d; expected a number of pixels >= 0", i)
			}
		}
	}
	return h, w
}

// normalisation reads NormalisationConstantsMixin: channel -> NormalisationValues.
func (c *checker) normalisation(m *model) map[string]Norm {
	out := map[string]Norm{}
	v := m.required("normalisation_constants", "a mapping from each channel to its mean and std")
	if v == nil {
		return out
	}
	nm := c.open(v, m.field("normalisation_constants"), "channel: {mean, std, clip_min, clip_max}")
	if nm == nil {
		return out
	}
	for i, k := range v.keys {
		if k.kind != kStr {
			continue
		}
		cm := c.open(v.items[i], nm.field(k.s), "mean, std, clip_min, clip_max")
		if cm == nil {
			continue
		}
		n := Norm{Mean: cm.float("mean", 0, true), Std: cm.float("std", 0, true), ClipMin: cm.optFloat("clip_min"), ClipMax: cm.optFloat("clip_max")}
		if s := cm.get("std"); s != nil {
			if f, msg := asFloat(s); msg == "" && !(f > 0) {
				c.bad(s.line, cm.field("std"), "%v; expected a standard deviation > 0", f)
			}
		}
		cm.close()
		if cm.fieldsOK() && n.ClipMin != nil && n.ClipMax != nil && *n.ClipMin >= *n.ClipMax {
			c.bad(lineOf(cm, "clip_min"), cm.field("clip_min"), "%v is not below clip_max (%v); expected clip_min < clip_max", *n.ClipMin, *n.ClipMax)
		}
		out[k.s] = n
	}
	return out // a dict: any channel name is a key
}

// zarrPaths reads str | tuple[str] | list[str].
func (c *checker) zarrPaths(m *model, listOK bool) []string {
	v := m.required("zarr_path", "the path of the Zarr store")
	if v == nil {
		return nil
	}
	if v.kind == kSeq && listOK {
		return m.strs("zarr_path", true)
	}
	s, msg := asStr(v)
	if msg != "" {
		if listOK {
			msg += ", or a list of strings"
		}
		c.bad(v.line, m.field("zarr_path"), "%s", msg)
	}
	return []string{s}
}

func (c *checker) grid(m *model) Grid {
	g := Grid{ZarrPaths: c.zarrPaths(m, true)}
	g.Window = c.window(m)
	g.Dropout = c.dropout(m)
	g.Height, g.Width = c.spatial(m)
	g.Channels = m.strs("channels", true)
	g.Norm = c.normalisation(m)
	return g
}

func (c *checker) satellite(v *value, path string) *Satellite {
	m := c.open(v, path, "a satellite configuration")
	if m == nil {
		return nil
	}
	s := &Satellite{Grid: c.grid(m)}
	m.close()
	if !m.fieldsOK() {
		return s
	}
	c.checkWindow(m, s.Window)
	c.checkDropout(m, s.Dropout)
	if missing := missingNorm(s.Channels, nil, s.Norm); len(missing) > 0 {
		c.bad(lineOf(m, "normalisation_constants"), m.field("normalisation_constants"), "no constants for channels %s; expected them for every channel", strings.Join(missing, ", "))
	}
	return s
}

func (c *checker) nwp(v *value, key, path string) *NWP {
	m := c.open(v, path, "an NWP configuration")
	if m == nil {
		return nil
	}
	n := &NWP{Key: key, Grid: c.grid(m)}
	n.Provider = m.str("provider", "", true)
	if p := m.get("provider"); p != nil && p.kind == kStr && !isProvider(n.Provider) {
		c.bad(p.line, m.field("provider"), "%s is not an NWP provider ocf-data-sampler knows; expected one of %s", p.shown(), strings.Join(NWPProviders, ", "))
	}
	n.AccumChannels = m.strs("accum_channels", false)
	if s := m.get("max_staleness_minutes"); s != nil && s.kind != kNull {
		i := m.int("max_staleness_minutes", 0, false)
		n.MaxStaleness = &i
	}
	n.Public = m.bool("public")
	m.close()
	if !m.fieldsOK() {
		return n
	}
	c.checkWindow(m, n.Window)
	c.checkDropout(m, n.Dropout)
	if extra := minus(n.AccumChannels, n.Channels); len(extra) > 0 {
		c.bad(lineOf(m, "accum_channels"), m.field("accum_channels"), "%s not in channels; expected accumulated channels among the channels", strings.Join(extra, ", "))
	} else if missing := missingNorm(n.Channels, n.AccumChannels, n.Norm); len(missing) > 0 {
		c.bad(lineOf(m, "normalisation_constants"), m.field("normalisation_constants"), "no constants for %s; expected them for every channel, under diff_<channel> for an accumulated one", strings.Join(missing, ", "))
	}
	return n
}

func isProvider(p string) bool {
	for _, q := range NWPProviders {
		if strings.ToLower(p) == q {
			return true
		}
	}
	return false
}

// missingNorm lists the constants the channels need and norm lacks: c for a channel, diff_c
// for an accumulated one.
func missingNorm(channels, accum []string, norm map[string]Norm) []string {
	var out []string
	seen := map[string]bool{}
	for _, ch := range channels {
		name := ch
		if contains(accum, ch) {
			name = "diff_" + ch
		}
		if _, ok := norm[name]; !ok && !seen[name] {
			out = append(out, name)
			seen[name] = true
		}
	}
	return out
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !contains(b, x) && !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) generation(v *value, path string) *Generation {
	m := c.open(v, path, "a generation configuration")
	if m == nil {
		return nil
	}
	g := &Generation{}
	if p := c.zarrPaths(m, false); len(p) == 1 {
		g.ZarrPath = p[0]
	}
	g.Window = c.window(m)
	g.Dropout = c.dropout(m)
	g.Public = m.bool("public")
	m.close()
	if m.fieldsOK() {
		c.checkWindow(m, g.Window)
		c.checkDropout(m, g.Dropout)
	}
	return g
}

// t0Embedding reads T0Embedding: embeddings, a list of (period, "cyclic" | "linear").
func (c *checker) t0Embedding(v *value, path string) [][2]string {
	m := c.open(v, path, "embeddings")
	if m == nil {
		return nil
	}
	var out [][2]string
	m.list("embeddings", true, func(e *value, field string) {
		if e.kind != kSeq || len(e.items) != 2 {
			c.bad(e.line, field, "expected a pair [period, \"cyclic\" | \"linear\"], got %s", e.kind)
			return
		}
		period, msg := asStr(e.items[0])
		if msg != "" {
			c.bad(e.items[0].line, field+"[0]", "%s", msg)
			return
		}
		kind, msg := asStr(e.items[1])
		if msg != "" || (kind != "cyclic" && kind != "linear") {
			c.bad(e.items[1].line, field+"[1]", "%s; expected \"cyclic\" or \"linear\"", e.items[1].shown())
			return
		}
		if why := periodProblem(period); why != "" && e.items[0].env != "" {
			c.bad(e.items[0].line, field+"[0]", "%s: not a period (\"<N>h\" or \"<N>y\")", e.items[0].shown())
			return
		} else if why != "" {
			c.bad(e.items[0].line, field+"[0]", "%q: %s", period, why)
			return
		}
		out = append(out, [2]string{period, kind})
	})
	m.close()
	return out
}

// periodProblem is T0Embedding.validate_embeddings for one period: "<N>h" with 1 <= N <= 24,
// or "<N>y" with N > 0, N written in digits.
func periodProblem(p string) string {
	if p == "" {
		return "empty; expected \"<N>h\" or \"<N>y\""
	}
	unit := p[len(p)-1:]
	if unit != "h" && unit != "y" {
		return "the unit must be h or y"
	}
	digits := p[:len(p)-1]
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return !unicode.IsDigit(r) }) >= 0 {
		return fmt.Sprintf("%q is not an integer", digits)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		n = math.MaxInt64
	}
	if unit == "y" && n <= 0 {
		return "a period in years must be > 0"
	}
	if unit == "h" && (n < 1 || n > 24) {
		return "a period in hours must lie in [1, 24]"
	}
	return ""
}
