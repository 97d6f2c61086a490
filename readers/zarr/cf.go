package zarr

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// CFInfo is what the CF / xarray attributes of an array say about decoding it.
type CFInfo struct {
	ScaleFactor float64 // 1 when absent
	AddOffset   float64 // 0 when absent
	HasScale    bool
	HasOffset   bool
	// FillValues are the raw values xarray masks as _FillValue: the _FillValue
	// attribute, or for v2 arrays the zarr fill_value (xarray's default for v2).
	FillValues []float64
	// MissingValues are the raw values of the missing_value attribute.
	MissingValues []float64
	Unsigned      bool   // _Unsigned = "true": signed integers hold unsigned values
	Units         string // the units attribute
	Calendar      string // the calendar attribute
	// For "<unit> since <epoch>" units: TimeUnit and Epoch are set and IsTime is true.
	// For a bare time unit ("hours"), IsDuration is true and TimeUnit is set.
	IsTime     bool
	IsDuration bool
	TimeUnit   time.Duration
	Epoch      time.Time
	// Err is set when the CF attributes cannot be used (a non-numeric scale_factor, a
	// bad reference time); CF decoding and ReadTimes then fail with it.
	Err error
}

// CF returns the array's CF decoding information.
func (a *Array) CF() CFInfo {
	c := *a.cf
	c.FillValues = append([]float64(nil), c.FillValues...)
	c.MissingValues = append([]float64(nil), c.MissingValues...)
	return c
}

// CFParams are the numbers CF decoding applies to a raw value v: NaN when v equals
// one of Masks, else v*Scale+Offset, computed in float64 (as xarray does) and then
// rounded to the output type.
type CFParams struct {
	Scale, Offset float64
	Masks         []float64
}

// Params reduces c to the numbers CF decoding needs. Masks are the _FillValue and
// missing_value values without duplicates and without NaN (a NaN raw value reads as
// NaN anyway).
func (c *CFInfo) Params() CFParams {
	p := CFParams{Scale: c.ScaleFactor, Offset: c.AddOffset}
	for _, v := range append(append([]float64(nil), c.FillValues...), c.MissingValues...) {
		if math.IsNaN(v) {
			continue // NaN raw values stay NaN
		}
		dup := false
		for _, m := range p.Masks {
			dup = dup || m == v
		}
		if !dup {
			p.Masks = append(p.Masks, v)
		}
	}
	return p
}

func parseCF(a *Array) (*CFInfo, error) {
	c := &CFInfo{ScaleFactor: 1}
	if raw, ok := a.Attrs["scale_factor"]; ok {
		v, err := attrFloats(raw)
		if err != nil || len(v) != 1 {
			return nil, fmt.Errorf("attribute scale_factor %.40s: not a number", string(raw))
		}
		c.ScaleFactor, c.HasScale = v[0], true
	}
	if raw, ok := a.Attrs["add_offset"]; ok {
		v, err := attrFloats(raw)
		if err != nil || len(v) != 1 {
			return nil, fmt.Errorf("attribute add_offset %.40s: not a number", string(raw))
		}
		c.AddOffset, c.HasOffset = v[0], true
	}
	if raw, ok := a.Attrs["_Unsigned"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil && strings.EqualFold(s, "true") {
			c.Unsigned = a.DType.Kind == KindInt
		}
	}
	if raw, ok := a.Attrs["_FillValue"]; ok && !isJSONNull(raw) {
		v, err := attrFloats(raw)
		if err != nil {
			return nil, fmt.Errorf("attribute _FillValue: %w", err)
		}
		c.FillValues = v
	} else if a.ZarrFormat == 2 && !a.FillNull && a.DType.Numeric() {
		c.FillValues = []float64{elemFloat(a.FillValue, a.DType)}
	}
	if raw, ok := a.Attrs["missing_value"]; ok && !isJSONNull(raw) {
		v, err := attrFloats(raw)
		if err != nil {
			return nil, fmt.Errorf("attribute missing_value: %w", err)
		}
		c.MissingValues = v
	}
	if c.Unsigned {
		bits := uint(8 * a.DType.Size)
		for _, l := range [][]float64{c.FillValues, c.MissingValues} {
			for i, v := range l {
				if v < 0 {
					l[i] = v + math.Ldexp(1, int(bits))
				}
			}
		}
	}
	if raw, ok := a.Attrs["units"]; ok {
		_ = json.Unmarshal(raw, &c.Units)
	}
	if raw, ok := a.Attrs["calendar"]; ok {
		_ = json.Unmarshal(raw, &c.Calendar)
	}
	if c.Units != "" {
		if unit, epoch, ok, err := parseTimeUnits(c.Units); ok {
			if err != nil {
				return nil, fmt.Errorf("attribute units %q: %w", c.Units, err)
			}
			c.TimeUnit = unit
			if epoch != nil {
				c.IsTime, c.Epoch = true, *epoch
			} else {
				c.IsDuration = true
			}
		}
	}
	return c, nil
}

// elemFloat reads one host-order element of d as float64.
func elemFloat(e []byte, d DType) float64 {
	h := d
	h.BigEndian = false
	return loadF(e, h)
}

// attrFloats reads a numeric attribute: a number, "NaN"/"Infinity" strings, a list of
// them, or xarray's base64 encoding of a little-endian float64 (v3 _FillValue).
func attrFloats(raw json.RawMessage) ([]float64, error) {
	if f, ok := jsonFloat(raw); ok {
		return []float64{f}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		out := make([]float64, 0, len(list))
		for _, r := range list {
			f, ok := jsonFloat(r)
			if !ok {
				return nil, fmt.Errorf("%.40s is not a number", string(r))
			}
			out = append(out, f)
		}
		return out, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			switch len(b) {
			case 8:
				return []float64{math.Float64frombits(binary.LittleEndian.Uint64(b))}, nil
			case 4:
				return []float64{float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))}, nil
			}
		}
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if b {
			return []float64{1}, nil
		}
		return []float64{0}, nil
	}
	return nil, fmt.Errorf("%.40s is not a number", string(raw))
}

var cfUnits = map[string]time.Duration{
	"nanoseconds": time.Nanosecond, "nanosecond": time.Nanosecond, "ns": time.Nanosecond,
	"microseconds": time.Microsecond, "microsecond": time.Microsecond, "us": time.Microsecond,
	"milliseconds": time.Millisecond, "millisecond": time.Millisecond, "ms": time.Millisecond, "msec": time.Millisecond,
	"seconds": time.Second, "second": time.Second, "s": time.Second, "sec": time.Second, "secs": time.Second,
	"minutes": time.Minute, "minute": time.Minute, "min": time.Minute, "mins": time.Minute,
	"hours": time.Hour, "hour": time.Hour, "h": time.Hour, "hr": time.Hour, "hrs": time.Hour,
	"days": 24 * time.Hour, "day": 24 * time.Hour, "d": 24 * time.Hour,
	"weeks": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour,
}

// parseTimeUnits parses CF time units: "<unit> since <reference time>" or a bare unit.
// ok is false when units is not a time unit at all.
func parseTimeUnits(units string) (unit time.Duration, epoch *time.Time, ok bool, err error) {
	s := strings.TrimSpace(units)
	word, rest, hasSince := strings.Cut(s, " since ")
	u, known := cfUnits[strings.ToLower(strings.TrimSpace(word))]
	if !known {
		return 0, nil, false, nil
	}
	if !hasSince {
		if strings.Contains(s, " ") {
			return 0, nil, false, nil
		}
		return u, nil, true, nil
	}
	t, err := parseRefTime(strings.TrimSpace(rest))
	if err != nil {
		return 0, nil, true, err
	}
	return u, &t, true, nil
}

// parseRefTime parses a CF reference time such as "2021-01-01 00:00:00",
// "2020-01-04T06:37:59.134000", "1970-01-01", with an optional zone ("Z", "UTC",
// "+01:00"). A missing zone means UTC.
func parseRefTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	loc := time.UTC
	for _, z := range []string{" UTC", " utc", "Z", " GMT"} {
		if strings.HasSuffix(s, z) {
			s = strings.TrimSpace(strings.TrimSuffix(s, z))
		}
	}
	var off *int
	if n := len(s); n > 6 && (s[n-6] == '+' || s[n-6] == '-') && s[n-3] == ':' && strings.ContainsAny(s[:n-6], " T") {
		var h, m int
		if _, err := fmt.Sscanf(s[n-5:], "%02d:%02d", &h, &m); err == nil {
			o := h*3600 + m*60
			if s[n-6] == '-' {
				o = -o
			}
			off = &o
			s = strings.TrimSpace(s[:n-6])
		}
	}
	date, clock, _ := strings.Cut(strings.Replace(s, "T", " ", 1), " ")
	var y, mo, d int
	if _, err := fmt.Sscanf(date, "%d-%d-%d", &y, &mo, &d); err != nil {
		return time.Time{}, fmt.Errorf("bad reference date %q", s)
	}
	if mo < 1 || mo > 12 || d < 1 || d > 31 {
		return time.Time{}, fmt.Errorf("bad reference date %q", s)
	}
	var hh, mm int
	var sec float64
	clock = strings.TrimSpace(clock)
	if clock != "" {
		parts := strings.Split(clock, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return time.Time{}, fmt.Errorf("bad reference time %q", s)
		}
		if _, err := fmt.Sscanf(parts[0], "%d", &hh); err != nil {
			return time.Time{}, fmt.Errorf("bad reference time %q", s)
		}
		if _, err := fmt.Sscanf(parts[1], "%d", &mm); err != nil {
			return time.Time{}, fmt.Errorf("bad reference time %q", s)
		}
		if len(parts) == 3 {
			if _, err := fmt.Sscanf(parts[2], "%g", &sec); err != nil {
				return time.Time{}, fmt.Errorf("bad reference time %q", s)
			}
		}
	}
	whole := math.Floor(sec)
	t := time.Date(y, time.Month(mo), d, hh, mm, int(whole), int(math.Round((sec-whole)*1e9)), loc)
	if off != nil {
		t = t.Add(-time.Duration(*off) * time.Second)
	}
	return t, nil
}

// NaT is the int64 that ReadTimes and ReadDurations return for a missing time
// (numpy's NaT).
const NaT = math.MinInt64

// unitNanos is the length of a numpy datetime unit in nanoseconds (0: not fixed).
func unitNanos(unit string, scale int64) (int64, bool) {
	var n int64
	switch unit {
	case "W":
		n = 7 * 86400e9
	case "D":
		n = 86400e9
	case "h":
		n = 3600e9
	case "m":
		n = 60e9
	case "s":
		n = 1e9
	case "ms":
		n = 1e6
	case "us":
		n = 1e3
	case "ns":
		n = 1
	default:
		return 0, false
	}
	if scale > 1 {
		if n > math.MaxInt64/scale {
			return 0, false
		}
		n *= scale
	}
	return n, true
}

// ReadTimes reads the whole array as absolute times, in nanoseconds since the Unix
// epoch (UTC), C order. It accepts datetime64 arrays and numeric arrays with CF units
// "<unit> since <time>". Missing values (NaT, _FillValue, missing_value, NaN) read as
// NaT. Use time.Unix(0, v) to get a time.Time.
func (a *Array) ReadTimes() ([]int64, error) {
	return a.ReadBoxTimes(a.fullBox(), a.Shape)
}

// ReadDurations reads the whole array as durations in nanoseconds: timedelta64
// arrays, or numeric arrays with a CF time unit ("hours"). Missing values read as NaT.
func (a *Array) ReadDurations() ([]int64, error) {
	return a.ReadBoxDurations(a.fullBox(), a.Shape)
}

// ReadBoxTimes is ReadTimes for the box [start, stop) (C order).
func (a *Array) ReadBoxTimes(start, stop []int) ([]int64, error) {
	return a.readTimes(true, start, stop)
}

// ReadBoxDurations is ReadDurations for the box [start, stop) (C order).
func (a *Array) ReadBoxDurations(start, stop []int) ([]int64, error) {
	return a.readTimes(false, start, stop)
}

func (a *Array) readTimes(absolute bool, start, stop []int) ([]int64, error) {
	fail := func(err error) ([]int64, error) {
		return nil, a.fail(err)
	}
	if a.cf.Err != nil && a.DType.Kind != KindDatetime && a.DType.Kind != KindTimedelta {
		return fail(a.cf.Err)
	}
	n, err := a.boxLen(start, stop)
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	switch {
	case (absolute && a.DType.Kind == KindDatetime) || (!absolute && a.DType.Kind == KindTimedelta):
		un, ok := unitNanos(a.DType.Unit, a.DType.UnitScale)
		if !ok {
			return fail(fmt.Errorf("datetime unit %q has no fixed length: %w", a.DType.Unit, ErrUnsupported))
		}
		if err := a.ReadBox(start, stop, int64Bytes(out), &ReadOptions{Out: Int64}); err != nil {
			return nil, err
		}
		for i, v := range out {
			if v == NaT {
				continue
			}
			if v > math.MaxInt64/un || v < -math.MaxInt64/un {
				return fail(fmt.Errorf("time value %d %s overflows int64 nanoseconds", v, a.DType.Unit))
			}
			out[i] = v * un
		}
		return out, nil
	case a.DType.Kind == KindInt || a.DType.Kind == KindUint || a.DType.Kind == KindFloat:
		cf := a.cf
		if absolute && !cf.IsTime {
			return fail(fmt.Errorf("units %q are not \"<unit> since <time>\"", cf.Units))
		}
		if !absolute && !cf.IsDuration {
			return fail(fmt.Errorf("units %q are not a time unit", cf.Units))
		}
		if absolute && cf.Calendar != "" {
			switch strings.ToLower(cf.Calendar) {
			case "standard", "gregorian", "proleptic_gregorian":
			default:
				return fail(fmt.Errorf("calendar %q: %w", cf.Calendar, ErrUnsupported))
			}
		}
		var base int64
		if absolute {
			base = cf.Epoch.UnixNano()
		}
		un := int64(cf.TimeUnit)
		masks := cf.Params().Masks
		if a.DType.Kind == KindFloat {
			f := make([]float64, n)
			if err := a.ReadBox(start, stop, float64Bytes(f), &ReadOptions{Out: Float64}); err != nil {
				return nil, err
			}
			for i, v := range f {
				out[i] = NaT
				if math.IsNaN(v) || isMasked(v, masks) {
					continue
				}
				ns := math.Round(v * float64(un))
				if math.Abs(ns) > 9.2e18 {
					return fail(fmt.Errorf("time value %g overflows int64 nanoseconds", v))
				}
				out[i] = int64(ns) + base
			}
			return out, nil
		}
		if err := a.ReadBox(start, stop, int64Bytes(out), &ReadOptions{Out: Int64}); err != nil {
			return nil, err
		}
		for i, v := range out {
			if isMasked(float64(v), masks) {
				out[i] = NaT
				continue
			}
			if v > math.MaxInt64/un || v < -math.MaxInt64/un {
				return fail(fmt.Errorf("time value %d overflows int64 nanoseconds", v))
			}
			out[i] = v*un + base
		}
		return out, nil
	}
	return fail(fmt.Errorf("dtype %s is not a time type", a.DType))
}

func isMasked(v float64, masks []float64) bool {
	for _, m := range masks {
		if v == m {
			return true
		}
	}
	return false
}

func (a *Array) fullBox() []int { return make([]int, len(a.Shape)) }
