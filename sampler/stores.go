package sampler

import (
	"fmt"
	"sort"

	"github.com/gobatch/gobatch/config"
)

// Opening a job's stores: each role's data array, its coordinates and the tables that place
// its crops on the anchor's grid. Every error names the source's field in the configuration.

func dimsOf(cfg *config.Config, sp *Spec, ds Dataset, arr Array, want int, names string) ([]string, error) {
	dims := arr.Dims()
	if len(arr.Shape()) != want || len(dims) != want {
		return nil, cfg.Errorf(sp.Field+".variable", "%s/%s has dims %v (shape %v); expected %d dims %s for role %q",
			ds, sp.Variable, dims, arr.Shape(), want, names, sp.Role)
	}
	return dims, nil
}

func coordArray(cfg *config.Config, sp *Spec, ds Dataset, name string) (Array, error) {
	a, err := ds.Array(name)
	if err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "coordinate %q: %v", name, err)
	}
	return a, nil
}

func readTimeAxis(cfg *config.Config, sp *Spec, ds Dataset, name string) (axis, error) {
	a, err := coordArray(cfg, sp, ds, name)
	if err != nil {
		return axis{}, err
	}
	ts, err := a.Times()
	if err != nil {
		return axis{}, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	ax, err := regularAxis(ts)
	if err != nil {
		return axis{}, cfg.Errorf(sp.Field+".store", "%s/%s: %v; expected a regular time coordinate", ds, name, err)
	}
	if sp.TimeResolutionMinutes*60%ax.step != 0 {
		return axis{}, cfg.Errorf(sp.Field+".time_resolution_minutes", "%d is not a multiple of the store's time step (%d min)",
			sp.TimeResolutionMinutes, ax.step/60)
	}
	return ax, nil
}

func readFloats(cfg *config.Config, sp *Spec, ds Dataset, name string, n int) ([]float64, error) {
	a, err := coordArray(cfg, sp, ds, name)
	if err != nil {
		return nil, err
	}
	v, err := a.Float64s()
	if err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	if len(v) != n {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d values; expected %d", ds, name, len(v), n)
	}
	return v, nil
}

func selectChannels(cfg *config.Config, sp *Spec, ds Dataset, name string, n int) ([]int, error) {
	a, err := coordArray(cfg, sp, ds, name)
	if err != nil {
		return nil, err
	}
	all, err := a.Strings()
	if err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	if len(all) != n {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d names; expected %d", ds, name, len(all), n)
	}
	out := make([]int, len(sp.Channels))
	for i, c := range sp.Channels {
		k := -1
		for q, s := range all {
			if s == c {
				k = q
				break
			}
		}
		if k < 0 {
			return nil, cfg.Errorf(sp.Field+".channels", "%q is not a %s of %s/%s; expected one of %s", c, name, ds, sp.Variable, quoteList(all))
		}
		out[i] = k
	}
	return out, nil
}

// cropTables places the crops of source sp (coordinates ys, xs, named yName, xName) on the
// anchor's grid (align.go): the start of its crop for every anchor pixel.
func cropTables(cfg *config.Config, sp *Spec, anchor *gridSource, ys, xs []float64, yName, xName string) (*cropTable, error) {
	pos, err := placeOnAnchor(cfg, sp, anchor, xName, yName)
	if err != nil {
		return nil, err
	}
	t := newCropTable(pos, ys, xs, sp.Height, sp.Width)
	return &t, nil
}

func openData(cfg *config.Config, sp *Spec, ds Dataset) (Array, *chunked, error) {
	arr, err := ds.Array(sp.Variable)
	if err != nil {
		return nil, nil, cfg.Errorf(sp.Field+".variable", "%v", err)
	}
	c, err := newChunked(sp.Index, fmt.Sprintf("%s (%s/%s)", sp.Field, ds, sp.Variable), arr)
	if err != nil {
		return nil, nil, cfg.Errorf(sp.Field+".variable", "%v", err)
	}
	return arr, c, nil
}

func openGrid(cfg *config.Config, sp *Spec, ds Dataset, anchor *gridSource) (*gridSource, error) {
	arr, c, err := openData(cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	dims, err := dimsOf(cfg, sp, ds, arr, 4, "(time, channel, y, x)")
	if err != nil {
		return nil, err
	}
	shape := arr.Shape()
	g := &gridSource{s: sp, c: c, win: sp.window(), store: ds, dimY: dims[2], dimX: dims[3]}
	if g.times, err = readTimeAxis(cfg, sp, ds, dims[0]); err != nil {
		return nil, err
	}
	if g.times.n != shape[0] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d times; the data has %d", ds, dims[0], g.times.n, shape[0])
	}
	if g.chans, err = selectChannels(cfg, sp, ds, dims[1], shape[1]); err != nil {
		return nil, err
	}
	if g.ys, err = readFloats(cfg, sp, ds, dims[2], shape[2]); err != nil {
		return nil, err
	}
	if g.xs, err = readFloats(cfg, sp, ds, dims[3], shape[3]); err != nil {
		return nil, err
	}
	if anchor != nil {
		if sp.Height > shape[2] || sp.Width > shape[3] {
			return nil, cfg.Errorf(sp.Field+".image_size_pixels_height", "a %d x %d crop does not fit the %d x %d grid", sp.Height, sp.Width, shape[2], shape[3])
		}
		if g.crop, err = cropTables(cfg, sp, anchor, g.ys, g.xs, dims[2], dims[3]); err != nil {
			return nil, err
		}
	}
	c.setNormalisation(1, g.chans, sp.NormaliseMean, sp.NormaliseStd)
	return g, nil
}

func openNWP(cfg *config.Config, sp *Spec, ds Dataset, anchor *gridSource) (*nwpSource, error) {
	arr, c, err := openData(cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	dims, err := dimsOf(cfg, sp, ds, arr, 5, "(init_time, step, channel, y, x)")
	if err != nil {
		return nil, err
	}
	shape := arr.Shape()
	n := &nwpSource{s: sp, c: c}
	ia, err := coordArray(cfg, sp, ds, dims[0])
	if err != nil {
		return nil, err
	}
	if n.inits, err = ia.Times(); err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, dims[0], err)
	}
	if len(n.inits) != shape[0] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d values; the data has %d runs", ds, dims[0], len(n.inits), shape[0])
	}
	if !sort.SliceIsSorted(n.inits, func(a, b int) bool { return n.inits[a] < n.inits[b] }) {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s is not ascending", ds, dims[0])
	}
	sa, err := coordArray(cfg, sp, ds, dims[1])
	if err != nil {
		return nil, err
	}
	steps, err := sa.Durations()
	if err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, dims[1], err)
	}
	if n.steps, err = regularAxis(steps); err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v; expected regular lead steps", ds, dims[1], err)
	}
	if n.steps.n != shape[1] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d steps; the data has %d", ds, dims[1], n.steps.n, shape[1])
	}
	if sp.TimeResolutionMinutes*60%n.steps.step != 0 {
		return nil, cfg.Errorf(sp.Field+".time_resolution_minutes", "%d is not a multiple of the store's step spacing (%d min)",
			sp.TimeResolutionMinutes, n.steps.step/60)
	}
	n.rule = nwpRule{minStale: sp.MinStalenessMinutes * 60, maxStale: sp.MaxStalenessMinutes * 60, window: sp.window()}
	if n.chans, err = selectChannels(cfg, sp, ds, dims[2], shape[2]); err != nil {
		return nil, err
	}
	ys, err := readFloats(cfg, sp, ds, dims[3], shape[3])
	if err != nil {
		return nil, err
	}
	xs, err := readFloats(cfg, sp, ds, dims[4], shape[4])
	if err != nil {
		return nil, err
	}
	if sp.Height > shape[3] {
		return nil, cfg.Errorf(sp.Field+".image_size_pixels_height", "%d does not fit the NWP grid of %d rows", sp.Height, shape[3])
	}
	if sp.Width > shape[4] {
		return nil, cfg.Errorf(sp.Field+".image_size_pixels_width", "%d does not fit the NWP grid of %d columns", sp.Width, shape[4])
	}
	crop, err := cropTables(cfg, sp, anchor, ys, xs, dims[3], dims[4])
	if err != nil {
		return nil, err
	}
	n.crop = *crop
	c.setNormalisation(2, n.chans, sp.NormaliseMean, sp.NormaliseStd)
	return n, nil
}

func openPoints(cfg *config.Config, sp *Spec, ds Dataset, anchor *gridSource) (*pointSource, error) {
	arr, c, err := openData(cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	dims, err := dimsOf(cfg, sp, ds, arr, 2, "(time, system)")
	if err != nil {
		return nil, err
	}
	shape := arr.Shape()
	p := &pointSource{s: sp, c: c, win: sp.window(), anchor: anchor}
	if p.times, err = readTimeAxis(cfg, sp, ds, dims[0]); err != nil {
		return nil, err
	}
	if p.times.n != shape[0] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d times; the data has %d", ds, dims[0], p.times.n, shape[0])
	}
	ida, err := coordArray(cfg, sp, ds, dims[1])
	if err != nil {
		return nil, err
	}
	if p.ids, err = ida.Int64s(); err != nil {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, dims[1], err)
	}
	if len(p.ids) != shape[1] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d ids; the data has %d systems", ds, dims[1], len(p.ids), shape[1])
	}
	if err := readPositions(cfg, p, ds, arr, shape[1]); err != nil {
		return nil, err
	}
	if shape[1] < sp.NearestK {
		return nil, cfg.Errorf(sp.Field+".nearest_k", "%d; the store has only %d systems", sp.NearestK, shape[1])
	}
	p.setOrder()
	c.setNormalisation(-1, nil, sp.NormaliseMean, sp.NormaliseStd)
	return p, nil
}
