package config_test

import (
	"testing"

	. "github.com/gobatch/gobatch/config"
	_ "github.com/gobatch/gobatch/sampler" // registers the "zarr" and "synthetic" kinds
)

// FuzzParse checks that no input makes the parser panic, and that it returns either a config or
// an error, never both or neither.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good), false)
	f.Add([]byte(goodJSON), true)
	f.Add([]byte(batch+src("shape", "shape = [\n 4,\n]")), false)
	f.Add([]byte("[[source.a]]\n[source.b]\nx.'y'.\"z\" = '''a\nb'''\n"), false)
	f.Add([]byte(`{"source": [{"name": 1}, []], "batch": null}`), true)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		format := TOML
		if isJSON {
			format = JSON
		}
		cfg, err := Parse("fuzz", data, format)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("cfg %v, err %v", cfg, err)
		}
		if cfg != nil {
			for _, tn := range cfg.Tensors() {
				if tn.NBytes() <= 0 || tn.NBytes() > MaxBatchBytes {
					t.Fatalf("tensor %+v", tn)
				}
			}
		}
	})
}
