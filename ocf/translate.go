package ocf

import (
	"fmt"
	"github.com/gobatch/gobatch/config"
	"math"
	"strings"
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
	return cfg, nil
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

// Translation is a gobatch configuration made from an ocf-data-sampler one (config.Translation):
// Raw has the shape a gobatch TOML file decodes to, without [batch] (gobatch's own options come
// from the command line or the Loader's keywords); Lines and Fields say where each gobatch field
// comes from in the YAML file ("source[1].channels" -> the line of, and the key
// input_data.nwp.ukv.channels).
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
// translated and what is not yet matched). It refuses what gobatch cannot run at all,
// as Problems naming the key: no satellite (gobatch's examples are centred on an anchor
// grid), a list of several zarr_paths, an odd or zero crop (ocf-data-sampler itself fails on
// every sample with an odd one).
func Translate(cfg *Config, lines func(field string) int) (*Translation, []Problem) {
	t := &translator{lines: lines, out: map[string]int{}, names: map[string]string{}}
	var sources []any
	if cfg.Satellite == nil {
		t.bad("input_data.satellite", "missing; gobatch centres its examples on an anchor grid, the satellite, so it needs one (docs/OCF.md)")
	} else {
		sources = append(sources, t.satellite(cfg.Satellite, cfg.Generation != nil, len(sources)))
	}
	for _, n := range cfg.NWP {
		sources = append(sources, t.nwp(n, len(sources)))
	}
	if cfg.Generation != nil {
		sources = append(sources, t.generation(cfg, len(sources)))
		sources = append(sources, t.capacity(cfg.Generation, len(sources)))
	}
	if len(t.problems) > 0 {
		return nil, t.problems
	}
	return &Translation{Raw: map[string]any{"source": sources}, Lines: t.out, Fields: t.names}, nil
}

type translator struct {
	lines    func(field string) int
	out      map[string]int
	names    map[string]string
	problems []Problem
}

func (t *translator) bad(field, format string, args ...any) {
	t.problems = append(t.problems, Problem{Line: t.lines(field), Field: field, Msg: fmt.Sprintf(format, args...)})
}

// set writes key into source i, remembering that it comes from YAML field from.
func (t *translator) set(src map[string]any, i int, key string, v any, from string) {
	switch l := v.(type) { // lists as the TOML decoder gives them
	case []string:
		v = anyList(l)
	case []float64:
		v = anyList(l)
	case []int64:
		v = anyList(l)
	}
	src[key] = v
	field := fmt.Sprintf("source[%d].%s", i, key)
	t.out[field], t.names[field] = t.lines(from), from
}

func (t *translator) window(src map[string]any, i int, w Window, path string) {
	t.set(src, i, "time_resolution_minutes", w.Resolution, path+".time_resolution_minutes")
	t.set(src, i, "interval_start_minutes", w.Start, path+".interval_start_minutes")
	t.set(src, i, "interval_end_minutes", w.End, path+".interval_end_minutes")
}

// dropout translates a dropout: the timedeltas, and the fraction as one number (split evenly
// across them) or as the list of per-timedelta probabilities.
func (t *translator) dropout(src map[string]any, i int, d Dropout, path string) {
	if len(d.Timedeltas) == 0 {
		return
	}
	t.set(src, i, "dropout_timedeltas_minutes", d.Timedeltas, path+".dropout_timedeltas_minutes")
	if d.FractionIsList {
		t.set(src, i, "dropout_fraction", d.Fraction, path+".dropout_fraction")
	} else {
		t.set(src, i, "dropout_fraction", d.Fraction[0], path+".dropout_fraction")
	}
}

// nwpDropout translates an NWP's dropout, which moves the latest init time an example may use
// (t0_available). ocf-data-sampler's NWP selection fails on every sample with a list of
// fractions or a zero timedelta, so these are refused.
func (t *translator) nwpDropout(src map[string]any, i int, d Dropout, path string) {
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
	t.dropout(src, i, d, path)
}

func (t *translator) grid(src map[string]any, i int, g Grid, path string, accum []string) {
	t.out[fmt.Sprintf("source[%d]", i)], t.names[fmt.Sprintf("source[%d]", i)] = t.lines(path), path
	if len(g.ZarrPaths) != 1 {
		t.bad(path+".zarr_path", "%d paths; gobatch reads one store per source (ocf-data-sampler concatenates several along time)", len(g.ZarrPaths))
	} else {
		t.set(src, i, "store", g.ZarrPaths[0], path+".zarr_path")
	}
	t.window(src, i, g.Window, path)
	for _, k := range []struct {
		key string
		v   int64
	}{{"image_size_pixels_height", g.Height}, {"image_size_pixels_width", g.Width}} {
		if k.v <= 0 || k.v%2 != 0 {
			t.bad(path+"."+k.key, "%d; gobatch needs an even crop > 0 (ocf-data-sampler fails on every sample with an odd one)", k.v)
		}
		t.set(src, i, k.key, k.v, path+"."+k.key)
	}
	t.set(src, i, "channels", g.Channels, path+".channels")
	n := len(g.Channels)
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
	if n > 0 {
		t.set(src, i, "normalise_mean", mean, path+".normalisation_constants")
		t.set(src, i, "normalise_std", std, path+".normalisation_constants")
	}
	if clip {
		t.set(src, i, "normalise_clip_min", lo, path+".normalisation_constants")
		t.set(src, i, "normalise_clip_max", hi, path+".normalisation_constants")
	}
	t.nanFill(src, i, g.Dropout, path)
}

// nanFill: after the normalisation, ocf-data-sampler fills every NaN of a source with its
// dropout_value (0 by default).
func (t *translator) nanFill(src map[string]any, i int, d Dropout, path string) {
	t.set(src, i, "nan_fill", d.Value, path+".dropout_value")
}

func (t *translator) satellite(s *Satellite, sites bool, i int) map[string]any {
	const path = "input_data.satellite"
	src := map[string]any{"name": SatelliteName, "kind": "zarr", "role": "grid", "anchor": true, "rules": "ocf"}
	t.grid(src, i, s.Grid, path, nil)
	t.dropout(src, i, s.Dropout, path)
	if sites {
		t.set(src, i, "locations", GenerationName, "input_data.generation")
	}
	return src
}

func (t *translator) nwp(n *NWP, i int) map[string]any {
	path := "input_data.nwp." + n.Key
	src := map[string]any{"name": n.Key, "kind": "zarr", "role": "nwp"}
	t.grid(src, i, n.Grid, path, n.AccumChannels)
	if crs := nwpCRS[strings.ToLower(n.Provider)]; crs != "" {
		t.set(src, i, "crs", crs, path+".provider")
	}
	if n.MaxStaleness != nil {
		t.set(src, i, "max_staleness_minutes", *n.MaxStaleness, path+".max_staleness_minutes")
	}
	if len(n.AccumChannels) > 0 {
		t.set(src, i, "accum_channels", n.AccumChannels, path+".accum_channels")
	}
	t.nwpDropout(src, i, n.Dropout, path)
	return src
}

func (t *translator) generation(cfg *Config, i int) map[string]any {
	const path = "input_data.generation"
	g := cfg.Generation
	t.out[fmt.Sprintf("source[%d]", i)], t.names[fmt.Sprintf("source[%d]", i)] = t.lines(path), path
	src := map[string]any{"name": GenerationName, "kind": "zarr", "role": "points", "nearest_k": int64(1)}
	t.set(src, i, "store", g.ZarrPath, path+".zarr_path")
	t.set(src, i, "variable", GenerationVariable, path+".zarr_path")
	t.window(src, i, g.Window, path)
	t.dropout(src, i, g.Dropout, path)
	t.nanFill(src, i, g.Dropout, path)
	t.set(src, i, "capacity", CapacityName, path+".zarr_path")
	t.siteFeatures(src, i, cfg)
	return src
}

// capacity is the generation store's capacity_mwp over the generation's window: the
// generation is divided by it, per time step, as ocf-data-sampler divides.
func (t *translator) capacity(g *Generation, i int) map[string]any {
	const path = "input_data.generation"
	t.out[fmt.Sprintf("source[%d]", i)], t.names[fmt.Sprintf("source[%d]", i)] = t.lines(path), path
	src := map[string]any{"name": CapacityName, "kind": "zarr", "role": "points", "nearest_k": int64(1)}
	t.set(src, i, "store", g.ZarrPath, path+".zarr_path")
	t.set(src, i, "variable", CapacityVariable, path+".zarr_path")
	t.window(src, i, g.Window, path)
	return src
}

// siteFeatures asks for the values PVNetDataset adds to every sample, on the generation source
// the examples are centred on: the datetime encodings (always), the solar position and the t0
// embedding (when configured).
func (t *translator) siteFeatures(src map[string]any, i int, cfg *Config) {
	t.set(src, i, "datetime_features", true, "input_data.generation")
	if w := cfg.SolarPosition; w != nil {
		const path = "input_data.solar_position"
		t.set(src, i, "solar_position", map[string]any{
			"time_resolution_minutes": w.Resolution, "interval_start_minutes": w.Start, "interval_end_minutes": w.End,
		}, path)
	}
	if len(cfg.T0Embedding) > 0 {
		list := make([]string, len(cfg.T0Embedding))
		for j, e := range cfg.T0Embedding {
			list[j] = e[0] + ":" + e[1]
		}
		t.set(src, i, "t0_embedding", list, "input_data.t0_embedding.embeddings")
	}
}

func anyList[T any](l []T) []any {
	out := make([]any, len(l))
	for i, x := range l {
		out[i] = x
	}
	return out
}
