package ocf

import (
	"fmt"
	"math"

	"github.com/gobatch/gobatch/sampler/rules"
)

// Rules is ocf-data-sampler 1.0.24's rule set (docs/OCF.md), registered as "ocf": the
// translation of a YAML file sets it on the anchor (rules = "ocf"), and a TOML file may too.
// Each rule is a small pure function below, tested beside it (rules_test.go).
var Rules rules.Rules = ocfRules{}

// RulesName is the rule set's name (key rules).
const RulesName = "ocf"

type ocfRules struct{}

func init() { rules.Register(Rules) }

func (ocfRules) Name() string { return RulesName }

// Check: every key gobatch reads has a meaning under ocf's rules (NWP dropout moves
// t0_available, accumulated channels are differenced).
func (ocfRules) Check(rules.SourceKeys) (key, why string) { return "", "" }

func (ocfRules) DropoutFills(w rules.Window, cut int64) (from, to int) { return DropoutFills(w, cut) }

func (ocfRules) FillQuotient(row []float32, fill float32) { NanToNum(row, fill) }

func (ocfRules) FillQuotient64(row []float64, fill float64) { NanToNum64(row, fill) }

// WindowT0: ocf-data-sampler's select_time_slice ceils t0 + interval_start (and the end) onto
// the source's own resolution, so a t0 off a source's grid (sites every 5 minutes beside a
// 15-minute satellite) takes the window that starts at the next step of the grid.
func (ocfRules) WindowT0(t0, res int64) int64 { return CeilTo(t0, res) }

// Layout: ocf-data-sampler's samples have (time, channel, x, y) with both coordinates
// increasing, the generation of one location as (time,), t0 as float64 seconds, and the
// satellite's times and coordinates and the generation's times and position beside the data.
func (ocfRules) Layout() rules.Layout {
	return rules.Layout{XYIncreasing: true, OneSystemFlat: true, T0Float: true, WindowTensors: true}
}

func (ocfRules) View(b rules.Batch) rules.View { return View(b) }

// DropoutFills is ocf-data-sampler's apply_history_dropout: a dropout with cut-off cut fills
// the steps in (t0 + cut, t0] of window w; the steps after t0 are kept.
func DropoutFills(w rules.Window, cut int64) (from, to int) {
	from = w.StepsUpTo(cut)
	if cut == rules.NoDropout {
		return from, w.N
	}
	return from, max(from, w.StepsUpTo(0))
}

// NanToNum fills a row as numpy's nan_to_num fills it (ocf-data-sampler fills an array only
// when it has a NaN): NaN becomes fill, an infinity the largest float32 of its sign.
func NanToNum(row []float32, fill float32) {
	for i, v := range row {
		switch {
		case v != v:
			row[i] = fill
		case v > math.MaxFloat32:
			row[i] = math.MaxFloat32
		case v < -math.MaxFloat32:
			row[i] = -math.MaxFloat32
		}
	}
}

// NanToNum64 is NanToNum on a float64 row, as numpy's nan_to_num treats a float64 array:
// infinities become the largest float64.
func NanToNum64(row []float64, fill float64) {
	for i, v := range row {
		switch {
		case v != v:
			row[i] = fill
		case math.IsInf(v, 1):
			row[i] = math.MaxFloat64
		case math.IsInf(v, -1):
			row[i] = -math.MaxFloat64
		}
	}
}

// View is the nesting ocf-data-sampler's stack_np_samples_into_batch gives a batch: the
// anchor's tensor as satellite_actual; each NWP provider key k as nwp[k] = {nwp,
// nwp_channel_names, nwp_init_time_utc, nwp_step, nwp_target_time_utc}; t0_idx (-interval_start
// / time_resolution of the locations source, the generation) when site-anchored.
func View(b rules.Batch) rules.View {
	var v rules.View
	if b.Anchor != "" { // the satellite; none in a configuration without one
		v = append(v, rules.ViewTensor(b.Anchor, "satellite_actual"))
	}
	for _, n := range b.NWP {
		t, k := n.Name, n.Label // the tensor, and the provider key it is nested under
		if k == "" {
			k = t
		}
		v = append(v, rules.ViewTensor(t, "nwp", k, "nwp"), rules.ViewStrings(n.Channels, "nwp", k, "nwp_channel_names"))
		if n.Times {
			v = append(v, rules.ViewTensor(t+rules.InitSuffix, "nwp", k, "nwp_init_time_utc"),
				rules.ViewTensor(t+rules.StepSuffix, "nwp", k, "nwp_step"),
				rules.ViewTensor(t+rules.TargetSuffix, "nwp", k, "nwp_target_time_utc"))
		}
	}
	if w := b.Locations; w != nil {
		v = append(v, rules.ViewInt(-w.First, "t0_idx"))
	}
	return v
}

func (ocfRules) SiteCrop() rules.AxisCrop { return CropStart }

// CropStart is ocf-data-sampler's select_spatial_slice_pixels along one axis: coords seen in
// increasing order (ocf's loader flips a descending axis), the position must lie strictly
// inside them, the centre is the nearest coordinate (the first on a tie, argmin) and the crop
// covers [c - size/2, c + size/2) of the increasing axis; nothing is clamped. The result is the
// crop's first store index: with a descending store the crop's store indices hold the
// increasing crop reversed.
func CropStart(coords []float64, v float64, size int) (start int, why string) {
	n := len(coords)
	desc := n > 1 && coords[0] > coords[n-1]
	inc := func(i int) float64 {
		if desc {
			return coords[n-1-i]
		}
		return coords[i]
	}
	if n == 0 || !(inc(0) < v && v < inc(n-1)) { // false for NaN too
		return -1, fmt.Sprintf("%g is not strictly inside %g .. %g", v, inc(0), inc(max(n-1, 0)))
	}
	c, best := 0, math.Inf(1)
	for i := 0; i < n; i++ {
		if d := math.Abs(inc(i) - v); d < best { // strict: the first index on a tie (argmin)
			c, best = i, d
		}
	}
	lo, hi := c-size/2, c+size/2
	if lo < 0 || hi > n {
		return -1, fmt.Sprintf("the %d-pixel crop around index %d of %d leaves the grid", size, c, n)
	}
	if desc {
		return n - hi, ""
	}
	return lo, ""
}
