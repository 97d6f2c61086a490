package sampler

import (
	"math"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler/rules"
)

// The batch layout a rule set may ask for (rules.Layout):
//
//   - XYIncreasing: grid and NWP data are (time, channel, x, y), both coordinates increasing,
//     where gobatch's own order is (time, channel, y, x) in store order: the gather writes the
//     crop as stored and xyTranspose reorders it.
//   - WindowTensors, site-anchored: an anchor grid adds float64 <name>_time_utc [B, T] (nanoseconds
//     since the epoch, the window's stored times), <name>_<x dim> [B, W] and <name>_<y dim>
//     [B, H] (the crop's coordinates, increasing), as PV datasets name
//     satellite_time_utc, satellite_x_geostationary and satellite_y_geostationary; the
//     locations source adds float64 time_utc [B, T_g] (nanoseconds) and longitude, latitude [B].
//   - OneSystemFlat: a points source with nearest_k = 1 is (time,), not (time, 1).
//   - T0Float: t0 is float64 Unix seconds instead of int64.

// Names of the window tensors that do not depend on a source's name.
const (
	WindowTimeTensor = "time_utc"
	LongitudeTensor  = "longitude"
	LatitudeTensor   = "latitude"
)

// windowTensors are the indices of the window tensors in the batch.
type windowTensors struct {
	anchorTime, anchorX, anchorY int // the anchor grid's window times and crop coordinates; -1: a points anchor
	locTime                      int // the locations source's window times
	lon, lat                     int
}

// windowTensorList lists the window tensors when the rule set asks for them and the job is
// site-anchored, the first at index at.
func (j *Job) windowTensorList(at int) ([]config.Tensor, error) {
	if !j.layout.WindowTensors || j.sites == nil {
		return nil, nil
	}
	B := j.size
	f64 := func(name string, shape ...int) config.Tensor {
		return config.Tensor{Name: name, DType: ring.Float64, Shape: append([]int{B}, shape...)}
	}
	var out []config.Tensor
	t := &windowTensors{anchorTime: -1}
	if a := j.anchor; a != nil { // an anchor grid's window times and crop coordinates
		out = append(out,
			f64(a.s.Name+"_time_utc", a.win.n),
			f64(a.s.Name+"_"+a.dims.name(axisX), a.s.Width),
			f64(a.s.Name+"_"+a.dims.name(axisY), a.s.Height))
		for _, tn := range out {
			if err := ring.ValidateTensorName(tn.Name); err != nil {
				return nil, j.cfg.Errorf(a.s.Field, "the tensor of the anchor's window times or crop coordinates: %v; expected a shorter source or dimension name", err)
			}
		}
		t.anchorTime, t.anchorX, t.anchorY = at, at+1, at+2
	}
	t.locTime, t.lon, t.lat = at+len(out), at+len(out)+1, at+len(out)+2
	out = append(out, f64(WindowTimeTensor, j.sites.src.win.n), f64(LongitudeTensor), f64(LatitudeTensor))
	j.windowT = t
	return out, nil
}

// layoutShape is the shape of a source's example in layout l: a gridded source's x before
// its y (XYIncreasing), a points source's single system dropped (OneSystemFlat).
func layoutShape(l rules.Layout, sp *Spec, shape []int) []int {
	n := len(shape)
	switch {
	case sp.Role == RolePoints && sp.NearestK == 1 && l.OneSystemFlat:
		return shape[:n-1]
	case sp.Role == RolePoints || !l.XYIncreasing:
		return shape
	}
	out := append([]int(nil), shape...)
	out[n-2], out[n-1] = shape[n-1], shape[n-2]
	return out
}

// descending says whether coordinate c is in descending order.
func descending(c []float64) bool { return len(c) > 1 && c[0] > c[len(c)-1] }

// xyTranspose writes planes of an h x w crop in store order (src: [planes, h, w]) as
// [planes, w, h] with x and y increasing: a descending store axis is reversed.
func xyTranspose(dst, src []float32, planes, h, w int, yDesc, xDesc bool) {
	for p := 0; p < planes; p++ {
		s, d := src[p*h*w:(p+1)*h*w], dst[p*h*w:(p+1)*h*w]
		for xi := 0; xi < w; xi++ {
			sx := xi
			if xDesc {
				sx = w - 1 - xi
			}
			row := d[xi*h : (xi+1)*h]
			for yi := range row {
				sy := yi
				if yDesc {
					sy = h - 1 - yi
				}
				row[yi] = s[sy*w+sx]
			}
		}
	}
}

// gatherXY fills a grid or NWP source's example as (time, channel, x, y), both increasing:
// the gather into the reader's scratch, then the transpose into out.
func (j *Job) gatherXY(rs *readerState, s dataSource, ex *example, out []float32) error {
	if len(rs.xyBuf) < len(out) {
		rs.xyBuf = make([]float32, len(out))
	}
	buf := rs.xyBuf[:len(out)]
	if err := s.fill(rs, ex, buf); err != nil {
		return err
	}
	sp := s.spec()
	var xs, ys []float64
	switch g := s.(type) {
	case *gridSource:
		xs, ys = g.xs, g.ys
	case *nwpSource:
		xs, ys = g.xs, g.ys
	}
	h, w := sp.Height, sp.Width
	xyTranspose(out, buf, len(out)/(h*w), h, w, descending(ys), descending(xs))
	return nil
}

// fillWindowTensors writes example e's window tensors.
func (j *Job) fillWindowTensors(rs *readerState, e int, tensors [][]byte) {
	ex, t := &rs.ex, j.windowT
	if a := j.anchor; a != nil {
		windowNanos(&a.times, a.win, ex.t0, rs, bytesAsFloat64(tensors[t.anchorTime])[e*a.win.n:(e+1)*a.win.n])
		y0, x0 := a.cropStart(ex)
		cropCoords(a.xs, x0, bytesAsFloat64(tensors[t.anchorX])[e*a.s.Width:(e+1)*a.s.Width])
		cropCoords(a.ys, y0, bytesAsFloat64(tensors[t.anchorY])[e*a.s.Height:(e+1)*a.s.Height])
	}
	p := j.sites.src
	windowNanos(&p.times, p.win, ex.t0, rs, bytesAsFloat64(tensors[t.locTime])[e*p.win.n:(e+1)*p.win.n])
	lon, lat := j.sites.position(ex.site)
	bytesAsFloat64(tensors[t.lon])[e] = lon
	bytesAsFloat64(tensors[t.lat])[e] = lat
}

// windowNanos writes the stored times of the window at t0 as float64 nanoseconds since the
// epoch (numpy's datetime64[ns].astype(float)); NaN where the window has no step.
func windowNanos(ax *timeAxis, w timeWindow, t0 int64, rs *readerState, out []float64) {
	sp, missing := ax.place(w, t0, rs.timeScratch(w.n))
	for k := range out {
		if missing >= 0 {
			out[k] = math.NaN()
			continue
		}
		out[k] = float64(ax.value(sp.index(k)) * 1_000_000_000)
	}
}

// cropCoords writes the coordinates of the crop starting at store index i0, increasing.
func cropCoords(c []float64, i0 int, out []float64) {
	n := len(out)
	desc := descending(c)
	for k := range out {
		if desc {
			out[k] = c[i0+n-1-k]
		} else {
			out[k] = c[i0+k]
		}
	}
}

// View implements Source: how the job's rule set presents its batches (rules.Rules.View).
func (j *Job) View() View {
	var b rules.Batch
	if j.anchor != nil {
		b.Anchor = j.anchor.s.Name
	}
	for _, s := range j.srcs {
		if n, ok := s.(*nwpSource); ok {
			label := n.s.Label
			if label == "" {
				label = n.s.Name
			}
			b.NWP = append(b.NWP, rules.NWPTensor{Name: n.s.Name, Label: label, Channels: n.s.Channels, Times: n.targets != nil})
		}
	}
	if j.sites != nil && j.sites.src.s.TimeResolutionMinutes > 0 {
		w := j.sites.src.win.public()
		b.Locations = &w
	}
	return j.rules.View(b)
}
