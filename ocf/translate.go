package ocf

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler/rules"
)

// Read reads and validates an ocf-data-sampler configuration, as load_yaml_configuration
// does. The problems are every reason the file is refused (a syntax error is one problem).
func Read(data []byte, env Env) (*Config, []Problem) {
	root, line, err := readYAML(data, env)
	if err != nil {
		return nil, []Problem{{Line: line, Msg: err.Error()}}
	}
	cfg, problems := check(root)
	if len(problems) > 0 {
		return nil, problems
	}
	cfg.lines = map[string]int{}
	root.index("", cfg.lines)
	cfg.secrets = envSecrets(root, env)
	return cfg, nil
}

// envSecrets are the environment variables the values tagged !ENV took, with their values:
// package config shows none of these values in a message (config.Secret).
func envSecrets(v *value, env Env) []config.Secret {
	var out []config.Secret
	if v.env != "" {
		for _, m := range envRef.FindAllStringSubmatch(v.env, -1) {
			if val, ok := env(m[1]); ok {
				out = append(out, config.Secret{Name: m[1], Value: val})
			}
		}
	}
	for _, k := range v.keys {
		out = append(out, envSecrets(k, env)...)
	}
	for _, e := range v.items {
		out = append(out, envSecrets(e, env)...)
	}
	return out
}

// Line is the line a field ("input_data.nwp.ukv.channels") is written on, else its nearest
// enclosing field's; 0 when none is.
func (c *Config) Line(field string) int {
	for f := field; ; {
		if l, ok := c.lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return 0
		}
		f = f[:i]
	}
}

// index records the line of every key under path.
func (v *value) index(path string, out map[string]int) {
	switch v.kind {
	case kMap:
		for i, k := range v.keys {
			p := k.s
			if path != "" {
				p = path + "." + k.s
			}
			out[p] = k.line
			v.items[i].index(p, out)
		}
	case kSeq:
		for i, e := range v.items {
			p := fmt.Sprintf("%s[%d]", path, i)
			out[p] = e.line
			e.index(p, out)
		}
	}
}

// Translation is a gobatch configuration made from an ocf-data-sampler one, in the shape
// package config reads (config.Translation): Raw is what a gobatch TOML file decodes to,
// without [batch] (gobatch's own options come from the command line or the Loader's keywords);
// Lines and Fields say where each gobatch field comes from in the YAML file
// ("source[1].channels" -> the line of, and the key input_data.nwp.ukv.channels).
type Translation = config.Translation

// Source names in the translation: the satellite, each NWP under its key, the generation.
const (
	SatelliteName  = "satellite"
	GenerationName = "generation"
	// GenerationVariable is the data array ocf-data-sampler reads from a generation store.
	GenerationVariable = "generation_mw"
	// CapacityName is the source of the generation store's capacity_mwp array, which
	// divides the generation step by step.
	CapacityName     = "generation_capacity"
	CapacityVariable = "capacity_mwp"
)

// nwpCRS is the coordinate reference system of each provider's grid, as ocf-data-sampler's
// loaders name its dimensions: OSGB for ukv, longitude/latitude for the global models; the
// geostationary cloudcasting grid has the satellite's projection.
var nwpCRS = map[string]string{
	"ukv": "EPSG:27700", "ecmwf": "EPSG:4326", "mo_global": "EPSG:4326", "gfs": "EPSG:4326",
	"icon_eu": "EPSG:4326", "gencast": "EPSG:4326", "fgn": "EPSG:4326",
}

// Translate turns a validated configuration into gobatch sources (docs/OCF.md says what is
// translated and what is not yet matched), typed, with where each field comes from; Raw gives
// them the shape package config reads. It refuses what gobatch cannot run at all, as Problems
// naming the key: neither a satellite nor a generation (nothing to centre the examples on), an
// odd or zero crop (ocf-data-sampler itself fails on every sample with an odd one). The
// anchor is the satellite when there is one; without one, the generation (the examples are
// centred on its locations, every NWP cropped around each in its own grid). Several
// zarr_paths of a satellite or NWP are one store read along time (sampler/concat.go).
func Translate(cfg *Config, lines func(field string) int) ([]*Source, []Problem) {
	t := &translator{lines: lines}
	var sources []*Source
	switch {
	case cfg.Satellite != nil:
		sources = append(sources, t.satellite(cfg.Satellite, cfg.Generation != nil))
	case cfg.Generation == nil:
		t.bad("input_data", "neither a satellite nor a generation; gobatch centres its examples on the satellite's grid or on the generation's locations, so it needs one of them (docs/OCF.md)")
	}
	for i, n := range cfg.NWP {
		sources = append(sources, t.nwp(n, i))
	}
	if cfg.Generation != nil {
		gen := t.generation(cfg)
		if cfg.Satellite == nil {
			gen.Anchor, gen.Rules = true, RulesName // the examples' centres are its locations
			gen.from(&gen.Anchor, "input_data.generation")
		}
		sources = append(sources, gen, t.capacity(cfg.Generation))
	}
	if len(t.problems) > 0 {
		return nil, t.problems
	}
	return sources, nil
}

type translator struct {
	lines    func(field string) int
	problems []Problem
}

func (t *translator) bad(field, format string, args ...any) {
	t.problems = append(t.problems, Problem{Line: t.lines(field), Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (t *translator) window(s *Source, w Window, path string) {
	s.Resolution, s.Start, s.End = w.Resolution, w.Start, w.End
	s.from(&s.Resolution, path+".time_resolution_minutes")
	s.from(&s.Start, path+".interval_start_minutes")
	s.from(&s.End, path+".interval_end_minutes")
}

// dropout translates a dropout: the timedeltas, and the fraction as one number (split evenly
// across them) or as the list of per-timedelta probabilities.
func (t *translator) dropout(s *Source, d Dropout, path string) {
	if len(d.Timedeltas) == 0 {
		return
	}
	s.DropoutTimedeltas = d.Timedeltas
	s.from(&s.DropoutTimedeltas, path+".dropout_timedeltas_minutes")
	s.DropoutFraction = d.Fraction[0]
	if d.FractionIsList {
		s.DropoutFraction = d.Fraction
	}
	s.from(&s.DropoutFraction, path+".dropout_fraction")
}

// nwpDropout translates an NWP's dropout, which moves the latest init time an example may use
// (t0_available). ocf-data-sampler's NWP selection fails on every sample with a list of
// fractions or a zero timedelta, so these are refused.
func (t *translator) nwpDropout(s *Source, d Dropout, path string) {
	if len(d.Timedeltas) == 0 {
		return
	}
	if d.FractionIsList {
		t.bad(path+".dropout_fraction", "a list; an NWP takes one number (ocf-data-sampler's NWP selection fails on every sample with a list)")
		return
	}
	for _, td := range d.Timedeltas {
		if td == 0 {
			t.bad(path+".dropout_timedeltas_minutes", "0; an NWP's timedeltas must be negative (ocf-data-sampler's NWP selection fails on every sample with 0)")
			return
		}
	}
	t.dropout(s, d, path)
}

func (t *translator) grid(s *Source, g Grid, path string, accum []string) {
	s.Section = path
	switch len(g.ZarrPaths) {
	case 0:
	case 1:
		s.Store = g.ZarrPaths[0]
	default:
		s.Store = slices.Clone(g.ZarrPaths) // read as one along time, in this order
	}
	s.from(&s.Store, path+".zarr_path")
	t.window(s, g.Window, path)
	for _, k := range []struct {
		key string
		v   int64
		dst *int64
	}{{"image_size_pixels_height", g.Height, &s.Height}, {"image_size_pixels_width", g.Width, &s.Width}} {
		if k.v <= 0 || k.v%2 != 0 {
			t.bad(path+"."+k.key, "%d; gobatch needs an even crop > 0 (ocf-data-sampler fails on every sample with an odd one)", k.v)
		}
		*k.dst = k.v
		s.from(k.dst, path+"."+k.key)
	}
	s.Channels = g.Channels
	s.from(&s.Channels, path+".channels")
	t.normalisation(s, g, path, accum)
	t.nanFill(s, g.Dropout, path)
}

// normalisation translates the constants of every channel (an accumulated channel's are its
// diff_ ones), with the clip bounds when any channel has one (an absent bound infinite).
func (t *translator) normalisation(s *Source, g Grid, path string, accum []string) {
	n := len(g.Channels)
	if n == 0 {
		return
	}
	mean, std, lo, hi := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	clip := false
	for j, c := range g.Channels {
		name := c
		if contains(accum, c) {
			name = "diff_" + c
		}
		nc := g.Norm[name]
		mean[j], std[j], lo[j], hi[j] = nc.Mean, nc.Std, math.Inf(-1), math.Inf(1)
		if nc.ClipMin != nil {
			lo[j], clip = *nc.ClipMin, true
		}
		if nc.ClipMax != nil {
			hi[j], clip = *nc.ClipMax, true
		}
	}
	s.Mean, s.Std = mean, std
	s.from(&s.Mean, path+".normalisation_constants")
	s.from(&s.Std, path+".normalisation_constants")
	if clip {
		s.ClipMin, s.ClipMax = lo, hi
		s.from(&s.ClipMin, path+".normalisation_constants")
		s.from(&s.ClipMax, path+".normalisation_constants")
	}
}

// nanFill: after the normalisation, ocf-data-sampler fills every NaN of a source with its
// dropout_value (0 by default).
func (t *translator) nanFill(s *Source, d Dropout, path string) {
	v := d.Value
	s.NaNFill = &v
	s.from(&s.NaNFill, path+".dropout_value")
}

func (t *translator) satellite(sat *Satellite, sites bool) *Source {
	const path = "input_data.satellite"
	s := newSource(SatelliteName, "grid")
	s.Anchor, s.Rules = true, RulesName
	t.grid(s, sat.Grid, path, nil)
	t.dropout(s, sat.Dropout, path)
	if sites {
		s.Locations = GenerationName
		s.from(&s.Locations, "input_data.generation")
	}
	return s
}

// nwp translates NWP provider key n (the i-th). Its tensors are named after the key, unless the
// key is longer than a tensor name may be with the suffixes of its time tensors (or holds a
// character a tensor name cannot): then they are "nwp<i>" and the key is the label the batch
// nests them under.
func (t *translator) nwp(n *NWP, i int) *Source {
	path := "input_data.nwp." + n.Key
	s := newSource(n.Key, "nwp")
	if ring.ValidateTensorName(n.Key+rules.TargetSuffix) != nil {
		s.Name, s.Label = fmt.Sprintf("nwp%d", i), n.Key
		s.from(&s.Label, path)
	}
	t.grid(s, n.Grid, path, n.AccumChannels)
	if crs := nwpCRS[strings.ToLower(n.Provider)]; crs != "" {
		s.CRS = crs
		s.from(&s.CRS, path+".provider")
	}
	if strings.EqualFold(n.Provider, "gfs") { // one data array per channel: open_gfs's to_array
		s.VariablesAsChannels = true
		s.from(&s.VariablesAsChannels, path+".provider")
	}
	if n.MaxStaleness != nil {
		s.MaxStaleness = n.MaxStaleness
		s.from(&s.MaxStaleness, path+".max_staleness_minutes")
	}
	if len(n.AccumChannels) > 0 {
		s.AccumChannels = n.AccumChannels
		s.from(&s.AccumChannels, path+".accum_channels")
	}
	t.nwpDropout(s, n.Dropout, path)
	return s
}

// points is a points source of one system per example over the generation store's array
// variable, with the generation's window.
func (t *translator) points(name, variable string, g *Generation) *Source {
	const path = "input_data.generation"
	s := newSource(name, "points")
	s.Section, s.NearestK = path, 1
	s.Store, s.Variable = g.ZarrPath, variable
	s.from(&s.Store, path+".zarr_path")
	s.from(&s.Variable, path+".zarr_path")
	t.window(s, g.Window, path)
	return s
}

func (t *translator) generation(cfg *Config) *Source {
	const path = "input_data.generation"
	g := cfg.Generation
	s := t.points(GenerationName, GenerationVariable, g)
	t.dropout(s, g.Dropout, path)
	t.nanFill(s, g.Dropout, path)
	s.Capacity = CapacityName
	s.from(&s.Capacity, path+".zarr_path")
	t.siteFeatures(s, cfg)
	return s
}

// capacity is the generation store's capacity_mwp over the generation's window: the
// generation is divided by it, per time step, as ocf-data-sampler divides.
func (t *translator) capacity(g *Generation) *Source {
	return t.points(CapacityName, CapacityVariable, g)
}

// siteFeatures asks for the values PVNetDataset adds to every sample, on the generation source
// the examples are centred on: the datetime encodings (always), the solar position and the t0
// embedding (when configured).
func (t *translator) siteFeatures(s *Source, cfg *Config) {
	s.DatetimeFeatures = true
	s.from(&s.DatetimeFeatures, "input_data.generation")
	if w := cfg.SolarPosition; w != nil {
		s.SolarPosition = w
		s.from(&s.SolarPosition, "input_data.solar_position")
	}
	if len(cfg.T0Embedding) > 0 {
		for _, e := range cfg.T0Embedding {
			s.T0Embedding = append(s.T0Embedding, e[0]+":"+e[1])
		}
		s.from(&s.T0Embedding, "input_data.t0_embedding.embeddings")
	}
}
