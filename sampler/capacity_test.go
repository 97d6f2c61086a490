package sampler

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/sampler/rules"
)

// capacityConfig is the in-memory nowcast with its pv divided by a capacity array of the same
// store (source "pvcap"), NaN quotients filled with fill.
func capacityJob(t *testing.T, pvKeys, capKeys string) (*Job, map[string]*memDataset, error) {
	t.Helper()
	text := memConfigFmt("") + `
[[source]]
name = "pvcap"
kind = "zarr"
store = "pv.zarr"
variable = "cap"
role = "points"
time_resolution_minutes = 5
interval_start_minutes = -30
interval_end_minutes = 60
` + capKeys + "\n"
	text = strings.Replace(text, "nearest_k = 5", "nearest_k = 5\n"+pvKeys, 1)
	cfg, err := parseCfg(t, text)
	if err != nil {
		return nil, nil, err
	}
	ds := newMemNowcast(smallMem)
	pv := ds["pv.zarr"].arrays
	c := *pv["power"]
	c.raw = make([]float64, len(c.raw))
	for i := range c.raw {
		c.raw[i] = 5 + float64(i%7)
		if i%13 == 4 {
			c.raw[i] = math.NaN()
		}
	}
	pv["cap"] = &c
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err == nil {
		t.Cleanup(j.Close)
	}
	return j, ds, err
}

func TestCapacityDividesAndFillsAfter(t *testing.T) {
	j, _, err := capacityJob(t, "capacity = \"pvcap\"\nnan_fill = 0.25", "nearest_k = 5")
	if err != nil {
		t.Fatal(err)
	}
	// The same job without the division is the reference: its pv and pvcap are as stored.
	ref, _, err := capacityJob(t, "", "nearest_k = 5")
	if err != nil {
		t.Fatal(err)
	}
	tn := j.Tensors()
	last := tn[len(tn)-1]
	if last.Name != CapacityTensor || len(last.Shape) != 1 || last.Shape[0] != 4 {
		t.Fatalf("last tensor %+v", last)
	}
	buf, rbuf := batchBuf(j), batchBuf(ref)
	var filled int
	for b := uint64(0); b < 20; b++ {
		if err := j.Fill(ctx, b, buf); err != nil {
			t.Fatal(err)
		}
		if err := ref.Fill(ctx, b, rbuf); err != nil {
			t.Fatal(err)
		}
		got, gen, capa := bytesAsFloat32(buf[2]), bytesAsFloat32(rbuf[2]), bytesAsFloat32(rbuf[3])
		first := bytesAsFloat32(buf[len(buf)-1])
		per := len(gen) / 4
		for i := range got {
			want := gen[i] / capa[i]
			if want != want {
				want, filled = 0.25, filled+1
			}
			if got[i] != want {
				t.Fatalf("batch %d value %d: %v, want %v / %v = %v", b, i, got[i], gen[i], capa[i], want)
			}
		}
		for e := range 4 {
			if c := capa[e*per]; first[e] != c && !(c != c && first[e] != first[e]) {
				t.Fatalf("batch %d example %d: capacity_mwp %v, want %v", b, e, first[e], c)
			}
		}
	}
	if filled == 0 {
		t.Fatal("no NaN quotient: the fill is untested")
	}
}

func TestCapacityRefusedNamingTheKey(t *testing.T) {
	cases := []struct{ pv, capKeys, want string }{
		{`capacity = "nope"`, "nearest_k = 5", `source[2].capacity: "nope" names no other source`},
		{`capacity = "pv"`, "nearest_k = 5", `source[2].capacity: "pv" names no other source`},
		{`capacity = "nwp"`, "nearest_k = 5", `source[2].capacity: "nwp" is a nwp source`},
		{`capacity = "pvcap"`, "nearest_k = 4", `source[2].capacity: "pvcap" has another time window or nearest_k`},
	}
	for _, c := range cases {
		_, _, err := capacityJob(t, c.pv, c.capKeys)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v\nwant it to contain %q", c.pv, err, c.want)
		}
	}
}

// Under ocf's rules an example's quotient is filled only when it has a NaN, and then its
// infinities (generation over a zero capacity) become the largest float32 of their sign, as
// numpy's nan_to_num does for ocf-data-sampler; under gobatch's rules a NaN is filled and an
// infinity stays.
func TestCapacityFillsInfinitiesOfARowWithANaNUnderOCF(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	gen := []float32{1, 2, -3, 4 /* example 1 */, 1, 2, 3, 4}
	capa := []float32{1, 0, 0, nan /* example 1 */, 1, 0, 2, 2}
	floats := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		copy(bytesAsFloat32(b), v)
		return b
	}
	for _, c := range []struct {
		rules string
		want  []float32
	}{
		{"ocf", []float32{1, math.MaxFloat32, -math.MaxFloat32, 0.5, 1, inf, 1.5, 2}},
		{"gobatch", []float32{1, inf, -inf, 0.5, 1, inf, 1.5, 2}},
	} {
		r, err := rules.Lookup(c.rules)
		if err != nil {
			t.Fatal(err)
		}
		d := &capacityDiv{gen: 0, cap: 1, at: 2, per: 4, fill: true, fillV: 0.5, rules: r}
		tensors := [][]byte{floats(gen), floats(capa), make([]byte, 8)}
		d.apply(tensors, 0)
		d.apply(tensors, 1)
		if got := bytesAsFloat32(tensors[0]); !slices.Equal(got, c.want) {
			t.Errorf("rules %s: %v, want %v", c.rules, got, c.want)
		}
	}
}
