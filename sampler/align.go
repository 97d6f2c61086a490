package sampler

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	proj "github.com/twpayne/go-proj/v11"
	"go.yaml.in/yaml/v3"

	"github.com/gobatch/gobatch/config"
)

// Placing a source on the anchor's grid. Every anchor pixel has a position in the source's own
// coordinates, found once at start-up in one of three ways:
//
//   - anchor_coords = ["x_osgb", "y_osgb"]: two arrays of the anchor's store, over the anchor's
//     (y, x) or one of them, hold the positions (a geostationary satellite's British National
//     Grid coordinates, for a UKV NWP);
//   - crs: the source's coordinate reference system differs from the anchor's (the anchor's
//     crs key, or its data array's `area` attribute); PROJ transforms every anchor pixel centre;
//   - neither: the source shares the anchor's coordinates (nowcast-ref), and a position is the
//     anchor's own x and y.
//
// A grid or NWP source then takes, per axis, the coordinate nearest the position (ties to the
// lower index) and starts its crop size/2 before it, clamped into the grid: a cropTable. A
// points source measures the distance to its systems from the position. No example computes a
// projection: Fill only looks tables up.

// positions are the anchor pixels' positions in one source's coordinates. Separable ones (w
// == 0) hold xs[cx] and ys[cy]; the others xs[cy*w+cx] and ys[cy*w+cx].
type positions struct {
	w      int
	xs, ys []float64
}

func (p *positions) at(cy, cx int) (x, y float64) {
	if p.w == 0 {
		return p.xs[cx], p.ys[cy]
	}
	i := cy*p.w + cx
	return p.xs[i], p.ys[i]
}

// cropTable is the first row and column of a source's crop for every anchor pixel, laid out
// as positions are (separable or one entry per pixel).
type cropTable struct {
	w          int
	rows, cols []int32
	cover      *coverage // what the table was built from, for the coverage check (coverage.go)
}

func (t *cropTable) at(cy, cx int) (y0, x0 int) {
	if t.w == 0 {
		return int(t.rows[cy]), int(t.cols[cx])
	}
	i := cy*t.w + cx
	return int(t.rows[i]), int(t.cols[i])
}

// newCropTable places crops of h x w on a grid with coordinates ys, xs around every position.
func newCropTable(pos *positions, ys, xs []float64, h, w int) cropTable {
	t := cropTable{w: pos.w, rows: make([]int32, len(pos.ys)), cols: make([]int32, len(pos.xs)),
		cover: &coverage{pos: pos, ys: ys, xs: xs}}
	ny, nx := newNearest(ys), newNearest(xs)
	for i, v := range pos.ys {
		t.rows[i] = int32(cropStart(ny.index(v), h, len(ys)))
	}
	for i, v := range pos.xs {
		t.cols[i] = int32(cropStart(nx.index(v), w, len(xs)))
	}
	return t
}

// nearest finds the coordinate nearest a value with nearestIndex's rule (ties to the lower
// index), by binary search when the coordinate is strictly monotonic (tables over a whole
// anchor grid look up every pixel), by a scan otherwise.
type nearest struct {
	c    []float64
	sign float64 // 1: strictly ascending, -1: strictly descending, 0: neither (scan)
}

func newNearest(c []float64) nearest {
	n := nearest{c: c}
	if len(c) < 2 {
		return n
	}
	asc, desc := true, true
	for i := 1; i < len(c); i++ {
		asc = asc && c[i] > c[i-1] // false on NaN
		desc = desc && c[i] < c[i-1]
	}
	switch {
	case asc:
		n.sign = 1
	case desc:
		n.sign = -1
	}
	return n
}

func (n nearest) index(v float64) int {
	if n.sign == 0 || math.IsNaN(v) {
		return nearestIndex(n.c, v)
	}
	// i: the first index whose coordinate is at or past v along the axis's direction.
	lo, hi := 0, len(n.c)
	for lo < hi {
		m := (lo + hi) / 2
		if n.sign*(n.c[m]-v) >= 0 {
			hi = m
		} else {
			lo = m + 1
		}
	}
	switch {
	case lo == 0:
		return 0
	case lo == len(n.c):
		return len(n.c) - 1
	case math.Abs(v-n.c[lo-1]) <= math.Abs(n.c[lo]-v):
		return lo - 1 // a tie keeps the lower index
	}
	return lo
}

// GeographicCRS is the crs of longitude/latitude coordinates (degrees, longitude first).
const GeographicCRS = "EPSG:4326"

// sourceCRS is the crs a source declares: its crs key, else EPSG:4326 when its coordinates are
// named longitude/latitude, else "" (it shares the anchor's coordinates).
func sourceCRS(sp *Spec, xName, yName string) string {
	switch {
	case sp.CRS != "":
		return sp.CRS
	case len(sp.AnchorCoords) == 0 && lonLatNames[xName] && lonLatNames[yName]:
		return GeographicCRS
	}
	return ""
}

// anchorCRS is the anchor's crs: its crs key, else its data array's `area` attribute (a
// pyresample area definition or a PROJ definition), else EPSG:4326 for longitude/latitude
// axes; "" when it has none. The result is kept.
func (g *gridSource) anchorCRS(cfg *config.Config) (string, error) {
	if g.crsKnown {
		return g.crs, nil
	}
	g.crsKnown = true
	g.crs = sourceCRS(g.s, g.dims.name(axisX), g.dims.name(axisY))
	if g.s.CRS != "" {
		if err := checkCRS(g.crs); err != nil {
			return "", cfg.Errorf(g.s.Field+".crs", "%v", err)
		}
		return g.crs, nil
	}
	if area := g.c.arr.Attr("area"); area != "" && g.crs == "" {
		g.crs = crsOfArea(area)
		if err := checkCRS(g.crs); err != nil {
			return "", cfg.Errorf(g.s.Field+".crs", "%s/%s: attribute area: %v; expected a projection in it or a crs key on the anchor",
				g.store, g.s.Variable, err)
		}
		if err := checkCRSUnits(g.crs, fmt.Sprintf("%s/%s", g.store, g.dims.name(axisX)), fmt.Sprintf("%s/%s", g.store, g.dims.name(axisY)), g.xs, g.ys); err != nil {
			return "", cfg.Errorf(g.s.Field+".crs", "%s/%s: attribute area: %v", g.store, g.s.Variable, err)
		}
	}
	return g.crs, nil
}

// checkCRS says whether PROJ reads c as a coordinate reference system.
func checkCRS(c string) error {
	pj, err := proj.New(asCRS(c))
	if err != nil || !pj.IsCRS() {
		return fmt.Errorf("unknown coordinate reference system %q (PROJ does not read it as one)", c)
	}
	return nil
}

// asCRS marks a PROJ string as a CRS (PROJ reads "+proj=geos ..." alone as an operation).
func asCRS(c string) string {
	if strings.HasPrefix(c, "+") && !strings.Contains(c, "type=crs") {
		return c + " +type=crs"
	}
	return c
}

// crsOfArea reads a projection out of an `area` attribute: a pyresample area definition (YAML:
// one named area whose projection is a mapping of PROJ parameters, a PROJ string, or crs_wkt),
// or a definition PROJ reads as it is (a PROJ string, WKT, "EPSG:n").
func crsOfArea(area string) string {
	s := strings.TrimSpace(area)
	if strings.HasPrefix(s, "+") || strings.HasPrefix(strings.ToUpper(s), "EPSG:") || !strings.Contains(s, ":") {
		return s
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return s // not YAML: WKT, PROJJSON; PROJ says whether it knows it
	}
	def := doc
	if len(doc) == 1 { // { name: { description, projection, shape, area_extent } }
		for _, v := range doc {
			if m, ok := v.(map[string]any); ok {
				def = m
			}
		}
	}
	if w, ok := def["crs_wkt"].(string); ok {
		return w
	}
	switch p := def["projection"].(type) {
	case string:
		return p
	case map[string]any:
		return projString(p)
	}
	return s // PROJJSON and the like: PROJ says whether it knows it
}

// projString writes PROJ parameters (proj: geos, lon_0: 9.5, no_defs: null) as a PROJ string,
// in a fixed order (proj first, then by name) so that it is the same on every start-up.
func projString(p map[string]any) string {
	var parts []string
	if v, ok := p["proj"]; ok {
		parts = append(parts, fmt.Sprintf("+proj=%v", v))
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		if k != "proj" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := p[k].(type) {
		case nil: // a flag (no_defs: null)
			parts = append(parts, "+"+k)
		case bool:
			if v {
				parts = append(parts, "+"+k)
			}
		case float64: // plain digits: PROJ reads 35785831 as the writer meant it
			parts = append(parts, "+"+k+"="+strconv.FormatFloat(v, 'f', -1, 64))
		default:
			parts = append(parts, fmt.Sprintf("+%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

// transformer converts (x, y) pairs from one crs to another, x first (longitude first for
// geographic ones) whatever axis order the crs declares.
func transformer(from, to string) (*proj.PJ, error) {
	for _, c := range []string{from, to} {
		if err := checkCRS(c); err != nil {
			return nil, err
		}
	}
	pj, err := proj.NewCRSToCRS(asCRS(from), asCRS(to), nil)
	if err != nil {
		return nil, fmt.Errorf("no transformation from %q to %q: %v", from, to, err)
	}
	if pj, err = pj.NormalizeForVisualization(); err != nil {
		return nil, fmt.Errorf("transformation from %q to %q: %v", from, to, err)
	}
	return pj, nil
}

// transformAll converts xs[i], ys[i] in place; points PROJ cannot convert (off the disk of a
// geostationary view) become NaN.
func transformAll(pj *proj.PJ, xs, ys []float64) {
	flat := make([]float64, 2*len(xs))
	for i := range xs {
		flat[2*i], flat[2*i+1] = xs[i], ys[i]
	}
	// An error means that some point failed; PROJ has written HUGE_VAL (infinity) for those.
	_ = pj.TransFlatCoords(proj.DirectionFwd, flat, 2, -1, -1)
	for i := range xs {
		x, y := flat[2*i], flat[2*i+1]
		if math.IsInf(x, 0) || math.IsInf(y, 0) {
			x, y = math.NaN(), math.NaN()
		}
		xs[i], ys[i] = x, y
	}
}

// placeOnAnchor computes the anchor pixels' positions in source sp's coordinates; xName and
// yName are the names of the source's coordinates (axes, or points' positions).
func placeOnAnchor(cfg *config.Config, sp *Spec, anchor *gridSource, xName, yName string) (*positions, error) {
	p, err := findPositions(cfg, sp, anchor, xName, yName)
	if err != nil {
		return nil, err
	}
	if err := checkPlaced(cfg, sp, p); err != nil {
		return nil, err
	}
	return p, nil
}

func findPositions(cfg *config.Config, sp *Spec, anchor *gridSource, xName, yName string) (*positions, error) {
	if len(sp.AnchorCoords) == 2 {
		return anchorCoordPositions(cfg, sp, anchor)
	}
	crs := sourceCRS(sp, xName, yName)
	if crs == "" {
		return &positions{xs: anchor.xs, ys: anchor.ys}, nil
	}
	key := sp.Field + ".crs"
	if sp.CRS == "" {
		key = sp.Field + ".store" // implied by the coordinate names
	}
	from, err := anchor.anchorCRS(cfg)
	if err != nil {
		return nil, err
	}
	if from == "" {
		return nil, cfg.Errorf(key, "%s is in %s, but the anchor (%s) has no crs key nor area attribute; expected crs on the anchor, or anchor_coords here",
			sp.Name, crs, anchor.s.Field)
	}
	if from == crs {
		return &positions{xs: anchor.xs, ys: anchor.ys}, nil
	}
	pj, err := transformer(from, crs)
	if err != nil {
		return nil, cfg.Errorf(key, "%v", err)
	}
	H, W := len(anchor.ys), len(anchor.xs)
	p := &positions{w: W, xs: make([]float64, H*W), ys: make([]float64, H*W)}
	for cy := 0; cy < H; cy++ {
		for cx := 0; cx < W; cx++ {
			p.xs[cy*W+cx], p.ys[cy*W+cx] = anchor.xs[cx], anchor.ys[cy]
		}
	}
	transformAll(pj, p.xs, p.ys)
	return p, nil
}

// anchorCoordPositions reads anchor_coords: two arrays of the anchor's store, each over the
// anchor's (y, x) in either order, or 1-D over one of those axes.
func anchorCoordPositions(cfg *config.Config, sp *Spec, anchor *gridSource) (*positions, error) {
	key := sp.Field + ".anchor_coords"
	H, W := len(anchor.ys), len(anchor.xs)
	var full [2][]float64 // x, y over the whole grid (y-major)
	for k, name := range sp.AnchorCoords {
		a, err := anchor.store.Array(name)
		if err != nil {
			return nil, cfg.Errorf(key, "%q is not an array of the anchor's store %s: %v", name, anchor.store, err)
		}
		v, err := a.Float64s()
		if err != nil {
			return nil, cfg.Errorf(key, "%s/%s: %v", anchor.store, name, err)
		}
		if full[k], err = overAnchorGrid(a, v, anchor); err != nil {
			return nil, cfg.Errorf(key, "%s/%s: %v", anchor.store, name, err)
		}
	}
	return &positions{w: W, xs: full[0][:H*W], ys: full[1][:H*W]}, nil
}

// overAnchorGrid lays coordinate values v of array a out over the anchor's grid, y-major.
func overAnchorGrid(a Array, v []float64, anchor *gridSource) ([]float64, error) {
	H, W := len(anchor.ys), len(anchor.xs)
	shape, dims := a.Shape(), a.Dims()
	dimsAre := func(want ...string) bool {
		if len(dims) != len(want) {
			return false
		}
		for i := range want {
			if dims[i] != want[i] {
				return false
			}
		}
		return true
	}
	out := make([]float64, H*W)
	switch {
	case len(shape) == 2 && shape[0] == H && shape[1] == W && (len(dims) != 2 || dimsAre(anchor.dims.name(axisY), anchor.dims.name(axisX))):
		copy(out, v)
	case len(shape) == 2 && shape[0] == W && shape[1] == H && (dimsAre(anchor.dims.name(axisX), anchor.dims.name(axisY)) || len(dims) != 2 && H != W):
		for x := 0; x < W; x++ {
			for y := 0; y < H; y++ {
				out[y*W+x] = v[x*H+y]
			}
		}
	case len(shape) == 1 && shape[0] == W && (dimsAre(anchor.dims.name(axisX)) || len(dims) != 1 && H != W):
		for y := 0; y < H; y++ {
			copy(out[y*W:(y+1)*W], v)
		}
	case len(shape) == 1 && shape[0] == H && (dimsAre(anchor.dims.name(axisY)) || len(dims) != 1 && H != W):
		for y := 0; y < H; y++ {
			for x := 0; x < W; x++ {
				out[y*W+x] = v[y]
			}
		}
	default:
		return nil, fmt.Errorf("shape %v with dims %v does not match the anchor's grid (%s: %d, %s: %d); expected (%s, %s) or one of them",
			shape, dims, anchor.dims.name(axisY), H, anchor.dims.name(axisX), W, anchor.dims.name(axisY), anchor.dims.name(axisX))
	}
	return out, nil
}

// checkPlaced refuses positions that some anchor pixel lacks (NaN: a pixel that PROJ cannot
// convert, or a missing auxiliary coordinate): its crop would be placed nowhere.
func checkPlaced(cfg *config.Config, sp *Spec, p *positions) error {
	if p.w == 0 {
		return nil // the anchor's own coordinates
	}
	for i := range p.xs {
		for _, v := range []float64{p.xs[i], p.ys[i]} {
			if v == v {
				continue
			}
			cy, cx := i/p.w, i%p.w
			key := sp.Field + ".crs"
			if len(sp.AnchorCoords) > 0 {
				key = sp.Field + ".anchor_coords"
			}
			return cfg.Errorf(key, "the anchor pixel (row %d, column %d) has no position in the coordinates of %s; expected every anchor pixel to have one",
				cy, cx, sp.Name)
		}
	}
	return nil
}
