package sampler

import (
	"math"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
)

// The batch layout under rules = "ocf" (docs/OCF.md): ocf-data-sampler's axis order for the
// gridded sources and the per-example keys of its sample that are not data.
//
//   - Grid and NWP data are (time, channel, x, y), both coordinates increasing, where gobatch's
//     own order is (time, channel, y, x) in store order: the gather writes the crop as stored
//     and ocfTranspose reorders it.
//   - The anchor (the satellite) adds float64 <name>_time_utc [B, T] (nanoseconds since the
//     epoch, the window's stored times), <name>_<x dim> [B, W] and <name>_<y dim> [B, H] (the
//     crop's coordinates, increasing), as ocf-data-sampler names satellite_time_utc,
//     satellite_x_geostationary and satellite_y_geostationary.
//   - A points source with nearest_k = 1 is (time,), ocf's generation, not (time, 1).
//   - The locations source (the generation) adds float64 time_utc [B, T_g] (nanoseconds) and
//     longitude, latitude [B]; t0 is float64 Unix seconds instead of int64.

// Names of the tensors of a rules = "ocf" batch that do not depend on a source's name.
const (
	OCFTimeTensor      = "time_utc"
	OCFLongitudeTensor = "longitude"
	OCFLatitudeTensor  = "latitude"
)

// ocfTensors are the indices of the extra tensors in the batch.
type ocfTensors struct {
	satTime, satX, satY int // the anchor's window times and crop coordinates
	genTime             int // the locations source's window times
	lon, lat            int
}

// ocfExtraTensors lists the extra tensors, the first at index at.
func (j *Job) ocfExtraTensors(at int) ([]config.Tensor, error) {
	if !j.ocf || j.sites == nil {
		return nil, nil
	}
	a, B := j.anchor, j.size
	f64 := func(name string, shape ...int) config.Tensor {
		return config.Tensor{Name: name, DType: ring.Float64, Shape: append([]int{B}, shape...)}
	}
	out := []config.Tensor{
		f64(a.s.Name+"_time_utc", a.win.n),
		f64(a.s.Name+"_"+a.dims.name(axisX), a.s.Width),
		f64(a.s.Name+"_"+a.dims.name(axisY), a.s.Height),
		f64(OCFTimeTensor, j.sites.src.win.n),
		f64(OCFLongitudeTensor),
		f64(OCFLatitudeTensor),
	}
	for _, t := range out {
		if err := ring.ValidateTensorName(t.Name); err != nil {
			return nil, j.cfg.Errorf(a.s.Field, "the rules = \"ocf\" tensor of the anchor's times or coordinates: %v; expected a shorter source or dimension name", err)
		}
	}
	j.ocfT = &ocfTensors{satTime: at, satX: at + 1, satY: at + 2, genTime: at + 3, lon: at + 4, lat: at + 5}
	return out, nil
}

// ocfShape is the shape of a source's example under rules = "ocf": a gridded source's x
// before its y, a points source's single system dropped.
func ocfShape(sp *Spec, shape []int) []int {
	n := len(shape)
	if sp.Role == RolePoints {
		if sp.NearestK == 1 {
			return shape[:n-1]
		}
		return shape
	}
	out := append([]int(nil), shape...)
	out[n-2], out[n-1] = shape[n-1], shape[n-2]
	return out
}

// ocfTranspose writes planes of an h x w crop in store order (src: [planes, h, w]) as
// ocf-data-sampler's [planes, w, h] with x and y increasing: a descending store axis is
// reversed.
func ocfTranspose(dst, src []float32, planes, h, w int, yDesc, xDesc bool) {
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

// ocfGather fills a grid or NWP source's example in ocf's order: the gather into the reader's
// scratch, then the transpose into out.
func (j *Job) ocfGather(rs *readerState, s dataSource, ex *example, out []float32) error {
	if len(rs.ocfBuf) < len(out) {
		rs.ocfBuf = make([]float32, len(out))
	}
	buf := rs.ocfBuf[:len(out)]
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
	ocfTranspose(out, buf, len(out)/(h*w), h, w, newOCFAxis(ys).desc, newOCFAxis(xs).desc)
	return nil
}

// ocfFill writes example e's extra tensors.
func (j *Job) ocfFill(rs *readerState, e int, tensors [][]byte) {
	ex, t := &rs.ex, j.ocfT
	a := j.anchor
	windowNanos(&a.times, a.win, ex.t0, rs, bytesAsFloat64(tensors[t.satTime])[e*a.win.n:(e+1)*a.win.n])
	y0, x0 := int(a.siteCrop[2*ex.site]), int(a.siteCrop[2*ex.site+1])
	cropCoords(a.xs, x0, bytesAsFloat64(tensors[t.satX])[e*a.s.Width:(e+1)*a.s.Width])
	cropCoords(a.ys, y0, bytesAsFloat64(tensors[t.satY])[e*a.s.Height:(e+1)*a.s.Height])
	p := j.sites.src
	windowNanos(&p.times, p.win, ex.t0, rs, bytesAsFloat64(tensors[t.genTime])[e*p.win.n:(e+1)*p.win.n])
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
	desc := newOCFAxis(c).desc
	for k := range out {
		if desc {
			out[k] = c[i0+n-1-k]
		} else {
			out[k] = c[i0+k]
		}
	}
}

// View implements Source: under rules = "ocf" the nesting ocf-data-sampler's
// stack_np_samples_into_batch gives the batch (docs/OCF.md), which the trainer's side builds
// from the ring (PROTOCOL.md 2.9): the anchor's tensor as satellite_actual; each NWP provider
// key k as nwp[k] = {nwp, nwp_channel_names, nwp_init_time_utc, nwp_step, nwp_target_time_utc};
// t0_idx (-interval_start / time_resolution of the locations source) when site-anchored. Nil
// (a flat batch) under gobatch's rules.
func (j *Job) View() View {
	if !j.ocf {
		return nil
	}
	v := View{ViewTensor(j.anchor.s.Name, "satellite_actual")}
	for _, s := range j.srcs {
		n, ok := s.(*nwpSource)
		if !ok {
			continue
		}
		k := n.s.Name
		v = append(v, ViewTensor(k, "nwp", k, "nwp"), ViewStrings(n.s.Channels, "nwp", k, "nwp_channel_names"))
		if n.ocf != nil {
			v = append(v, ViewTensor(k+nwpInitSuffix, "nwp", k, "nwp_init_time_utc"),
				ViewTensor(k+nwpStepSuffix, "nwp", k, "nwp_step"),
				ViewTensor(k+nwpTargetSuffix, "nwp", k, "nwp_target_time_utc"))
		}
	}
	if j.sites != nil && j.sites.src.s.TimeResolutionMinutes > 0 {
		sp := j.sites.src.s
		v = append(v, ViewInt(floorDiv(-sp.IntervalStartMinutes, sp.TimeResolutionMinutes), "t0_idx"))
	}
	return v
}
