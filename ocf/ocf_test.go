package ocf

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func envOf(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// The expected values are what pyaml_env 1.2.2 (over PyYAML 6.0) returned for the same
// document with SATX=abc set and NOPE unset: only !ENV values are substituted, an unset
// variable without a default is "N/A", and "${X:}" is not a reference.
func TestEnvSubstitutionAsPyamlEnv(t *testing.T) {
	doc := "a: ${SATX}/x\nb: !ENV ${SATX}/x\nc: !ENV '${NOPE}'\nd: !ENV ${NOPE:def}-${SATX}\ne: !ENV ${SATX:}\nf: !ENV 5\ng: \"${SATX}\"\n"
	root, _, err := readYAML([]byte(doc), envOf(map[string]string{"SATX": "abc"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "${SATX}/x", "b": "abc/x", "c": "N/A", "d": "def-abc", "e": "${SATX:}", "f": "5", "g": "${SATX}"}
	for k, w := range want {
		v, _ := root.get(k)
		if v == nil || v.kind != kStr || v.s != w {
			t.Errorf("%s: got %+v, want the string %q", k, v, w)
		}
	}
}

// YAML 1.1 scalars as PyYAML's SafeLoader resolves them (yaml.safe_load gave
// {'a': '1e5', 'b': 100000.0, 'c': '0o17', 'd': 15, 'e': 90, 'f': date(2021, 1, 1), 'g': 0.5}).
func TestScalarsAsPyYAML(t *testing.T) {
	doc := "a: 1e5\nb: 1.0e+5\nc: 0o17\nd: 017\ne: 1:30\nf: 2021-01-01\ng: .5\nh: yes\ni: Off\nj: ~\nk: 0x1F\nl: -1_000\nm: .inf\n"
	root, _, err := readYAML([]byte(doc), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	check := func(k string, want kind, ok func(*value) bool) {
		v, _ := root.get(k)
		if v == nil || v.kind != want || (ok != nil && !ok(v)) {
			t.Errorf("%s: got %+v, want %s", k, v, want)
		}
	}
	check("a", kStr, func(v *value) bool { return v.s == "1e5" })
	check("b", kFloat, func(v *value) bool { return v.f == 1e5 })
	check("c", kStr, nil)
	check("d", kInt, func(v *value) bool { return v.i == 15 })
	check("e", kInt, func(v *value) bool { return v.i == 90 })
	check("f", kTime, nil)
	check("g", kFloat, func(v *value) bool { return v.f == 0.5 })
	check("h", kBool, func(v *value) bool { return v.b })
	check("i", kBool, func(v *value) bool { return !v.b })
	check("j", kNull, nil)
	check("k", kInt, func(v *value) bool { return v.i == 31 })
	check("l", kInt, func(v *value) bool { return v.i == -1000 })
	check("m", kFloat, func(v *value) bool { return math.IsInf(v.f, 1) })
}

const base = `input_data:
  satellite:
    zarr_path: sat.zarr
    time_resolution_minutes: 5
    interval_start_minutes: -30
    interval_end_minutes: 0
    image_size_pixels_height: 8
    image_size_pixels_width: 10
    channels: [IR_016, VIS006]
    normalisation_constants:
      IR_016: {mean: 1.0, std: 2.0}
      VIS006: {mean: 3.0, std: 4.0}
  nwp:
    ukv:
      provider: ukv
      zarr_path: ukv.zarr
      time_resolution_minutes: 60
      interval_start_minutes: -60
      interval_end_minutes: 120
      image_size_pixels_height: 4
      image_size_pixels_width: 6
      channels: [t, tp]
      accum_channels: [tp]
      normalisation_constants:
        t: {mean: 280.0, std: 10.0}
        diff_tp: {mean: 0.5, std: 2.0}
  generation:
    zarr_path: gen.zarr
    time_resolution_minutes: 30
    interval_start_minutes: -60
    interval_end_minutes: 120
`

func TestProblemsNameLineAndKey(t *testing.T) {
	for _, tc := range []struct {
		old, new string
		line     int
		field    string
	}{
		{"    interval_start_minutes: -30", "    interval_start_minutes: -32", 5, "input_data.satellite.interval_start_minutes"},
		{"        diff_tp: {mean: 0.5, std: 2.0}", "        tp: {mean: 0.5, std: 2.0}", 24, "input_data.nwp.ukv.normalisation_constants"},
		{"      provider: ukv", "      provider: metoffice", 15, "input_data.nwp.ukv.provider"},
		{"    zarr_path: gen.zarr", "    zarr_path: gen.zarr\n    capacity: 3", 29, "input_data.generation.capacity"},
		{"      VIS006: {mean: 3.0, std: 4.0}", "      VIS006: {mean: 3.0, std: -4.0}", 12, "input_data.satellite.normalisation_constants.VIS006.std"},
	} {
		doc := strings.Replace(base, tc.old, tc.new, 1)
		_, problems := Read([]byte(doc), envOf(nil))
		if len(problems) != 1 || problems[0].Line != tc.line || problems[0].Field != tc.field {
			t.Errorf("%q: got %+v, want one problem at line %d, %s", tc.new, problems, tc.line, tc.field)
		}
	}
	if _, problems := Read([]byte(base), envOf(nil)); len(problems) != 0 {
		t.Fatalf("base: %+v", problems)
	}
}

// translate reads and translates text, failing the test on any problem.
func translate(t *testing.T, text string) *Translation {
	t.Helper()
	cfg, problems := Read([]byte(text), envOf(nil))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	sources, problems := Translate(cfg, cfg.Line)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	return Raw(sources, cfg.Line)
}

// The typed translation: each source's fields and where they come from in the YAML; every
// keyed field Raw writes has its origin's line.
func TestTranslateTyped(t *testing.T) {
	cfg, _ := Read([]byte(base), envOf(nil))
	sources, problems := Translate(cfg, cfg.Line)
	if len(problems) != 0 || len(sources) != 4 {
		t.Fatalf("%d sources, %v", len(sources), problems)
	}
	sat, ukv := sources[0], sources[1]
	if sat.Role != "grid" || !sat.Anchor || sat.Rules != RulesName || sat.Store != "sat.zarr" || sat.From("store") != "input_data.satellite.zarr_path" {
		t.Errorf("satellite %+v", sat)
	}
	if ukv.Role != "nwp" || ukv.CRS != "EPSG:27700" || ukv.From("crs") != "input_data.nwp.ukv.provider" || ukv.Section != "input_data.nwp.ukv" {
		t.Errorf("ukv %+v", ukv)
	}
	tr := Raw(sources, cfg.Line)
	for i, s := range tr.Raw["source"].([]any) {
		for key := range s.(map[string]any) {
			if key == "name" || key == "kind" || key == "role" || key == "anchor" || key == "rules" || key == "nearest_k" {
				continue // set by the translation itself, not from a YAML key
			}
			if f := fmt.Sprintf("source[%d].%s", i, key); tr.Lines[f] == 0 || tr.Fields[f] == "" {
				t.Errorf("%s has no origin (line %d, field %q)", f, tr.Lines[f], tr.Fields[f])
			}
		}
	}
}

func TestTranslateBase(t *testing.T) {
	tr := translate(t, base)
	srcs := tr.Raw["source"].([]any)
	if len(srcs) != 4 {
		t.Fatalf("%d sources", len(srcs))
	}
	sat, ukv, gen, capa := srcs[0].(map[string]any), srcs[1].(map[string]any), srcs[2].(map[string]any), srcs[3].(map[string]any)
	if sat["anchor"] != true || sat["locations"] != GenerationName || sat["store"] != "sat.zarr" {
		t.Errorf("satellite: %v", sat)
	}
	if m := sat["normalise_mean"].([]any); m[0] != 1.0 || m[1] != 3.0 {
		t.Errorf("satellite means %v", m)
	}
	// The accumulated channel takes its diff_ constants; the provider gives the crs.
	if m, s := ukv["normalise_mean"].([]any), ukv["normalise_std"].([]any); m[1] != 0.5 || s[1] != 2.0 || ukv["crs"] != "EPSG:27700" || ukv["role"] != "nwp" {
		t.Errorf("ukv: %v", ukv)
	}
	if gen["role"] != "points" || gen["variable"] != GenerationVariable || gen["nearest_k"] != int64(1) {
		t.Errorf("generation: %v", gen)
	}
	// The values PVNetDataset computes: divided by the same store's capacity over the same
	// window, the datetime encodings, every source's NaNs filled with its dropout_value (0).
	if gen["capacity"] != CapacityName || capa["name"] != CapacityName || capa["variable"] != CapacityVariable ||
		capa["store"] != gen["store"] || capa["interval_start_minutes"] != gen["interval_start_minutes"] || capa["nan_fill"] != nil {
		t.Errorf("capacity: %v / %v", gen, capa)
	}
	if gen["datetime_features"] != true || gen["nan_fill"] != 0.0 || sat["nan_fill"] != 0.0 || ukv["nan_fill"] != 0.0 {
		t.Errorf("features or fills: %v / %v / %v", gen, sat, ukv)
	}
	if l := tr.Lines["source[1].channels"]; l != 22 {
		t.Errorf("source[1].channels is at line %d, want 22", l)
	}
	if f := tr.Fields["source[0].store"]; f != "input_data.satellite.zarr_path" {
		t.Errorf("source[0].store names %q", f)
	}
}

// The clip bounds (an absent one infinite), the dropout_values, the solar position and the t0
// embedding become gobatch's keys.
func TestTranslateValues(t *testing.T) {
	text := strings.Replace(base, "VIS006: {mean: 3.0, std: 4.0}", "VIS006: {mean: 3.0, std: 4.0, clip_min: 0.5}", 1)
	text = strings.Replace(text, "    channels: [IR_016, VIS006]\n", "    channels: [IR_016, VIS006]\n    dropout_value: -1.5\n", 1)
	text += "    dropout_value: 2.0\n  solar_position:\n    time_resolution_minutes: 15\n    interval_start_minutes: -30\n    interval_end_minutes: 60\n" +
		"  t0_embedding:\n    embeddings: [[1h, cyclic], [2y, linear]]\n"
	srcs := translate(t, text).Raw["source"].([]any)
	sat, ukv, gen := srcs[0].(map[string]any), srcs[1].(map[string]any), srcs[2].(map[string]any)
	lo, hi := sat["normalise_clip_min"].([]any), sat["normalise_clip_max"].([]any)
	if !math.IsInf(lo[0].(float64), -1) || lo[1] != 0.5 || !math.IsInf(hi[0].(float64), 1) || !math.IsInf(hi[1].(float64), 1) {
		t.Errorf("clip %v %v", lo, hi)
	}
	if _, ok := ukv["normalise_clip_min"]; ok {
		t.Errorf("ukv clips: %v", ukv)
	}
	if sat["nan_fill"] != -1.5 || gen["nan_fill"] != 2.0 {
		t.Errorf("fills %v %v", sat["nan_fill"], gen["nan_fill"])
	}
	sol := gen["solar_position"].(map[string]any)
	if sol["time_resolution_minutes"] != int64(15) || sol["interval_start_minutes"] != int64(-30) || sol["interval_end_minutes"] != int64(60) {
		t.Errorf("solar_position %v", sol)
	}
	if e := gen["t0_embedding"].([]any); len(e) != 2 || e[0] != "1h:cyclic" || e[1] != "2y:linear" {
		t.Errorf("t0_embedding %v", e)
	}
}

func TestTranslateRefusesWhatGobatchCannotRun(t *testing.T) {
	noSat := base[:strings.Index(base, "  satellite:")] + base[strings.Index(base, "  nwp:"):]
	noGen := noSat[:strings.Index(noSat, "  generation:")]
	cfg, problems := Read([]byte(noGen), envOf(nil))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	if _, problems = Translate(cfg, cfg.Line); len(problems) != 1 || problems[0].Field != "input_data" {
		t.Errorf("neither a satellite nor a generation: %+v", problems)
	}
	odd := strings.Replace(base, "image_size_pixels_width: 10", "image_size_pixels_width: 9", 1)
	cfg, _ = Read([]byte(odd), envOf(nil))
	if _, problems = Translate(cfg, cfg.Line); len(problems) != 1 || problems[0].Line != 8 {
		t.Errorf("odd crop: %+v", problems)
	}
}

// Without a satellite the generation is the anchor: the examples are centred on its
// locations, under ocf's rules.
func TestTranslateWithoutSatellite(t *testing.T) {
	noSat := base[:strings.Index(base, "  satellite:")] + base[strings.Index(base, "  nwp:"):]
	cfg, problems := Read([]byte(noSat), envOf(nil))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	srcs, problems := Translate(cfg, cfg.Line)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	var names []string
	for _, s := range srcs {
		names = append(names, s.Name)
		if s.Anchor != (s.Name == GenerationName) {
			t.Errorf("%s: anchor %v; want the generation alone", s.Name, s.Anchor)
		}
	}
	if g := srcs[1]; g.Name != GenerationName || g.Rules != RulesName || g.Role != "points" || g.Locations != "" {
		t.Errorf("sources %v; the generation %+v, want a points anchor under rules %q", names, g, RulesName)
	}
}

// Dropout goes over as given: an NWP's (which moves t0_available), a list of per-timedelta
// fractions as a list; the accumulated channels and max_staleness_minutes (0 too) are passed.
func TestTranslateDropoutAndAccum(t *testing.T) {
	text := strings.Replace(base, "      accum_channels: [tp]\n", "      accum_channels: [tp]\n      dropout_timedeltas_minutes: [-180]\n      dropout_fraction: 1.0\n      max_staleness_minutes: 0\n", 1)
	text = strings.Replace(text, "    channels: [IR_016, VIS006]\n", "    channels: [IR_016, VIS006]\n    dropout_timedeltas_minutes: [-10, -5]\n    dropout_fraction: [0.25, 0.5]\n", 1)
	text += "    dropout_timedeltas_minutes: [-30]\n    dropout_fraction: 0.5\n"
	srcs := translate(t, text).Raw["source"].([]any)
	sat, ukv, gen := srcs[0].(map[string]any), srcs[1].(map[string]any), srcs[2].(map[string]any)
	if f, ok := sat["dropout_fraction"].([]any); !ok || len(f) != 2 || f[0] != 0.25 || f[1] != 0.5 {
		t.Errorf("satellite dropout_fraction %v", sat["dropout_fraction"])
	}
	if gen["dropout_fraction"] != 0.5 || gen["dropout_timedeltas_minutes"].([]any)[0] != int64(-30) {
		t.Errorf("generation dropout %v %v", gen["dropout_fraction"], gen["dropout_timedeltas_minutes"])
	}
	if ukv["dropout_fraction"] != 1.0 || ukv["dropout_timedeltas_minutes"].([]any)[0] != int64(-180) || ukv["max_staleness_minutes"] != int64(0) {
		t.Errorf("ukv dropout / staleness: %v", ukv)
	}
	if a := ukv["accum_channels"].([]any); len(a) != 1 || a[0] != "tp" {
		t.Errorf("accum_channels %v", ukv["accum_channels"])
	}
	// ocf-data-sampler's NWP selection fails on every sample with a list or a zero timedelta
	for _, bad := range []struct{ old, new, field string }{
		{"      dropout_fraction: 1.0\n", "      dropout_fraction: [1.0]\n", "input_data.nwp.ukv.dropout_fraction"},
		{"      dropout_timedeltas_minutes: [-180]\n", "      dropout_timedeltas_minutes: [0]\n", "input_data.nwp.ukv.dropout_timedeltas_minutes"},
	} {
		cfg, problems := Read([]byte(strings.Replace(text, bad.old, bad.new, 1)), envOf(nil))
		if len(problems) != 0 {
			t.Fatal(problems)
		}
		if _, problems = Translate(cfg, cfg.Line); len(problems) != 1 || problems[0].Field != bad.field {
			t.Errorf("%q: %+v", bad.new, problems)
		}
	}
}

// Read never panics, whatever the bytes; it accepts or lists problems.
func FuzzRead(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("input_data: {nwp: {x: {provider: !ENV ${P:ukv}}}}\n<<: *a"))
	f.Add([]byte("a: &a {b: 1}\nc: {<<: *a, d: 0b_}\ne: [[\"\", cyclic]]"))
	f.Add([]byte("a: &a {b: *a}\n")) // recursive aliases: refused, not a stack overflow
	f.Add([]byte("a: &a {<<: *a}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, problems := Read(data, envOf(nil))
		if cfg == nil && len(problems) == 0 {
			t.Fatal("neither a configuration nor a problem")
		}
		if cfg != nil {
			Translate(cfg, cfg.Line)
		}
	})
}

// A value substituted from the environment (!ENV) is never printed: a message that quotes it
// shows the text before substitution, which names the variable.
func TestEnvValuesAreNotPrinted(t *testing.T) {
	const canary = "CANARY_5e1d"
	env := envOf(map[string]string{"SECRET": canary})
	for _, c := range []struct{ old, new, field string }{
		{"    time_resolution_minutes: 5\n", "    time_resolution_minutes: !ENV ${SECRET}\n", "input_data.satellite.time_resolution_minutes"},
		{"      provider: ukv\n", "      provider: !ENV ${SECRET}\n", "input_data.nwp.ukv.provider"},
	} {
		text := strings.Replace(base, c.old, c.new, 1)
		if text == base {
			t.Fatalf("%q not in the base configuration", c.old)
		}
		_, problems := Read([]byte(text), env)
		if len(problems) == 0 {
			t.Fatalf("%s: accepted", c.field)
		}
		for _, p := range problems {
			if strings.Contains(p.Msg, canary) {
				t.Errorf("%s: the secret is printed: %s", p.Field, p.Msg)
			}
			if p.Field == c.field && !strings.Contains(p.Msg, "${SECRET}") {
				t.Errorf("%s: %s does not name the variable", p.Field, p.Msg)
			}
		}
	}
}

// Merges (<<) cost work linear in the keys they copy, and count against the same bound as
// aliases: a merge of 200,000 keys reads at once (the file is then refused for its unknown
// keys, as ocf-data-sampler refuses it); eight merges of an anchor of 60,000 keys, or six of
// 200,000, pass the bound and are refused naming the line of the alias that did.
func TestMergesAreBoundedInWork(t *testing.T) {
	doc := func(keys, merges int) (string, int) {
		var b strings.Builder
		b.WriteString("big: &big\n")
		for i := range keys {
			fmt.Fprintf(&b, "  k%d: %d\n", i, i)
		}
		if merges == 0 {
			b.WriteString("input_data:\n  <<: *big\n")
			return b.String(), 0
		}
		b.WriteString("input_data:\n")
		for i := range merges {
			fmt.Fprintf(&b, "  m%d: {<<: *big}\n", i)
		}
		return b.String(), keys + 3 // the first merge's line
	}
	cases := []struct{ keys, merges int }{{200000, 0}, {60000, 8}, {200000, 6}}
	if raceEnabled {
		cases = []struct{ keys, merges int }{{60000, 0}, {60000, 8}}
	}
	for _, c := range cases {
		text, first := doc(c.keys, c.merges)
		_, problems := Read([]byte(text), envOf(nil))
		if len(problems) == 0 {
			t.Fatalf("%d keys, %d merges: accepted", c.keys, c.merges)
		}
		p := problems[0]
		switch {
		case c.merges == 0 && !strings.Contains(p.Msg, "unknown key"):
			t.Errorf("one merge of %d keys: %+v; want the unknown keys refused", c.keys, p)
		case c.merges > 0 && (!strings.Contains(p.Msg, "more than 1048576 values and merged keys") || p.Line < first || p.Line >= first+c.merges):
			t.Errorf("%d merges of %d keys: %+v; want the bound, at the line of one of the merges (%d ..)", c.merges, c.keys, p, first)
		}
	}
}

// An NWP key that cannot name its tensors (with the time tensors' suffixes) gets a short tensor
// name and keeps the key as the label the batch nests it under; a short key names them.
func TestTranslateLongNWPKey(t *testing.T) {
	long := strings.Replace(base, "    ukv:\n", "    ukv_with_a_rather_long_key:\n", 1)
	for _, c := range []struct{ text, name, label string }{{base, "ukv", ""}, {long, "nwp0", "ukv_with_a_rather_long_key"}} {
		cfg, problems := Read([]byte(c.text), envOf(nil))
		if len(problems) != 0 {
			t.Fatal(problems)
		}
		srcs, problems := Translate(cfg, cfg.Line)
		if len(problems) != 0 {
			t.Fatal(problems)
		}
		if n := srcs[1]; n.Role != "nwp" || n.Name != c.name || n.Label != c.label {
			t.Errorf("NWP source %q label %q; want %q, %q", n.Name, n.Label, c.name, c.label)
		}
	}
}
