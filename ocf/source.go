package ocf

import (
	"fmt"
	"reflect"
)

// Source is one gobatch source of a translation, typed: each field is the gobatch key of its
// tag (`key:"..."`), the one place where the translation names gobatch's keys. A field at its
// zero value is a key left out, except those tagged always (a window's bounds, which may be
// 0); nil pointers are keys left out and a pointer to a zero is a zero. Where each field comes
// from in the YAML file is recorded as it is set (from), for messages.
type Source struct {
	Name string `key:"name"`
	// Label is the provider key an NWP's tensors are nested under when the key cannot name
	// them (translate.go, nwp).
	Label  string `key:"label"`
	Kind   string `key:"kind"`
	Role   string `key:"role"`
	Anchor bool   `key:"anchor"`
	Rules  string `key:"rules"`

	// Store is a path (string) or, for a satellite or NWP given several zarr_paths, the list of
	// them ([]string), which the sampler reads as one store along time, as ocf-data-sampler
	// concatenates them.
	Store    any    `key:"store"`
	Variable string `key:"variable"`
	// VariablesAsChannels: a store of one data array per channel (GFS), stacked along a
	// channel dimension as ocf-data-sampler's open_gfs does (sampler/stacked.go).
	VariablesAsChannels bool `key:"variables_as_channels"`

	Resolution int64 `key:"time_resolution_minutes,always"`
	Start      int64 `key:"interval_start_minutes,always"`
	End        int64 `key:"interval_end_minutes,always"`

	Height   int64    `key:"image_size_pixels_height"`
	Width    int64    `key:"image_size_pixels_width"`
	Channels []string `key:"channels"`

	Mean    []float64 `key:"normalise_mean"`
	Std     []float64 `key:"normalise_std"`
	ClipMin []float64 `key:"normalise_clip_min"`
	ClipMax []float64 `key:"normalise_clip_max"`
	NaNFill *float64  `key:"nan_fill"`

	DropoutTimedeltas []int64 `key:"dropout_timedeltas_minutes"`
	// DropoutFraction is one float64 (split evenly across the timedeltas) or a []float64 (one
	// probability per timedelta).
	DropoutFraction any `key:"dropout_fraction"`

	CRS           string   `key:"crs"`
	MaxStaleness  *int64   `key:"max_staleness_minutes"`
	AccumChannels []string `key:"accum_channels"`

	NearestK         int64    `key:"nearest_k"`
	Locations        string   `key:"locations"`
	Capacity         string   `key:"capacity"`
	DatetimeFeatures bool     `key:"datetime_features"`
	SolarPosition    *Window  `key:"solar_position"`
	T0Embedding      []string `key:"t0_embedding"`

	// Section is the YAML section the source comes from ("input_data.nwp.ukv").
	Section string
	origins map[string]string // gobatch key -> the YAML field it comes from
}

func newSource(name, role string) *Source {
	return &Source{Name: name, Kind: "zarr", Role: role, origins: map[string]string{}}
}

// from records that field (a pointer to one of s's fields) comes from YAML field yaml.
func (s *Source) from(field any, yaml string) {
	p := reflect.ValueOf(field).Pointer()
	v, t := reflect.ValueOf(s).Elem(), reflect.TypeOf(*s)
	for i := range t.NumField() {
		if key := keyOf(t.Field(i)); key != "" && v.Field(i).Addr().Pointer() == p {
			s.origins[key] = yaml
			return
		}
	}
	panic(fmt.Sprintf("ocf: from: %T is not a keyed field of Source", field))
}

// From is the YAML field gobatch key key comes from; "" when none was recorded.
func (s *Source) From(key string) string { return s.origins[key] }

func keyOf(f reflect.StructField) string {
	tag := f.Tag.Get("key")
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i]
		}
	}
	return tag
}

// Raw gives sources the shape package config reads (config.Translation): the [[source]]
// tables as a TOML file decodes to (lists as []any, a solar position window as a table), and
// the line and YAML field of every gobatch field it comes from.
func Raw(sources []*Source, lines func(field string) int) *Translation {
	tr := &Translation{Lines: map[string]int{}, Fields: map[string]string{}}
	tables := make([]any, len(sources))
	for i, s := range sources {
		at := fmt.Sprintf("source[%d]", i)
		tr.Lines[at], tr.Fields[at] = lines(s.Section), s.Section
		tables[i] = s.table(func(key string) {
			if from := s.origins[key]; from != "" {
				tr.Lines[at+"."+key], tr.Fields[at+"."+key] = lines(from), from
			}
		})
	}
	tr.Raw = map[string]any{"source": tables}
	return tr
}

// table is s as a TOML table, calling seen for every key it writes.
func (s *Source) table(seen func(key string)) map[string]any {
	out := map[string]any{}
	v, t := reflect.ValueOf(*s), reflect.TypeOf(*s)
	for i := range t.NumField() {
		f, key := t.Field(i), keyOf(t.Field(i))
		fv := v.Field(i)
		if key == "" || fv.IsZero() && f.Tag.Get("key") == key {
			continue
		}
		out[key] = tomlValue(fv)
		seen(key)
	}
	return out
}

// tomlValue is a field's value as the TOML decoder gives it: lists as []any, a window as the
// table of its three keys, pointers followed.
func tomlValue(v reflect.Value) any {
	switch x := v.Interface().(type) {
	case *Window:
		return map[string]any{"time_resolution_minutes": x.Resolution, "interval_start_minutes": x.Start, "interval_end_minutes": x.End}
	case *float64:
		return *x
	case *int64:
		return *x
	case []string:
		return anyList(x)
	case []float64:
		return anyList(x)
	case []int64:
		return anyList(x)
	default:
		return x
	}
}

func anyList[T any](l []T) []any {
	out := make([]any, len(l))
	for i, x := range l {
		out[i] = x
	}
	return out
}
