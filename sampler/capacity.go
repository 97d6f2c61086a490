package sampler

import (
	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/readers/zarr"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler/rules"
)

// Capacity: with capacity = "cap" on a points source (a PV generation), its values
// are divided, step by step and system by system, by those of points source "cap" (the
// capacity_mwp array of the same store, over the same window and systems), and a NaN of the
// quotient becomes the source's nan_fill, filled after the division. The batch
// then also has the float32 [B] tensor capacity_mwp: the capacity at the window's first step
// (of the first system), the capacity_mwp key of a PV sample. An example whose quotient has
// a NaN is filled by the job's rule set (rules.Rules.FillQuotient: gobatch's fills the NaN,
// another may fill infinities too); without a NaN the row stays as divided.
//
// The quotient takes numpy's type: float32 when both stores hold float32 (or narrower), else
// float64. Then both sources keep float64 in the cache (chunked.keepFloat64), their tensors
// and capacity_mwp are float64, and the division is float64, so that no value is rounded to
// float32 on the way (promoteQuotients).

// CapacityTensor is the name of the tensor of the capacity at the window's first step.
const CapacityTensor = "capacity_mwp"

// capacityDiv divides source gen's rows by source cap's (both tensors' indices) and writes the
// first step's capacity to tensor at.
type capacityDiv struct {
	gen, cap, at int
	per          int // values per example (steps times nearest_k)
	fill         bool
	fillV        float32
	f64          bool        // the float64 quotient (promoteQuotients)
	rules        rules.Rules // fills a row that has a NaN
}

// promoteQuotients makes float64 the sources of a capacity division where either store holds
// float64 (see above). Before the cache's sizes are taken.
func (j *Job) promoteQuotients() error {
	for _, g := range j.points {
		if g.s.Capacity == "" {
			continue
		}
		for _, cp := range j.points {
			if cp.s.Name != g.s.Capacity || cp == g || g.c.elem != zarr.Float64 && cp.c.elem != zarr.Float64 {
				continue // capacityTensors reports a capacity that names no points source
			}
			for _, p := range []*pointSource{g, cp} {
				if err := p.c.keepFloat64(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// capacityTensors checks the capacity keys and lists the capacity_mwp tensor, at index at.
func (j *Job) capacityTensors(at int) ([]config.Tensor, error) {
	for gi, s := range j.srcs {
		sp := s.spec()
		if sp.Capacity == "" {
			continue
		}
		if j.capDiv != nil {
			return nil, j.cfg.Errorf(sp.Field+".capacity", "a second source with a capacity; expected one")
		}
		ci := -1
		for i, o := range j.srcs {
			if o.spec().Name == sp.Capacity {
				ci = i
			}
		}
		if ci < 0 || ci == gi {
			return nil, j.cfg.Errorf(sp.Field+".capacity", "%q names no other source; expected the name of a points source over the capacity array", sp.Capacity)
		}
		cp := j.srcs[ci].spec()
		switch {
		case cp.Role != RolePoints:
			return nil, j.cfg.Errorf(sp.Field+".capacity", "%q is a %s source; expected a points source", sp.Capacity, cp.Role)
		case j.stores[ci] != j.stores[gi]:
			return nil, j.cfg.Errorf(sp.Field+".capacity", "%q reads %s; expected this source's store %s (the same systems)", sp.Capacity, j.stores[ci], j.stores[gi])
		case cp.window() != sp.window() || cp.NearestK != sp.NearestK:
			return nil, j.cfg.Errorf(sp.Field+".capacity", "%q has another time window or nearest_k; expected the same as this source's", sp.Capacity)
		}
		fill, v := sp.nanFill()
		f64 := j.srcs[gi].data().f64
		j.capDiv = &capacityDiv{gen: gi, cap: ci, at: at, per: sp.Steps() * sp.NearestK, fill: fill, fillV: v, f64: f64, rules: j.rules}
		dt := ring.Float32
		if f64 {
			dt = ring.Float64
		}
		return []config.Tensor{{Name: CapacityTensor, DType: dt, Shape: []int{j.size}}}, nil
	}
	return nil, nil
}

// apply divides example e's generation by its capacity (in float32, or float64 for a float64
// quotient, as numpy divides), fills the NaNs, and writes the first step's capacity.
func (d *capacityDiv) apply(tensors [][]byte, e int) {
	if d.f64 {
		gen, capa := bytesAsFloat64(tensors[d.gen]), bytesAsFloat64(tensors[d.cap])
		if divide(gen[e*d.per:(e+1)*d.per], capa[e*d.per:(e+1)*d.per]) && d.fill {
			d.rules.FillQuotient64(gen[e*d.per:(e+1)*d.per], float64(d.fillV))
		}
		bytesAsFloat64(tensors[d.at])[e] = capa[e*d.per]
		return
	}
	gen, capa := bytesAsFloat32(tensors[d.gen]), bytesAsFloat32(tensors[d.cap])
	if divide(gen[e*d.per:(e+1)*d.per], capa[e*d.per:(e+1)*d.per]) && d.fill {
		d.rules.FillQuotient(gen[e*d.per:(e+1)*d.per], d.fillV)
	}
	bytesAsFloat32(tensors[d.at])[e] = capa[e*d.per]
}

// divide divides gen by capa element by element, in their type (as numpy divides two arrays
// of it), and says whether a quotient is NaN.
func divide[T float32 | float64](gen, capa []T) (nan bool) {
	for i, c := range capa {
		v := gen[i] / c
		nan = nan || v != v
		gen[i] = v
	}
	return nan
}
