package sampler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gobatch/gobatch/config"
)

// Opening a job's stores: each role's data array, its coordinates and the tables that place
// its crops on the anchor's grid. Every error names the source's field in the configuration.

// mapStoreDims maps the data array's dimensions onto the role's canonical axes (dims.go),
// refusing a store whose dimensions cannot be mapped with the dimensions it has and the names
// accepted.
func mapStoreDims(cfg *config.Config, sp *Spec, ds Dataset, arr Array) (dimMap, error) {
	dims := arr.Dims()
	if len(dims) != len(arr.Shape()) {
		return dimMap{}, cfg.Errorf(sp.Field+".variable", "%s/%s has %d dimension names %v for shape %v; expected a name for every dimension (_ARRAY_DIMENSIONS or dimension_names)",
			ds, sp.Variable, len(dims), dims, arr.Shape())
	}
	m, err := mapDims(sp.Role, dims, sp.Dims)
	if err != nil {
		field := sp.Field + ".variable"
		if errors.As(err, new(dimsKeyError)) {
			field = sp.Field + ".dims"
		}
		return dimMap{}, cfg.Errorf(field, "%s/%s: %v", ds, sp.Variable, err)
	}
	return m, nil
}

// axisLen is the length of canonical axis ax (1 when the store lacks it).
func axisLen(arr Array, m dimMap, ax string) int {
	if p := m.perm[m.axis(ax)]; p >= 0 {
		return arr.Shape()[p]
	}
	return 1
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

// selectChannels returns the store index of each configured channel. A store without a channel
// axis (name "") is one channel, and takes no channels key.
func selectChannels(cfg *config.Config, sp *Spec, ds Dataset, name string, n int) ([]int, error) {
	if name == "" {
		if sp.Channels != nil {
			return nil, cfg.Errorf(sp.Field+".channels", "%s/%s has no channel dimension (it is one channel); expected no channels key", ds, sp.Variable)
		}
		return []int{0}, nil
	}
	if sp.Channels == nil {
		return nil, cfg.Errorf(sp.Field+".channels", "missing required key; %s/%s has channel dimension %q: expected an array of its names, e.g. channels = [\"IR_108\"]",
			ds, sp.Variable, name)
	}
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

// openData opens the source's data array, maps its dimensions and sees it through the cache
// in canonical order.
func openData(cfg *config.Config, sp *Spec, ds Dataset) (Array, dimMap, *chunked, error) {
	if sp.Variable == "" {
		name, err := onlyDataArray(ds)
		if err != nil {
			return nil, dimMap{}, nil, cfg.Errorf(sp.Field+".variable", "missing, and %v", err)
		}
		sp.Variable = name
	}
	arr, err := ds.Array(sp.Variable)
	if err != nil {
		return nil, dimMap{}, nil, cfg.Errorf(sp.Field+".variable", "%v", err)
	}
	m, err := mapStoreDims(cfg, sp, ds, arr)
	if err != nil {
		return nil, dimMap{}, nil, err
	}
	c, err := newChunked(sp.Index, cfg.Redact(fmt.Sprintf("%s (%s/%s)", sp.Field, ds, sp.Variable)), arr, &m)
	if err != nil {
		return nil, dimMap{}, nil, cfg.Errorf(sp.Field+".variable", "%v", err)
	}
	c.remote = isRemote(ds)
	c.limitReads(fetchDepth(sp, c.remote, c.readBytes()))
	return arr, m, c, nil
}

func openGrid(cfg *config.Config, sp *Spec, ds Dataset, anchor *gridSource) (*gridSource, error) {
	arr, m, c, err := openData(cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	nt, nc, ny, nx := axisLen(arr, m, axisTime), axisLen(arr, m, axisChannel), axisLen(arr, m, axisY), axisLen(arr, m, axisX)
	g := &gridSource{s: sp, c: c, win: sp.window(), dims: m, store: ds}
	if g.times, err = readTimeAxis(cfg, sp, ds, m.name(axisTime)); err != nil {
		return nil, err
	}
	if g.times.len() != nt {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d times; the data has %d", ds, m.name(axisTime), g.times.len(), nt)
	}
	if g.chans, err = selectChannels(cfg, sp, ds, m.name(axisChannel), nc); err != nil {
		return nil, err
	}
	if g.ys, err = readAxis(cfg, sp, ds, m.name(axisY), ny); err != nil {
		return nil, err
	}
	if g.xs, err = readAxis(cfg, sp, ds, m.name(axisX), nx); err != nil {
		return nil, err
	}
	if err := checkOwnCRS(cfg, sp, ds, m, g.xs, g.ys); err != nil {
		return nil, err
	}
	c.noteOrder(axisY, g.ys)
	c.noteOrder(axisX, g.xs)
	if anchor != nil {
		if sp.Height > ny || sp.Width > nx {
			return nil, cfg.Errorf(sp.Field+".image_size_pixels_height", "a %d x %d crop does not fit the %d x %d grid", sp.Height, sp.Width, ny, nx)
		}
		if g.crop, err = cropTables(cfg, sp, anchor, g.ys, g.xs, m.name(axisY), m.name(axisX)); err != nil {
			return nil, err
		}
	}
	c.setNormalisation(1, g.chans, sp.NormaliseMean, sp.NormaliseStd, sp.ClipMin, sp.ClipMax)
	return g, nil
}

func openNWP(cfg *config.Config, sp *Spec, ds Dataset, anchor *gridSource) (*nwpSource, error) {
	arr, m, c, err := openData(cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	initName, stepName := m.name(axisInit), m.name(axisStep)
	nr, ns, nc := axisLen(arr, m, axisInit), axisLen(arr, m, axisStep), axisLen(arr, m, axisChannel)
	ny, nx := axisLen(arr, m, axisY), axisLen(arr, m, axisX)
	n := &nwpSource{s: sp, c: c}
	if n.inits, err = readTimeCoord(cfg, sp, ds, initName, false); err != nil {
		return nil, err
	}
	if n.inits.len() != nr {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d values; the data has %d runs", ds, initName, n.inits.len(), nr)
	}
	if n.steps, err = readTimeCoord(cfg, sp, ds, stepName, true); err != nil {
		return nil, err
	}
	if err := checkResolution(cfg, sp, &n.steps); err != nil {
		return nil, err
	}
	if n.steps.len() != ns {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d steps; the data has %d", ds, stepName, n.steps.len(), ns)
	}
	n.rule = nwpRule{minStale: sp.MinStalenessMinutes * 60, maxStale: sp.MaxStalenessMinutes * 60, window: sp.window()}
	if n.chans, err = selectChannels(cfg, sp, ds, m.name(axisChannel), nc); err != nil {
		return nil, err
	}
	ys, err := readAxis(cfg, sp, ds, m.name(axisY), ny)
	if err != nil {
		return nil, err
	}
	xs, err := readAxis(cfg, sp, ds, m.name(axisX), nx)
	if err != nil {
		return nil, err
	}
	if err := checkOwnCRS(cfg, sp, ds, m, xs, ys); err != nil {
		return nil, err
	}
	c.noteOrder(axisY, ys)
	c.noteOrder(axisX, xs)
	if sp.Height > ny {
		return nil, cfg.Errorf(sp.Field+".image_size_pixels_height", "%d does not fit the NWP grid of %d rows", sp.Height, ny)
	}
	if sp.Width > nx {
		return nil, cfg.Errorf(sp.Field+".image_size_pixels_width", "%d does not fit the NWP grid of %d columns", sp.Width, nx)
	}
	if anchor != nil { // else a points anchor: crops around each site (sitecrop.go)
		crop, err := cropTables(cfg, sp, anchor, ys, xs, m.name(axisY), m.name(axisX))
		if err != nil {
			return nil, err
		}
		n.crop = *crop
	}
	n.xs, n.ys, n.xName, n.yName = xs, ys, m.name(axisX), m.name(axisY)
	c.setNormalisation(2, n.chans, sp.NormaliseMean, sp.NormaliseStd, sp.ClipMin, sp.ClipMax)
	if err := n.setupTargets(cfg, sp); err != nil { // the rule set's window rule (nwptargets.go)
		return nil, err
	}
	return n, nil
}

// openPoints opens a points source: its times, ids and positions (the job places it on the
// anchor's grid or systems: Job.openSource).
func openPoints(cfg *config.Config, sp *Spec, ds Dataset) (*pointSource, error) {
	arr, m, c, err := openData(cfg, sp, ds)
	if err != nil {
		return nil, err
	}
	nt, nk := axisLen(arr, m, axisTime), axisLen(arr, m, axisID)
	p := &pointSource{s: sp, c: c, win: sp.window()}
	if p.times, err = readTimeAxis(cfg, sp, ds, m.name(axisTime)); err != nil {
		return nil, err
	}
	if p.times.len() != nt {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d times; the data has %d", ds, m.name(axisTime), p.times.len(), nt)
	}
	if p.ids, err = readIDs(cfg, sp, ds, m.name(axisID), nk); err != nil {
		return nil, err
	}
	if err := readPositions(cfg, p, ds, arr, m.name(axisID), nk); err != nil {
		return nil, err
	}
	if nk < sp.NearestK {
		return nil, cfg.Errorf(sp.Field+".nearest_k", "%d; the store has only %d systems", sp.NearestK, nk)
	}
	p.setOrder()
	c.setNormalisation(-1, nil, sp.NormaliseMean, sp.NormaliseStd, sp.ClipMin, sp.ClipMax)
	return p, nil
}

// readIDs reads a points source's ids: integers, or strings that are decimal integers ('1' ..
// '21', as GSP ids are stored), which become int64. Other strings are refused.
func readIDs(cfg *config.Config, sp *Spec, ds Dataset, name string, n int) ([]int64, error) {
	a, err := coordArray(cfg, sp, ds, name)
	if err != nil {
		return nil, err
	}
	ids, err := a.Int64s()
	if err != nil {
		strs, serr := a.Strings()
		if serr != nil {
			return nil, cfg.Errorf(sp.Field+".store", "%s/%s: %v; expected integer ids or decimal strings", ds, name, err)
		}
		ids = make([]int64, len(strs))
		for i, s := range strs {
			v, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if perr != nil {
				return nil, cfg.Errorf(sp.Field+".store", "id coordinate %s/%s: element %d is %q, not a decimal integer; expected integer ids or decimal strings ('1', '21')",
					ds, name, i, s)
			}
			ids[i] = v
		}
	}
	if len(ids) != n {
		return nil, cfg.Errorf(sp.Field+".store", "%s/%s has %d ids; the data has %d systems", ds, name, len(ids), n)
	}
	return ids, nil
}

// positionNames finds the coordinates that give each system's x and y position: the CF
// "coordinates" attribute of the data array, else 1-D coordinates spelled as x and y over the
// id dimension. Positions in longitude/latitude only are refused unless the anchor's axes are
// longitude/latitude too (meeting metres needs a projection).
func positionNames(cfg *config.Config, sp *Spec, ds Dataset, arr Array, idDim string) (string, string, error) {
	if f := strings.Fields(arr.Attr("coordinates")); len(f) > 0 {
		x, y := classifyPositions(f)
		if x == "" && y == "" && len(f) == 2 {
			x, y = f[0], f[1] // names of no known spelling: CF order x y
		}
		if x != "" && y != "" {
			return x, y, nil
		}
	}
	var found []string
	for _, ax := range []string{axisX, axisY} {
		name := ""
		for _, s := range axisSpellings[ax] {
			a, err := ds.Array(s)
			if err != nil {
				continue
			}
			if d := a.Dims(); len(d) == 1 && d[0] == idDim || d == nil && len(a.Shape()) == 1 {
				name = s
				break
			}
		}
		found = append(found, name)
	}
	if found[0] == "" || found[1] == "" {
		return "", "", cfg.Errorf(sp.Field+".nearest_k", "%s/%s has no positions for its systems; nearest_k needs x and y: a CF \"coordinates\" attribute naming them, or 1-D coordinates over %q named %s (x) and %s (y)",
			ds, sp.Variable, idDim, strings.Join(axisSpellings[axisX], ", "), strings.Join(axisSpellings[axisY], ", "))
	}
	return found[0], found[1], nil
}

// classifyPositions picks the x and y names among a CF coordinates list by their spellings;
// metre spellings win over longitude/latitude.
func classifyPositions(names []string) (x, y string) {
	for _, ax := range []string{axisX, axisY} {
		for _, s := range axisSpellings[ax] {
			for _, n := range names {
				if n == s {
					if ax == axisX && x == "" {
						x = n
					}
					if ax == axisY && y == "" {
						y = n
					}
				}
			}
		}
	}
	return x, y
}

// onlyDataArray is the name of the store's only data array, for a source without a variable
// key (a store opened without a variable must hold exactly one data variable). The
// coordinates are the root arrays named as some array's dimension or in some array's CF
// "coordinates" attribute; the data arrays are the other root arrays.
func onlyDataArray(ds Dataset) (string, error) {
	data, err := dataArrays(ds)
	if err != nil {
		return "", fmt.Errorf("%v; expected variable to name the data array", err)
	}
	if len(data) != 1 {
		return "", fmt.Errorf("%s has %d data arrays [%s]; expected variable to name one", ds, len(data), strings.Join(data, ", "))
	}
	return data[0], nil
}

// dataArrays lists the store's data arrays, in its order: the arrays at its root that are
// neither a dimension nor named in a CF coordinates attribute.
func dataArrays(ds Dataset) ([]string, error) {
	l, ok := ds.(interface{ ArrayNames() ([]string, error) })
	if !ok {
		return nil, fmt.Errorf("%s cannot list its arrays", ds)
	}
	names, err := l.ArrayNames()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", ds, err)
	}
	coords := map[string]bool{}
	for _, n := range names {
		a, err := ds.Array(n)
		if err != nil {
			return nil, err
		}
		for _, d := range a.Dims() {
			coords[d] = true
		}
		for _, c := range strings.Fields(a.Attr("coordinates")) {
			coords[c] = true
		}
	}
	var data []string
	for _, n := range names {
		if !coords[n] {
			data = append(data, n)
		}
	}
	return data, nil
}
