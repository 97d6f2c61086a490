package sampler

import (
	"fmt"
	"math"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
)

// An NWP source under rules = "ocf" (docs/OCF.md) selects its window as ocf-data-sampler
// 1.0.24's select_time_slice_nwp does, not by gobatch's one-run rule (nwpRule):
//
//   - the target times run from ceil(t0 + interval_start) to ceil(t0 + interval_end) on the
//     resolution's grid (aligned to the Unix epoch), one step further when the source has
//     accumulated channels;
//   - each target time takes the latest init time in [first target - last step, t0_available]
//     that is at or before it, with step target - init: the window may mix runs;
//   - t0_available is t0, or with NWP dropout t0 + a timedelta drawn for the example (fill.go);
//   - the accumulated channels are then differenced along the steps (v[k+1] - v[k]) and the
//     extra step is dropped, before their (diff_c) normalisation; NaN becomes the fill value
//     after that.
//
// Each example also gets the init time, step and target time of every step of the window, in
// the tensors <name>_init_time_utc, <name>_step and <name>_target_time_utc.

// The suffixes of an ocf NWP source's time tensors.
const (
	nwpInitSuffix   = "_init_time_utc"   // float64 (B, T): nanoseconds since the epoch
	nwpStepSuffix   = "_step"            // int64 (B, T): whole hours, truncated toward zero
	nwpTargetSuffix = "_target_time_utc" // float64 (B, T): nanoseconds since the epoch
)

// ocfNWP is what an NWP source needs under ocf's rules.
type ocfNWP struct {
	first  int64 // interval_start / resolution
	n      int   // target times: the window's steps, + 1 with accumulated channels
	res    int64 // seconds
	accum  []int // output channel of each accumulated channel
	accSrc []int // its store channel
	norm   []normConsts
	// fill: NaN becomes fillV after the difference (the chunks keep their NaNs then)
	fill     bool
	fillV    float32
	maxStale int64 // seconds (maxStaleness)
	timesAt  int   // index of the <name>_init_time_utc tensor in the batch (then step, target)
}

// normConsts are one channel's normalisation: clip to [lo, hi], then (v - mean) / std.
type normConsts struct{ mean, std, lo, hi float64 }

// ceilTo rounds t up to a multiple of res (pandas' Timestamp.ceil, aligned to the epoch).
func ceilTo(t, res int64) int64 { return -floorDiv(-t, res) * res }

// setupOCF prepares NWP source n for ocf's rules: its accumulated channels (whose chunks are
// then left unnormalised: the difference comes first), the fill after the difference, and the
// staleness, which must not exceed what the steps allow.
func (n *nwpSource) setupOCF(cfg *config.Config, sp *Spec) error {
	w := sp.window()
	o := &ocfNWP{first: w.first, n: w.n, res: w.res}
	mean, std, lo, hi := normArrays(sp)
	for _, name := range sp.AccumChannels {
		for j, c := range sp.Channels {
			if c != name {
				continue
			}
			o.accum, o.accSrc = append(o.accum, j), append(o.accSrc, n.chans[j])
			o.norm = append(o.norm, normConsts{mean[j], std[j], lo[j], hi[j]})
			mean[j], std[j], lo[j], hi[j] = 0, 1, math.Inf(-1), math.Inf(1)
		}
	}
	if len(o.accum) > 0 {
		o.n++
		o.fill, o.fillV = sp.nanFill()
	}
	n.ocf = o
	if sp.NormaliseMean != nil {
		n.c.setNormalisation(2, n.chans, mean, std, lo, hi)
	}
	limit := n.steps.last() - sp.IntervalEndMinutes*60 - int64(o.n-w.n)*w.res
	o.maxStale = limit
	if sp.MaxStalenessSet {
		if sp.MaxStalenessMinutes*60 > limit {
			return cfg.Errorf(sp.Field+".max_staleness_minutes", "%d is more than the steps allow: at most %d (the last step %s - interval_end_minutes %d%s)",
				sp.MaxStalenessMinutes, floorDiv(limit, 60), fmtOffset(n.steps.last()), sp.IntervalEndMinutes, accumNote(o, w))
		}
		o.maxStale = sp.MaxStalenessMinutes * 60
	}
	return nil
}

func accumNote(o *ocfNWP, w timeWindow) string {
	if o.n == w.n {
		return ""
	}
	return fmt.Sprintf(" - time_resolution_minutes %d for the accumulated channels", w.res/60)
}

// normArrays are copies of the source's normalisation per channel (identity without one).
func normArrays(sp *Spec) (mean, std, lo, hi []float64) {
	c := sp.nChannels()
	mean, std, lo, hi = make([]float64, c), make([]float64, c), make([]float64, c), make([]float64, c)
	for j := range c {
		std[j], lo[j], hi[j] = 1, math.Inf(-1), math.Inf(1)
		if sp.NormaliseMean != nil {
			mean[j], std[j] = sp.NormaliseMean[j], sp.NormaliseStd[j]
		}
		if sp.ClipMin != nil {
			lo[j], hi[j] = sp.ClipMin[j], sp.ClipMax[j]
		}
	}
	return mean, std, lo, hi
}

// maxStaleness is the NWP's staleness limit in seconds under ocf's rules: the configured
// max_staleness_minutes, else the largest the steps allow (the last step - interval_end,
// - the resolution with accumulated channels). The valid t0 periods use it.
func (n *nwpSource) maxStaleness() int64 { return n.ocf.maxStale }

// ocfPick chooses, for each of the n target times start + k*res, the latest init time in
// [start - the last step, avail] at or before it, and the step target - init: run[k] and
// step[k] are their indices (nil slices: only checked). missing is -1 when every target has
// both, else the first k that lacks one.
func ocfPick(inits []int64, steps *timeAxis, start, res int64, n int, avail int64, run, step []int) (missing int) {
	tmin := start - steps.last()
	for k := range n {
		target := start + int64(k)*res
		i := latestAtOrBefore(inits, min(target, avail))
		if i < 0 || inits[i] < tmin {
			return k
		}
		s, ok := steps.index(target - inits[i])
		if !ok {
			return k
		}
		if run != nil {
			run[k], step[k] = i, s
		}
	}
	return -1
}

// start is the first target time at t0.
func (o *ocfNWP) start(t0 int64) int64 { return ceilTo(t0+o.first*o.res, o.res) }

// available is t0_available of an example: t0, or t0 + its NWP dropout timedelta.
func available(ex *example, i int) int64 {
	if c := ex.cut[i]; c != math.MaxInt64 {
		return ex.t0 + c
	}
	return ex.t0
}

func (n *nwpSource) pick(ex *example, run, step []int) bool {
	o := n.ocf
	return ocfPick(n.inits.vals, &n.steps, o.start(ex.t0), o.res, o.n, available(ex, n.s.Index), run, step) < 0
}

// fitsOCF: the window can be selected at t0 for t0_available = t0 and for every dropout
// timedelta.
func (n *nwpSource) fitsOCF(t0 int64) bool {
	o := n.ocf
	for _, avail := range n.availables(t0) {
		if ocfPick(n.inits.vals, &n.steps, o.start(t0), o.res, o.n, avail, nil, nil) >= 0 {
			return false
		}
	}
	return true
}

// availables are the t0_available an example at t0 may have.
func (n *nwpSource) availables(t0 int64) []int64 {
	out := []int64{t0}
	if n.s.DropoutFraction > 0 {
		for _, d := range n.s.DropoutTimedeltasMinutes {
			out = append(out, t0+d*60)
		}
	}
	return out
}

func (n *nwpSource) whyNotOCF(t0 int64, detail bool) reject {
	o := n.ocf
	start := o.start(t0)
	for _, avail := range n.availables(t0) {
		k := ocfPick(n.inits.vals, &n.steps, start, o.res, o.n, avail, nil, nil)
		if k < 0 {
			continue
		}
		target := start + int64(k)*o.res
		i := latestAtOrBefore(n.inits.vals, min(target, avail))
		if i < 0 || n.inits.value(i) < start-n.steps.last() {
			if !detail {
				return reject{cause: causeNoRun}
			}
			return reject{causeNoRun, fmt.Sprintf("no run for target time %s: none with init_time in %s .. %s (t0_available)",
				fmtTime(target), fmtTime(start-n.steps.last()), fmtTime(avail))}
		}
		if !detail {
			return reject{cause: causeNoStep}
		}
		return reject{causeNoStep, fmt.Sprintf("the run %s has no step %s for target time %s",
			fmtTime(n.inits.value(i)), fmtOffset(target-n.inits.value(i)), fmtTime(target))}
	}
	return reject{}
}

// nwpPicks is rs's scratch for an example's run and step indices (n each).
func (rs *readerState) nwpPicks(n int) (run, step []int) {
	if len(rs.nwpRun) < n {
		rs.nwpRun, rs.nwpStep = make([]int, n), make([]int, n)
	}
	return rs.nwpRun[:n], rs.nwpStep[:n]
}

// accumScratch is rs's scratch for the accumulated channels' step after the window.
func (rs *readerState) accumScratch(n int) []float32 {
	if len(rs.accum) < n {
		rs.accum = make([]float32, n)
	}
	return rs.accum[:n]
}

// runs calls f for each run of consecutive steps k .. k+m-1 of the window that come from one
// init time with evenly spaced step indices: one box each.
func runs(run, step []int, f func(k, m, stride int) error) error {
	for k := 0; k < len(run); {
		m, stride := 1, 1
		for k+m < len(run) && run[k+m] == run[k] {
			d := step[k+m] - step[k+m-1]
			if m == 1 {
				stride = d
			} else if d != stride {
				break
			}
			m++
		}
		if err := f(k, m, stride); err != nil {
			return err
		}
		k += m
	}
	return nil
}

// stepsBox is the box of na steps of run run from step index a0 on, stride apart, channels
// chans (store indices), the crop starting at (y0, x0). Every box of an ocf window is made
// here.
func (n *nwpSource) stepsBox(y0, x0, run, a0, stride, na int, chans []int) box4 {
	return box4{lead: run, a0: a0, aStride: stride, na: na, b: chans,
		y0: y0, h: n.s.Height, x0: x0, w: n.s.Width, nanFrom: na, nanTo: na}
}

// fillOCF writes example ex's window: each target time from its run, then the difference of
// the accumulated channels, their normalisation and the NaN fill.
func (n *nwpSource) fillOCF(rs *readerState, ex *example, out []float32) error {
	o := n.ocf
	run, step := rs.nwpPicks(o.n)
	if !n.pick(ex, run, step) {
		return fmt.Errorf("%s: no run for the window at t0 %d", n.c.what, ex.t0)
	}
	T := n.rule.window.n
	y0, x0 := n.cropStart(ex)
	plane := n.s.Height * n.s.Width
	per := len(n.chans) * plane
	defer rs.pins.releaseAll()
	err := runs(run[:T], step[:T], func(k, m, stride int) error {
		bx := n.stepsBox(y0, x0, run[k], step[k], stride, m, n.chans)
		return gather4(&rs.pins, n.c, &bx, out[k*per:(k+m)*per], rs.nt)
	})
	if err != nil || len(o.accum) == 0 {
		return err
	}
	next := rs.accumScratch(len(o.accum) * plane)
	bx := n.stepsBox(y0, x0, run[T], step[T], 1, 1, o.accSrc)
	if err := gather4(&rs.pins, n.c, &bx, next, rs.nt); err != nil {
		return err
	}
	o.diff(out, next, T, len(n.chans), plane)
	if o.fill {
		for i, v := range out {
			if v != v {
				out[i] = o.fillV
			}
		}
	}
	return nil
}

// diff replaces each accumulated channel of out (T steps of C channel planes) by its forward
// difference along the steps, v[k+1] - v[k] in float32 as ocf-data-sampler takes it (next
// holds the step after the window), normalised with the channel's constants.
func (o *ocfNWP) diff(out, next []float32, T, C, plane int) {
	for q, j := range o.accum {
		nc := o.norm[q]
		for k := range T {
			cur := out[(k*C+j)*plane:][:plane]
			after := next[q*plane:][:plane]
			if k+1 < T {
				after = out[((k+1)*C+j)*plane:][:plane] // not yet differenced
			}
			for i := range cur {
				cur[i] = normaliseValue(after[i]-cur[i], nc.mean, nc.std, nc.lo, nc.hi)
			}
		}
	}
}

// addKeysOCF adds the keys of the chunks example ex's window touches (prefetch).
func (n *nwpSource) addKeysOCF(rs *readerState, ex *example, keys []uint64) []uint64 {
	o := n.ocf
	run, step := rs.nwpPicks(o.n)
	if !n.pick(ex, run, step) {
		return keys // the gather reports it
	}
	y0, x0 := n.cropStart(ex)
	_ = runs(run, step, func(k, m, stride int) error {
		bx := n.stepsBox(y0, x0, run[k], step[k], stride, m, n.chans)
		keys = addBoxKeys(n.c, &bx, keys)
		return nil
	})
	return keys
}

// ocfNWPTensors lists the time tensors of every ocf NWP source, the first at index at of the
// batch's tensors; a source name too long for them is refused.
func (j *Job) ocfNWPTensors(at int) ([]config.Tensor, error) {
	var out []config.Tensor
	for _, s := range j.srcs {
		n, ok := s.(*nwpSource)
		if !ok || n.ocf == nil {
			continue
		}
		sp, T := n.s, n.rule.window.n
		if len(sp.Name)+len(nwpTargetSuffix) > ring.MaxTensorName {
			return nil, j.cfg.Errorf(sp.Field, "the NWP name %q is too long for its time tensors (%s%s has more than %d characters); expected a name of at most %d characters",
				sp.Name, sp.Name, nwpTargetSuffix, ring.MaxTensorName, ring.MaxTensorName-len(nwpTargetSuffix))
		}
		n.ocf.timesAt = at + len(out)
		out = append(out,
			config.Tensor{Name: sp.Name + nwpInitSuffix, DType: ring.Float64, Shape: []int{j.size, T}},
			config.Tensor{Name: sp.Name + nwpStepSuffix, DType: ring.Int64, Shape: []int{j.size, T}},
			config.Tensor{Name: sp.Name + nwpTargetSuffix, DType: ring.Float64, Shape: []int{j.size, T}})
	}
	return out, nil
}

// writeTimes writes example e's init time, step and target time of every step of the window
// (as ocf-data-sampler gives them: nanoseconds as float64, the step in whole hours).
func (n *nwpSource) writeTimes(rs *readerState, ex *example, tensors [][]byte, e int) error {
	o := n.ocf
	T := n.rule.window.n
	run, step := rs.nwpPicks(o.n)
	if !n.pick(ex, run, step) {
		return fmt.Errorf("%s: no run for the window at t0 %d", n.c.what, ex.t0)
	}
	inits := bytesAsFloat64(tensors[o.timesAt])[e*T : (e+1)*T]
	steps := bytesAsInt64(tensors[o.timesAt+1])[e*T : (e+1)*T]
	targets := bytesAsFloat64(tensors[o.timesAt+2])[e*T : (e+1)*T]
	for k := range T {
		init, lead := n.inits.value(run[k]), n.steps.value(step[k])
		inits[k] = float64(init) * 1e9
		steps[k] = lead / 3600 // Go's division truncates toward zero, as numpy's astype(int)
		targets[k] = float64(init+lead) * 1e9
	}
	return nil
}

// checkRules refuses the keys that only ocf's rules give a meaning (NWP dropout, accumulated
// channels) in a job under gobatch's rules, and tells every source which rules apply.
func checkRules(cfg *config.Config, specs []*Spec, ocf bool) error {
	for _, sp := range specs {
		sp.ocf = ocf
		if ocf || sp.Role != RoleNWP {
			continue
		}
		if sp.DropoutFraction > 0 {
			return cfg.Errorf(sp.Field+".dropout_fraction", "dropout of NWP runs needs rules = %q on the anchor; expected it on a grid or points source", RulesOCF)
		}
		if sp.AccumChannels != nil {
			return cfg.Errorf(sp.Field+".accum_channels", "accumulated channels need rules = %q on the anchor", RulesOCF)
		}
	}
	return nil
}
