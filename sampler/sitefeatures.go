package sampler

import (
	"strings"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/features"
	"github.com/gobatch/gobatch/ring"
)

// Site features: the values a PV model's sample carries besides the data
// it reads (package features computes them). They are keys of the points source that the
// anchor's examples are centred on (its locations), since they belong to the (t0, site) pair:
//
//	datetime_features = true      date_sin, date_cos, time_sin, time_cos, float32 [B, T], over
//	                              this source's window t0 + interval_start .. interval_end
//	solar_position = { time_resolution_minutes = 30, interval_start_minutes = -60,
//	                   interval_end_minutes = 480 }
//	                              solar_azimuth, solar_elevation, float32 [B, T_sol], at the
//	                              site's longitude/latitude, scaled to [0, 1]
//	t0_embedding = ["1h:cyclic", "1y:linear"]
//	                              t0_embedding, float32 [B, E]: each period "<N>h" or "<N>y"
//	                              with its kind, "cyclic" (sine and cosine) or "linear"

// Names of the site-feature tensors, as PV datasets name their sample keys.
const (
	DateSinTensor        = "date_sin"
	DateCosTensor        = "date_cos"
	TimeSinTensor        = "time_sin"
	TimeCosTensor        = "time_cos"
	SolarAzimuthTensor   = "solar_azimuth"
	SolarElevationTensor = "solar_elevation"
	T0EmbeddingTensor    = "t0_embedding"
)

// SiteFeatures are a points source's site-feature keys, decoded.
type SiteFeatures struct {
	DateTime    bool
	Solar       *timeWindow // nil: no solar position
	T0Embedding []features.Embedding
}

func (f SiteFeatures) any() bool { return f.DateTime || f.Solar != nil || len(f.T0Embedding) > 0 }

// siteFeatures decodes the site-feature keys.
func (d *specDecoder) siteFeatures() {
	s, t := d.s, d.t
	s.Features.DateTime = t.Bool("datetime_features", false)
	if sub := t.Sub("solar_position"); sub != nil {
		w := &specDecoder{t: sub, s: &Spec{}, ok: true}
		w.timeWindow()
		sub.Done()
		if !w.ok {
			d.ok = false
		} else {
			win := w.s.window()
			s.Features.Solar = &win
		}
	}
	if t.Has("t0_embedding") {
		list := t.Strings("t0_embedding")
		if list == nil {
			d.ok = false
		}
		for i, e := range list {
			period, kind, _ := strings.Cut(e, ":")
			emb, err := features.ParseEmbedding(period, kind)
			if err != nil {
				d.bad("t0_embedding", "element %d (%q): %v; expected \"<period>:<kind>\"", i, e, err)
				continue
			}
			s.Features.T0Embedding = append(s.Features.T0Embedding, emb)
		}
	}
	if s.Features.any() && s.Role != RolePoints {
		d.bad("datetime_features", "datetime_features, solar_position and t0_embedding belong to the points source the examples are centred on; this source's role is %q", s.Role)
	}
}

// siteFeatureTensors lists the tensors of the locations source's features, the first at
// index at of the batch's tensors.
func (j *Job) siteFeatureTensors(at int) ([]config.Tensor, error) {
	var sp *Spec
	for _, s := range j.srcs {
		if f := s.spec().Features; f.any() {
			if j.sites == nil || s != dataSource(j.sites.src) {
				return nil, j.cfg.Errorf(s.spec().Field+".datetime_features", "datetime_features, solar_position and t0_embedding need the examples centred on this source's systems (the anchor's locations = %q)", s.spec().Name)
			}
			sp = s.spec()
		}
	}
	if sp == nil {
		return nil, nil
	}
	f, p, B := sp.Features, j.sites.src, j.size
	var out []config.Tensor
	width := 0
	if f.DateTime {
		for _, n := range []string{DateSinTensor, DateCosTensor, TimeSinTensor, TimeCosTensor} {
			out = append(out, config.Tensor{Name: n, DType: ring.Float32, Shape: []int{B, sp.Steps()}})
		}
	}
	if f.Solar != nil {
		if p.geo == nil {
			return nil, j.cfg.Errorf(sp.Field+".solar_position", "needs the systems' positions in longitude/latitude; %s/%s are in another system", p.xName, p.yName)
		}
		out = append(out, config.Tensor{Name: SolarAzimuthTensor, DType: ring.Float32, Shape: []int{B, f.Solar.n}},
			config.Tensor{Name: SolarElevationTensor, DType: ring.Float32, Shape: []int{B, f.Solar.n}})
	}
	if len(f.T0Embedding) > 0 {
		w := 0
		for _, e := range f.T0Embedding {
			w += e.Width()
		}
		out = append(out, config.Tensor{Name: T0EmbeddingTensor, DType: ring.Float32, Shape: []int{B, w}})
		width = w
	}
	j.feat = &siteFeatureFill{f: f, win: sp.window(), at: at, width: width}
	return out, nil
}

// siteFeatureFill writes the site features of each example: at is the index of the first
// site-feature tensor, the others follow in siteFeatureTensors' order.
type siteFeatureFill struct {
	f     SiteFeatures
	win   timeWindow // the locations source's window (the datetime features)
	at    int
	width int // of the t0 embedding (0: none)
}

// fill writes example e's features: t0 unix seconds, the site at lon/lat; sun keeps the
// reader's geocentric sun positions.
func (s *siteFeatureFill) fill(tensors [][]byte, e int, t0 int64, lon, lat float64, sun *features.SunCache) {
	i := s.at
	if s.f.DateTime {
		n := s.win.n
		ds, dc := bytesAsFloat32(tensors[i])[e*n:(e+1)*n], bytesAsFloat32(tensors[i+1])[e*n:(e+1)*n]
		ts, tc := bytesAsFloat32(tensors[i+2])[e*n:(e+1)*n], bytesAsFloat32(tensors[i+3])[e*n:(e+1)*n]
		for k := range n {
			a, b, c, d := features.DateTime(s.win.stepTime(t0, k))
			ds[k], dc[k], ts[k], tc[k] = float32(a), float32(b), float32(c), float32(d)
		}
		i += 4
	}
	if w := s.f.Solar; w != nil {
		az, el := bytesAsFloat32(tensors[i])[e*w.n:(e+1)*w.n], bytesAsFloat32(tensors[i+1])[e*w.n:(e+1)*w.n]
		for k := range w.n {
			a, b := features.Normalised(sun.At(w.stepTime(t0, k)).Seen(lon, lat))
			az[k], el[k] = float32(a), float32(b)
		}
		i += 2
	}
	if s.width > 0 {
		features.T0Embedding(bytesAsFloat32(tensors[i])[e*s.width:(e+1)*s.width], t0, s.f.T0Embedding)
	}
}

// stepTime is the unix time of step k of window w around t0 (not aligned to any grid: a date
// range from t0 + interval_start).
func (w timeWindow) stepTime(t0 int64, k int) int64 { return t0 + (w.first+int64(k))*w.res }
