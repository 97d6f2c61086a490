package feed

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/sampler/rules"
	"github.com/gobatch/gobatch/shm"
)

const oneSource = "[batch]\nsize = 2\nbatches = %d\n[ring]\nslots = 2\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [3]\ndtype = \"int32\"\n"

// openOneSource opens oneSource with a stream of batches batches.
func openOneSource(t *testing.T, batches int) (*config.Config, *sampler.Set) {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(fmt.Sprintf(oneSource, batches)), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	set, err := sampler.Open(cfg, sampler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, set
}

func TestWindowStart(t *testing.T) {
	cfg, set := openOneSource(t, 10)
	l, err := (Window{Start: 4, StartSet: true}).Layout(cfg, set)
	if err != nil || l.StartBatch != 4 || l.TotalBatches != 6 || l.Slots != 2 || l.BatchSize != 2 ||
		len(l.Tensors) != 1 || l.Tensors[0].DType != ring.Int32 || fmt.Sprint(l.Tensors[0].Shape) != "[2 3]" {
		t.Fatalf("%+v %v", l, err)
	}
	if _, err := (Window{Start: 10, StartSet: true}).Layout(cfg, set); err == nil || !strings.Contains(err.Error(), "--start 10 is past the end") {
		t.Fatalf("start past the end: %v", err)
	}
	cfg.Batch.Batches = 0
	if l, err := (Window{Start: 1 << 40, StartSet: true}).Layout(cfg, set); err != nil || l.TotalBatches != 0 {
		t.Fatalf("unbounded: %+v %v", l, err)
	}
}

// --epoch E bounds the ring to epoch E of the rank's stream; --start must lie inside it.
func TestWindowEpoch(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(strings.Replace(fmt.Sprintf(oneSource, 0), "batches = 0\n", "order = \"epochs\"\n", 1)), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	tensors := []config.Tensor{{Name: "x", DType: ring.Int32, Shape: []int{2, 3}}}
	st := statSource{tensors: tensors, st: sampler.Stats{Order: config.OrderEpochs, EpochBatches: 7}}
	for _, c := range []struct {
		f            Window
		start, total uint64
		err          string
	}{
		{f: Window{}, start: 0, total: 0}, // no --epoch: epochs one after another, unbounded
		{f: Window{Start: 9, StartSet: true}, start: 9, total: 0},
		{f: Window{Epoch: 0, EpochSet: true}, start: 0, total: 7},
		{f: Window{Epoch: 2, EpochSet: true}, start: 14, total: 7},
		{f: Window{Epoch: 2, EpochSet: true, Start: 18, StartSet: true}, start: 18, total: 3},
		{f: Window{Epoch: 2, EpochSet: true, Start: 20, StartSet: true}, start: 20, total: 1},
		{f: Window{Epoch: 2, EpochSet: true, Start: 21, StartSet: true}, err: "--start 21 is not in --epoch 2, whose batches are 14 .. 20 of this rank's stream (7 per epoch); expected --start in that range, or --epoch 3"},
		{f: Window{Epoch: 2, EpochSet: true, Start: 13, StartSet: true}, err: "--start 13 is not in --epoch 2"},
		{f: Window{Epoch: 1 << 62, EpochSet: true}, err: "past the largest stream index"},
		// --epochs N: epochs E .. E+N-1 one after another, the ring ending at (E+N) * 7
		{f: Window{Epoch: 2, EpochSet: true, Epochs: 1}, start: 14, total: 7},
		{f: Window{Epoch: 2, EpochSet: true, Epochs: 3}, start: 14, total: 21},
		{f: Window{Epoch: 2, EpochSet: true, Epochs: 3, Start: 18, StartSet: true}, start: 18, total: 17},
		{f: Window{Epoch: 2, EpochSet: true, Epochs: 3, Start: 21, StartSet: true}, err: "--start 21 is not in --epoch 2"},
		{f: Window{Epoch: 1 << 40, EpochSet: true, Epochs: 1 << 62}, err: "the last epoch's batches are past the largest stream index"},
		{f: Window{Epoch: 1 << 40, EpochSet: true, Epochs: 1<<64 - 1}, err: "past the largest epoch number"},
	} {
		l, err := c.f.Layout(cfg, st)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %v, want %q", c.f, err, c.err)
			}
			continue
		}
		if err != nil || l.StartBatch != c.start || l.TotalBatches != c.total {
			t.Errorf("%+v: start %d total %d (%v), want %d %d", c.f, l.StartBatch, l.TotalBatches, err, c.start, c.total)
		}
	}
	cfg.Batch.Order = config.OrderStream
	stream := statSource{tensors: tensors, st: sampler.Stats{Order: config.OrderStream}}
	if _, err := (Window{Epoch: 1, EpochSet: true}).Layout(cfg, stream); err == nil || !strings.Contains(err.Error(), `--epoch 1 needs [batch] order = "epochs"; this configuration's order is "stream"`) {
		t.Errorf("--epoch on a stream: %v", err)
	}
}

// statSource is a Source of given tensors, statistics and view, for the layout's tests.
type statSource struct {
	sampler.Source
	tensors []config.Tensor
	st      sampler.Stats
	view    sampler.View
}

func (s statSource) Tensors() []config.Tensor { return s.tensors }
func (s statSource) Stats() sampler.Stats     { return s.st }
func (s statSource) View() sampler.View       { return s.view }
func (s statSource) Warnings() []string       { return nil }

// The ring's batch description (PROTOCOL.md 2.9) says the order, the rank's batches per epoch
// and the samples, and carries the source's view; a view too large for the ring is refused
// naming the limit.
func TestWindowDescription(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(strings.Replace(fmt.Sprintf(oneSource, 0), "batches = 0\n", "order = \"epochs\"\n", 1)), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	tensors := []config.Tensor{{Name: "x", DType: ring.Int32, Shape: []int{2, 3}}, {Name: "x_step", DType: ring.Int64, Shape: []int{2}}}
	src := statSource{tensors: tensors, st: sampler.Stats{Order: config.OrderEpochs, EpochBatches: 7, Samples: 29},
		view: sampler.View{rules.ViewTensor("x", "nwp", "x", "nwp"), rules.ViewStrings([]string{"a", "b"}, "nwp", "x", "names"), rules.ViewInt(3, "t0_idx")}}
	l, err := (Window{Epoch: 1, EpochSet: true}).Layout(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"order":"epochs","epoch_batches":7,"samples":29,"view":[{"key":["nwp","x","nwp"],"tensor":"x"},{"key":["nwp","x","names"],"strings":["a","b"]},{"key":["t0_idx"],"int":3}]}`
	if string(l.Description) != want {
		t.Errorf("description\n%s\nwant\n%s", l.Description, want)
	}
	stream := statSource{tensors: tensors, st: sampler.Stats{Order: config.OrderStream}}
	if l, err := (Window{}).Layout(cfg, stream); err != nil || string(l.Description) != `{"order":"stream"}` {
		t.Errorf("stream: description %s, %v", l.Description, err)
	}
	huge := src
	huge.view = sampler.View{rules.ViewStrings(make([]string, ring.MaxDescription/2), "k")}
	if _, err := (Window{}).Layout(cfg, huge); err == nil || !strings.Contains(err.Error(), "more than the ring's 16384") {
		t.Errorf("a view too large for the ring: %v", err)
	}
}

// TestRingShareWarns: a ring of more than a quarter of the memory available is a warning that
// names the settings that shrink it as each interface spells them; a smaller one is not.
func TestRingShareWarns(t *testing.T) {
	avail, ok := shm.MemAvailable()
	if !ok {
		t.Skip("no MemAvailable in /proc/meminfo")
	}
	s := ringShare(avail / 2)
	for _, want := range []string{"of shared memory", "% of the", "batch_size (batch_size=, --batch-size, [batch] size)",
		"slots (slots=, --slots, [ring] slots)"} {
		if !strings.Contains(s, want) {
			t.Errorf("a ring of half the memory available: %q, want %q in it", s, want)
		}
	}
	if s := ringShare(avail / 8); s != "" {
		t.Errorf("a ring of an eighth of the memory available: %q, want no warning", s)
	}
}
