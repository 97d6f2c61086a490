package sampler

import (
	"fmt"
	"strings"

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

// readTimeAxis reads a series' time coordinate (datetime64 of any unit or CF "<unit> since
// <date>" numbers) as unix seconds. It must be strictly ascending; gaps and changes of step are
// allowed (a t0 whose window meets one is not a candidate).
func readTimeAxis(cfg *config.Config, sp *Spec, ds Dataset, name string) (timeAxis, error) {
	ax, err := readTimeCoord(cfg, sp, ds, name, false)
	if err != nil {
		return timeAxis{}, err
	}
	return ax, checkResolution(cfg, sp, &ax)
}

// readTimeCoord reads coordinate name as a strictly ascending time axis: absolute times (unix
// seconds) or, with lead, durations (seconds: NWP steps as timedelta64 or numbers with units
// hours, minutes, seconds...).
func readTimeCoord(cfg *config.Config, sp *Spec, ds Dataset, name string, lead bool) (timeAxis, error) {
	a, err := coordArray(cfg, sp, ds, name)
	if err != nil {
		return timeAxis{}, err
	}
	read, fmtv, want := a.Times, fmtTime, "a strictly ascending time coordinate"
	if lead {
		read, fmtv, want = a.Durations, fmtOffset, "strictly ascending lead steps"
	}
	vals, err := read()
	if err != nil {
		return timeAxis{}, cfg.Errorf(sp.Field+".store", "%s/%s: %v", ds, name, err)
	}
	ax, err := newTimeAxis(vals, fmtv)
	if err != nil {
		return timeAxis{}, cfg.Errorf(sp.Field+".store", "%s/%s: %v; expected %s", ds, name, err, want)
	}
	return ax, nil
}

// checkResolution refuses a time_resolution_minutes that is not a multiple of a regular axis's
// step: such a window fits nowhere, so say so now. On an irregular axis some windows may still
// fit; the candidates' report (Job.Rejections) tells.
func checkResolution(cfg *config.Config, sp *Spec, ax *timeAxis) error {
	if ax.regular && sp.TimeResolutionMinutes*60%ax.reg.step != 0 {
		return cfg.Errorf(sp.Field+".time_resolution_minutes", "%d is not a multiple of the store's time step (%s)",
			sp.TimeResolutionMinutes, fmtSeconds(ax.reg.step))
	}
	return nil
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

// cropTables computes, for every anchor pixel, the start of a crop of size n centred on the
// nearest coordinate of coords (ties to the lower index), clamped into the grid.
func cropTables(anchorCoords, coords []float64, n int) []int {
	out := make([]int, len(anchorCoords))
	for i, v := range anchorCoords {
		out[i] = cropStart(nearestIndex(coords, v), n, len(coords))
	}
	return out
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
	g := &gridSource{s: sp, c: c, win: sp.window()}
	if g.times, err = readTimeAxis(cfg, sp, ds, dims[0]); err != nil {
		return nil, err
	}
	if g.times.len() != shape[0] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d times; the data has %d", ds, dims[0], g.times.len(), shape[0])
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
		g.yStart = cropTables(anchor.ys, g.ys, sp.Height)
		g.xStart = cropTables(anchor.xs, g.xs, sp.Width)
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
	if n.inits, err = readTimeCoord(cfg, sp, ds, dims[0], false); err != nil {
		return nil, err
	}
	if n.inits.len() != shape[0] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d values; the data has %d runs", ds, dims[0], n.inits.len(), shape[0])
	}
	if n.steps, err = readTimeCoord(cfg, sp, ds, dims[1], true); err != nil {
		return nil, err
	}
	if err := checkResolution(cfg, sp, &n.steps); err != nil {
		return nil, err
	}
	if n.steps.len() != shape[1] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d steps; the data has %d", ds, dims[1], n.steps.len(), shape[1])
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
	n.yStart = cropTables(anchor.ys, ys, sp.Height)
	n.xStart = cropTables(anchor.xs, xs, sp.Width)
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
	if p.times.len() != shape[0] {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d times; the data has %d", ds, dims[0], p.times.len(), shape[0])
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
	xName, yName := "x", "y"
	if f := strings.Fields(arr.Attr("coordinates")); len(f) == 2 {
		xName, yName = f[0], f[1] // CF "coordinates": the auxiliary x and y of each system
	}
	if p.xs, err = readFloats(cfg, sp, ds, xName, shape[1]); err != nil {
		return nil, err
	}
	if p.ys, err = readFloats(cfg, sp, ds, yName, shape[1]); err != nil {
		return nil, err
	}
	if shape[1] < sp.NearestK {
		return nil, cfg.Errorf(sp.Field+".nearest_k", "%d; the store has only %d systems", sp.NearestK, shape[1])
	}
	p.setOrder()
	c.setNormalisation(-1, nil, sp.NormaliseMean, sp.NormaliseStd)
	return p, nil
}
