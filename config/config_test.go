// The tests are an external package so that they can parse real source kinds (package
// sampler registers "synthetic" and "zarr"); the dot import keeps them readable.
package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

const good = `# a comment
[batch]
size = 8
seed = 7
batches = 100

[ring]
slots = 3

[[source]]
name = "x"
kind = "synthetic"
shape = [19, 12, 32, 32]
dtype = "float32"
delay_ms = 5

[[source]]
name = "y"
kind = "synthetic"
shape = []   # one scalar per example
dtype = "uint8"
`

const goodJSON = `{
  "batch": {"size": 8, "seed": 7, "batches": 100},
  "ring": {"slots": 3},
  "source": [
    {"name": "x", "kind": "synthetic", "shape": [19, 12, 32, 32], "dtype": "float32", "delay_ms": 5},
    {"name": "y", "kind": "synthetic", "shape": [], "dtype": "uint8", "delay_ms": null}
  ]
}`

func TestParseGood(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		format Format
	}{{"toml", good, TOML}, {"json", goodJSON, JSON}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("good."+tc.name, []byte(tc.data), tc.format)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Batch, Batch{Size: 8, Seed: 7, Batches: 100, Order: OrderStream}) || cfg.Ring.Slots != 3 {
				t.Fatalf("batch/ring: %+v %+v", cfg.Batch, cfg.Ring)
			}
			if len(cfg.Sources) != 2 {
				t.Fatalf("sources: %+v", cfg.Sources)
			}
			x := cfg.Sources[0].Spec.(*sampler.Synthetic)
			if cfg.Sources[0].Name != "x" || cfg.Sources[0].Kind != "synthetic" ||
				!reflect.DeepEqual(x.Shape, []int{19, 12, 32, 32}) || x.DType != ring.Float32 || x.Delay != 5*time.Millisecond {
				t.Fatalf("source 0: %+v %+v", cfg.Sources[0], x)
			}
			y := cfg.Sources[1].Spec.(*sampler.Synthetic)
			if len(y.Shape) != 0 || y.DType != ring.Uint8 || y.Delay != 0 || cfg.Sources[1].Index != 1 {
				t.Fatalf("source 1: %+v", y)
			}
			want := []Tensor{
				{Name: "x", DType: ring.Float32, Shape: []int{8, 19, 12, 32, 32}},
				{Name: "y", DType: ring.Uint8, Shape: []int{8}},
			}
			if got := cfg.Tensors(); !reflect.DeepEqual(got, want) {
				t.Fatalf("tensors %+v, want %+v", got, want)
			}
			if n := cfg.Tensors()[0].NBytes(); n != 8*19*12*32*32*4 {
				t.Fatalf("nbytes %d", n)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse("d.toml", []byte("[batch]\nsize=1\n[[source]]\nname=\"a\"\nkind=\"synthetic\"\nshape=[2]\ndtype=\"int64\"\n"), TOML)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ring.Slots != DefaultSlots || cfg.Batch.Seed != 0 || cfg.Batch.Batches != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestLoadPicksFormatByExtension(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"c.toml": good, "c.json": goodJSON, "c.JSON": goodJSON} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.File != p || len(cfg.Sources) != 2 {
			t.Fatalf("%s: %+v", name, cfg)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// src is a valid source table with one line replaced (or dropped when repl is empty).
func src(key, repl string) string {
	lines := []string{`name = "x"`, `kind = "synthetic"`, `shape = [4, 5]`, `dtype = "float32"`}
	out := []string{"[[source]]"}
	for _, l := range lines {
		if strings.HasPrefix(l, key+" ") {
			if repl != "" {
				out = append(out, repl)
			}
			continue
		}
		out = append(out, l)
	}
	if key == "" && repl != "" {
		out = append(out, repl)
	}
	return strings.Join(out, "\n") + "\n"
}

const batch = "[batch]\nsize = 4\n" // lines 1-2; a source table then starts on line 3

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  string
		field string
		line  int
		msg   string // substring of the message
	}{
		{"syntax", "[batch]\nsize = = 4\n", "", 2, "TOML syntax error"},
		{"duplicate key", "[batch]\nsize = 4\nsize = 5\n", "", 3, "syntax error"},
		{"no batch", src("", ""), "batch", 0, "missing required table [batch]"},
		{"batch not a table", "batch = 4\n" + src("", ""), "batch", 1, "expected a table, got the integer 4"},
		{"no size", "[batch]\nseed = 1\n" + src("", ""), "batch.size", 1, "missing required key; expected an integer in 1..4294967295"},
		{"size zero", "[batch]\nsize = 0\n" + src("", ""), "batch.size", 2, "0 is out of range"},
		{"size negative", "[batch]\nsize = -3\n" + src("", ""), "batch.size", 2, "-3 is out of range"},
		{"size float", "[batch]\nsize = 4.0\n" + src("", ""), "batch.size", 2, "expected an integer in 1..4294967295, got the float 4"},
		{"size string", "[batch]\nsize = \"4\"\n" + src("", ""), "batch.size", 2, `got the string "4"`},
		{"seed negative", "[batch]\nsize = 4\nseed = -1\n" + src("", ""), "batch.seed", 3, "out of range; expected an integer >= 0"},
		{"batches bool", "[batch]\nsize = 4\nbatches = true\n" + src("", ""), "batch.batches", 3, "got the boolean true"},
		{"order unknown", "[batch]\nsize = 4\norder = \"epoch\"\n" + src("", ""), "batch.order", 3, `unknown order "epoch"; expected "stream" or "epochs"`},
		{"order not a string", "[batch]\nsize = 4\norder = 2\n" + src("", ""), "batch.order", 3, "expected a string, got the integer 2"},
		{"epochs with batches", "[batch]\nsize = 4\nbatches = 10\norder = \"epochs\"\n" + src("", ""), "batch.batches", 3, `10 with order = "epochs"`},
		{"unknown batch key", "[batch]\nsize = 4\nszie = 4\n" + src("", ""), "batch.szie", 3, "unknown key; expected one of size, seed, batches"},
		{"unknown top key", "[bath]\nsize = 4\n" + batch + src("", ""), "bath", 1, "unknown key; expected one of batch, ring, node, source"},
		{"slots zero", batch + "[ring]\nslots = 0\n" + src("", ""), "ring.slots", 4, "expected an integer in 2..1024"},
		{"slots one", batch + "[ring]\nslots = 1\n" + src("", ""), "ring.slots", 4, "1 is out of range; expected an integer in 2..1024"},
		{"slots too many", batch + "[ring]\nslots = 2000\n" + src("", ""), "ring.slots", 4, "2000 is out of range"},
		{"unknown ring key", batch + "[ring]\nslot = 3\n" + src("", ""), "ring.slot", 4, "unknown key; expected one of slots"},
		{"no source", batch, "source", 0, "expected at least one [[source]] table"},
		{"source not array", batch + "[source]\nname = \"x\"\n", "source", 3, "expected an array of tables ([[source]]), got a table"},
		{"no name", batch + src("name", ""), "source[0].name", 3, "missing required key; expected a string"},
		{"name type", batch + src("name", "name = 3"), "source[0].name", 4, "expected a string, got the integer 3"},
		{"name bad chars", batch + src("name", `name = "a-b"`), "source[0].name", 4, `invalid name "a-b"`},
		{"name empty", batch + src("name", `name = ""`), "source[0].name", 4, `invalid name ""`},
		{"name too long", batch + src("name", `name = "`+strings.Repeat("a", 32)+`"`), "source[0].name", 4, "1 to 31 characters"},
		{"duplicate name", batch + src("", "") + src("", ""), "source[1].name", 9, `duplicate name "x"; source[0] has it already`},
		{"no kind", batch + src("kind", ""), "source[0].kind", 3, "missing required key"},
		{"unknown kind", batch + src("kind", `kind = "zar"`), "source[0].kind", 5, `unknown kind "zar"; expected one of `},
		{"no shape", batch + src("shape", ""), "source[0].shape", 3, "missing required key; expected an array of at most 7 integers in 1..2147483647"},
		{"shape not array", batch + src("shape", "shape = 4"), "source[0].shape", 6, "got the integer 4"},
		{"shape element", batch + src("shape", `shape = [4, "5"]`), "source[0].shape", 6, `element 1: expected an integer in 1..2147483647, got the string "5"`},
		{"shape zero", batch + src("shape", "shape = [4, 0]"), "source[0].shape", 6, "element 1: 0 is out of range"},
		{"shape too many dims", batch + src("shape", "shape = [1,1,1,1,1,1,1,1]"), "source[0].shape", 6, "8 elements; expected an array of at most 7"},
		{"shape too big", batch + src("shape", "shape = [1048576, 1048576, 1048576]"), "source[0].shape", 6, "a batch would exceed"},
		{"no dtype", batch + src("dtype", ""), "source[0].dtype", 3, "missing required key"},
		{"dtype unknown", batch + src("dtype", `dtype = "float16"`), "source[0].dtype", 7, `unknown dtype "float16"; expected one of float32, float64, int32, int64, uint8`},
		{"dtype type", batch + src("dtype", "dtype = 32"), "source[0].dtype", 7, "expected a string, got the integer 32"},
		{"delay negative", batch + src("", "delay_ms = -1"), "source[0].delay_ms", 8, "expected an integer in 0..3600000"},
		{"delay float", batch + src("", "delay_ms = 1.5"), "source[0].delay_ms", 8, "got the float 1.5"},
		{"unknown source key", batch + src("", "dtpye = \"x\""), "source[0].dtpye", 8, "unknown key; expected one of name, kind, shape, dtype, delay_ms"},
		{"second source line", batch + src("", "") + "\n# gap\n" + src("dtype", `dtype = "f32"`), "source[1].dtype", 14, `unknown dtype "f32"`},
		{"dotted header", batch + src("", "") + "[source.extra]\nk = 1\n", "source[0].extra", 8, "unknown key"},
		{"inline source falls back", `source = [{name = "x", kind = "synthetic", shape = [1], dtype = "int9"}]` + "\n" + batch, "source[0].dtype", 1, `unknown dtype "int9"`},
		{"comment and string", batch + src("name", `name = "a#b" # comment`) + "bogus = 1\n", "source[0].bogus", 8, "unknown key"},
		{"multi-line array", batch + src("shape", "shape = [\n  4,\n  0,\n]") + "dtypo = 1\n", "source[0].dtypo", 11, "unknown key"},
		{"too many sources", batch + strings.Repeat("[[source]]\n", 33), "source", 3, "33 sources; at most 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, "bad.toml", tc.data, TOML, tc.field, tc.line, tc.msg)
		})
	}
}

func TestJSONErrors(t *testing.T) {
	srcJSON := func(extra string) string {
		return `{"batch": {"size": 4},
"source": [
  {"name": "x", "kind": "synthetic", "shape": [4, 5], "dtype": "float32"},
  {"name": "y", "kind": "synthetic",
   "shape": [4, 5],` + extra + `
   "dtype": "float32"}
]}`
	}
	for _, tc := range []struct {
		name  string
		data  string
		field string
		line  int
		msg   string
	}{
		{"syntax", "{\"batch\": {\"size\": 4,}\n}", "", 1, "JSON syntax error"},
		{"syntax line", "{\"batch\":\n\n {\"size\" 4}}", "", 3, "JSON syntax error"},
		{"empty", "", "", 0, "empty document"},
		{"trailing", "{} {}", "", 0, "unexpected data after"},
		{"top not object", "[1]", "", 1, "expected a JSON object at the top level, got an array"},
		{"size float", `{"batch": {"size": 4.5}, "source": []}`, "batch.size", 1, "got the number 4.5"},
		{"unknown key", srcJSON(` "delay": 3,`), "source[1].delay", 5, "unknown key"},
		{"bad dtype", strings.Replace(srcJSON(""), `"dtype": "float32"}
]`, `"dtype": "f8"}
]`, 1), "source[1].dtype", 6, `unknown dtype "f8"`},
		{"source element not object", `{"batch": {"size": 4}, "source": [3]}`, "source[0]", 1, "expected a table, got the number 3"},
		{"empty source list", `{"batch": {"size": 4}, "source": []}`, "source", 1, "empty; expected at least one"},
		{"duplicate key", "{\"batch\": {\"size\": 4,\n \"size\": 5}, \"source\": []}", "batch.size", 1, "duplicate key"},
		{"missing key line", srcJSON(""), "", 0, ""}, // valid: checked below
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.msg == "" {
				if _, err := Parse("ok.json", []byte(tc.data), JSON); err != nil {
					t.Fatal(err)
				}
				return
			}
			checkErr(t, "bad.json", tc.data, JSON, tc.field, tc.line, tc.msg)
		})
	}
}

func checkErr(t *testing.T, file, data string, format Format, field string, line int, msg string) {
	t.Helper()
	cfg, err := Parse(file, []byte(data), format)
	if err == nil {
		t.Fatalf("no error; got %+v", cfg)
	}
	if cfg != nil {
		t.Fatalf("config returned with an error")
	}
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("error %T %v is not Errors", err, err)
	}
	for _, e := range es {
		if e.Field == field && strings.Contains(e.Msg, msg) {
			if e.Line != line {
				t.Fatalf("%s: line %d, want %d (%v)", field, e.Line, line, err)
			}
			if e.File != file || !strings.HasPrefix(e.Error(), file) {
				t.Fatalf("error does not name the file: %v", e)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatal("errors.As(*FieldError) failed")
			}
			return
		}
	}
	t.Fatalf("no error for field %q containing %q in:\n%v", field, msg, err)
}

func TestErrorText(t *testing.T) {
	_, err := Parse("c.toml", []byte(batch+src("dtype", `dtype = "f32"`)), TOML)
	want := `c.toml:7: source[0].dtype: unknown dtype "f32"; expected one of float32, float64, int32, int64, uint8`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := Parse("c.toml", []byte("[batch]\nsize = 0\n[ring]\nslots = 0\n"+src("dtype", `dtype = "x"`)), TOML)
	var es Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
}

// A later kind registers itself and reads keys through a Table, including nested tables.
type fakeSpec struct{ path string }

func (f *fakeSpec) Example() ([]int, ring.DType) { return []int{2}, ring.Float64 }

// registerForTest registers a test kind once per test binary (tests may run with -count > 1).
var testKinds sync.Map

func registerForTest(name string, k Kind) {
	if _, loaded := testKinds.LoadOrStore(name, true); !loaded {
		RegisterKind(name, k)
	}
}

func TestRegisterKind(t *testing.T) {
	registerForTest("fake_for_test", func(tb *Table) Spec {
		p, ok := tb.MustString("path")
		if sub := tb.Sub("opts"); sub != nil {
			sub.Bool("fast", false)
			sub.Float("ratio", 1)
			sub.Strings("vars")
			sub.Floats("weights")
			sub.Done()
		}
		if !ok {
			return nil
		}
		return &fakeSpec{path: p}
	})
	data := batch + "[[source]]\nname = \"f\"\nkind = \"fake_for_test\"\npath = \"/d\"\n[source.opts]\nfast = true\nratio = 2\nvars = [\"a\", 1]\nslow = 1\nweights = [1, 2.5, \"x\"]\n"
	_, err := Parse("k.toml", []byte(data), TOML)
	var es Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
	if es[1].Field != "source[0].opts.weights" || es[1].Line != 12 || !strings.Contains(es[1].Msg, `element 2: expected a number, got the string "x"`) {
		t.Fatalf("weights: %+v", es[1])
	}
	es = Errors{es[0], es[2]}
	if es[0].Field != "source[0].opts.vars" || es[0].Line != 10 || !strings.Contains(es[0].Msg, "element 1: expected a string") {
		t.Fatalf("vars: %+v", es[0])
	}
	if es[1].Field != "source[0].opts.slow" || es[1].Line != 11 || !strings.Contains(es[1].Msg, "expected one of fast, ratio, vars, weights") {
		t.Fatalf("slow: %+v", es[1])
	}
	data = batch + "[[source]]\nname = \"f\"\nkind = \"fake_for_test\"\npath = \"/d\"\n[source.opts]\nvars = [\"a\"]\n"
	cfg, err := Parse("k.toml", []byte(data), TOML)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sources[0].Spec.(*fakeSpec).path != "/d" {
		t.Fatalf("spec %+v", cfg.Sources[0].Spec)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering twice did not panic")
		}
	}()
	RegisterKind("fake_for_test", nil)
}

func TestDType(t *testing.T) {
	for d := ring.Bool; d <= ring.Float64; d++ {
		got, ok := ParseDType(d.String(), []ring.DType{d})
		if !ok || got != d || d.Size() == 0 {
			t.Fatalf("dtype %d", d)
		}
	}
	if ring.DType(0).Size() != 0 || ring.DType(13).String() != "dtype(13)" {
		t.Fatal("invalid dtype")
	}
}

type captured struct {
	s      string
	b      bool
	i      int64
	f      float64
	ints   []int64
	floats []float64
	strs   []string
	subs   int
}

func (c *captured) Example() ([]int, ring.DType) { return nil, ring.Uint8 }

// The getters a later kind uses, on TOML and JSON input alike.
func TestTableGetters(t *testing.T) {
	registerForTest("getters_for_test", func(tb *Table) Spec {
		c := &captured{}
		c.s = tb.String("s", "def")
		c.b = tb.Bool("b", false)
		c.i, _ = tb.MustInt("i", 0, 10)
		c.f = tb.Float("f", 0)
		c.ints, _ = tb.MustInts("ints", 0, 9, 4)
		c.floats = tb.Floats("floats")
		c.strs = tb.Strings("strs")
		for _, sub := range tb.Tables("vars") {
			sub.MustString("n")
			sub.Done()
			c.subs++
		}
		return c
	})
	want := &captured{s: "v", b: true, i: 3, f: 2, ints: []int64{1, 2}, floats: []float64{1, 2.5}, strs: []string{"a", "b"}, subs: 2}
	toml := batch + "[[source]]\nname = \"g\"\nkind = \"getters_for_test\"\ns = \"v\"\nb = true\ni = 3\nf = 2\nints = [1, 2]\nfloats = [1, 2.5]\nstrs = [\"a\", \"b\"]\n" +
		"[[source.vars]]\nn = \"x\"\n[[source.vars]]\nn = \"y\"\n"
	js := `{"batch": {"size": 4}, "source": [{"name": "g", "kind": "getters_for_test", "s": "v", "b": true, "i": 3, "f": 2,
 "ints": [1, 2], "floats": [1, 2.5], "strs": ["a", "b"], "vars": [{"n": "x"}, {"n": "y"}]}]}`
	for _, tc := range []struct {
		data   string
		format Format
	}{{toml, TOML}, {js, JSON}} {
		cfg, err := Parse("g", []byte(tc.data), tc.format)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Sources[0].Spec.(*captured); !reflect.DeepEqual(got, want) {
			t.Fatalf("format %d: %+v, want %+v", tc.format, got, want)
		}
	}
	// A bad element of an array of tables is named with its index and line.
	_, err := Parse("g.toml", []byte(strings.Replace(toml, "n = \"y\"", "n = 5", 1)), TOML)
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Field != "source[0].vars[1].n" || es[0].Line != 16 {
		t.Fatalf("%v", err)
	}
}

func TestBatchOrder(t *testing.T) {
	for _, tc := range []struct{ line, want string }{{"", OrderStream}, {`order = "stream"`, OrderStream}, {`order = "epochs"`, OrderEpochs}} {
		cfg, err := Parse("o.toml", []byte("[batch]\nsize=1\n"+tc.line+"\n[[source]]\nname=\"a\"\nkind=\"synthetic\"\nshape=[2]\ndtype=\"int64\"\n"), TOML)
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if cfg.Batch.Order != tc.want {
			t.Fatalf("%q: order %q, want %q", tc.line, cfg.Batch.Order, tc.want)
		}
	}
}

// drop_last = false keeps the last batch of each epoch (padded); without epochs there is none.
func TestBatchDropLast(t *testing.T) {
	for _, tc := range []struct {
		lines string
		keep  bool
		err   string
	}{{"", false, ""}, {"order = \"epochs\"\ndrop_last = false", true, ""}, {"order = \"epochs\"\ndrop_last = true", false, ""},
		{"drop_last = false", false, "batch.drop_last: false with order = \"stream\""}} {
		cfg, err := Parse("o.toml", []byte("[batch]\nsize=1\n"+tc.lines+"\n[[source]]\nname=\"a\"\nkind=\"synthetic\"\nshape=[2]\ndtype=\"int64\"\n"), TOML)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.lines, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.lines, err)
		case cfg.Batch.KeepLast != tc.keep:
			t.Errorf("%q: KeepLast %v, want %v", tc.lines, cfg.Batch.KeepLast, tc.keep)
		}
	}
}

func TestNodeOnRankDeath(t *testing.T) {
	const rest = "[batch]\nsize=1\n[[source]]\nname=\"a\"\nkind=\"synthetic\"\nshape=[2]\ndtype=\"int64\"\n"
	for _, tc := range []struct{ table, want string }{
		{"", RankDeathStop}, {"[node]\non_rank_death = \"stop\"\n", RankDeathStop},
		{"[node]\non_rank_death = \"continue\"\n", RankDeathContinue},
	} {
		cfg, err := Parse("n.toml", []byte(tc.table+rest), TOML)
		if err != nil {
			t.Fatalf("%q: %v", tc.table, err)
		}
		if cfg.Node.OnRankDeath != tc.want {
			t.Fatalf("%q: on_rank_death %q, want %q", tc.table, cfg.Node.OnRankDeath, tc.want)
		}
	}
	_, err := Parse("n.toml", []byte("[node]\non_rank_death = \"retry\"\n"+rest), TOML)
	if err == nil || !strings.Contains(err.Error(), `n.toml:2: node.on_rank_death: unknown value "retry"; expected "stop"`) {
		t.Fatalf("bad on_rank_death: %v", err)
	}
}

// Read loads a file or, with "-", JSON from stdin, and each configuration carries the sha256
// of the bytes it was parsed from.
func TestReadHashesWhatItRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := Read(path, nil, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	fromStdin, err := Read("-", strings.NewReader(goodJSON), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	wantFile, wantStdin := sha256.Sum256([]byte(good)), sha256.Sum256([]byte(goodJSON))
	if fromFile.SHA256 != hex.EncodeToString(wantFile[:]) || fromStdin.SHA256 != hex.EncodeToString(wantStdin[:]) {
		t.Errorf("sha256 %s and %s", fromFile.SHA256, fromStdin.SHA256)
	}
	if fromFile.File != path || fromStdin.File != StdinName || !reflect.DeepEqual(fromFile.Batch, fromStdin.Batch) {
		t.Errorf("files %q %q, batches %+v %+v", fromFile.File, fromStdin.File, fromFile.Batch, fromStdin.Batch)
	}
	if _, err := Read("-", strings.NewReader("{"), Overrides{}); err == nil || !strings.Contains(err.Error(), StdinName) {
		t.Errorf("bad JSON on stdin: %v", err)
	}
}

// TestOverridesArgsRoundTrip: Args is a canonical form ParseArgs reads back, in any order,
// and any other flag is refused (a node loader compares ranks' options this way).
func TestOverridesArgsRoundTrip(t *testing.T) {
	seed, keep := uint64(7), false
	o := Overrides{BatchSize: 32, Seed: &seed, Order: "epochs", DropLast: &keep, Concurrent: true, T0Start: "2024-01-01", T0End: "2024-02-01",
		Slots: 3, SegmentSteps: 48, ResidentSegments: 9}
	back, err := ParseArgs([]string{"--t0-end", "2024-02-01", "--segment-steps", "48", "--order", "epochs", "--seed", "7", "--batch-size", "32",
		"--slots", "3", "--drop-last=false", "--resident-segments", "9", "--concurrent", "--t0-start", "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(back.Args(), " "), strings.Join(o.Args(), " "); got != want {
		t.Errorf("ParseArgs(...).Args() = %q, want %q", got, want)
	}
	if got := (Overrides{}).Args(); len(got) != 0 {
		t.Errorf("empty overrides give %q", got)
	}
	if _, err := ParseArgs([]string{"--cache-mb", "5"}); err == nil {
		t.Error("ParseArgs accepted --cache-mb")
	}
}
