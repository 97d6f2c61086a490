package sampler

import (
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
)

// noOpener is a kind the configuration knows but no opener was registered for.
type noOpener struct{}

func (noOpener) Example() ([]int, ring.DType) { return []int{1}, ring.Float32 }

func init() {
	config.RegisterKind("test-no-opener", func(*config.Table) config.Spec { return noOpener{} })
}

// Open looks each kind's opener up: a kind without one is named at its source, and the zarr
// opener refuses another kind beside it.
func TestOpenLooksKindsUp(t *testing.T) {
	const synth = "[[source]]\nname = \"s\"\nkind = \"synthetic\"\nshape = [2]\ndtype = \"float32\"\n"
	for _, c := range []struct{ sources, want string }{
		{synth + "[[source]]\nname = \"n\"\nkind = \"test-no-opener\"\n", `source[1].kind: kind "test-no-opener" is not supported by this build`},
		{synth + "[[source]]\nname = \"z\"\nkind = \"zarr\"\nstore = \"a.zarr\"\nvariable = \"v\"\nrole = \"grid\"\nanchor = true\ntime_resolution_minutes = 5\ninterval_start_minutes = 0\ninterval_end_minutes = 0\nimage_size_pixels_height = 2\nimage_size_pixels_width = 2\n", `kind "synthetic" cannot be mixed with zarr sources`},
	} {
		cfg, err := config.Parse("t.toml", []byte("[batch]\nsize = 2\n"+c.sources), config.TOML)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(cfg, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
	cfg, err := config.Parse("t.toml", []byte("[batch]\nsize = 2\n"+synth+strings.ReplaceAll(synth, `"s"`, `"u"`)), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	set, err := Open(cfg, Options{})
	if err != nil || len(set.Tensors()) != 2 || set.Tensors()[1].Name != "u" || len(set.Plan().Sources) != 2 {
		t.Fatalf("two synthetic sources: %v %+v", err, set)
	}
}
