package sampler

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler/rules"
)

// An NWP source whose rule set takes each target time from a run of its own choosing
// (rules.Rules.NWPTargets): the rule gives the
// first target time at t0 and picks each target's run and step among the runs available to the
// example (t0_available: t0, or t0 moved by the example's NWP dropout timedelta, fill.go), so
// that one window may mix runs. Here is the job's side of it, the same for every such rule:
//
//   - the window's steps are gathered run by run (one box per stretch of steps from one run);
//   - accumulated channels (accum_channels) are gathered one step further and differenced along
//     the steps (v[k+1] - v[k]), the extra step dropped, before their (diff_c) normalisation;
//     NaN becomes the fill value after that;
//   - each example also gets the init time, step and target time of every step of its window,
//     in the tensors <name>_init_time_utc, <name>_step and <name>_target_time_utc;
//   - where the store's steps are finer than the resolution and the rule's reference lays a
//     window one run covers on them (rules.Targets.Finer), every window is laid so when one run
//     covers each window of every valid t0 (checkRuns, layFine): batches have one shape.

// targetWindow is what an NWP source with a per-target rule needs.
type targetWindow struct {
	rule   rules.Targets
	n      int   // target times: the window's steps, + 1 with accumulated channels
	res    int64 // seconds
	accum  []int // output channel of each accumulated channel
	accSrc []int // its store channel
	norm   []normConsts
	// fill: NaN becomes fillV after the difference (the chunks keep their NaNs then)
	fill    bool
	fillV   float32
	timesAt int    // index of the <name>_init_time_utc tensor in the batch (then step, target)
	note    string // the rule's note for the user (rules.Targets.Note), a warning
	// The window on the store's finer steps (rules.Targets.Finer; fine nil: none): laid so
	// when every t0 the sample space may hold is covered by one run (manyRuns false, seen true:
	// checkRuns, layFine).
	fine          rules.Targets
	spacing       int64
	manyRuns      bool
	seen          bool
	runs0, steps0 []int // checkRuns' scratch
}

// normConsts are one channel's normalisation: clip to [lo, hi], then (v - mean) / std.
type normConsts struct{ mean, std, lo, hi float64 }

// setupTargets asks the job's rule set for source n's window rule; with one, it prepares the
// accumulated channels (whose chunks are then left unnormalised: the difference comes first)
// and the fill after the difference.
func (n *nwpSource) setupTargets(cfg *config.Config, sp *Spec) error {
	w := sp.window()
	targets := w.n
	if len(sp.AccumChannels) > 0 {
		targets++
	}
	rule, err := sp.rules.NWPTargets(rules.NWP{Field: sp.Field, Window: w.public(), Targets: targets, Steps: n.steps.vals,
		IntervalEnd: sp.IntervalEndMinutes * 60, MaxStaleness: sp.MaxStalenessMinutes * 60, MaxStalenessSet: sp.MaxStalenessSet})
	var ke *rules.KeyError
	switch {
	case errors.As(err, &ke):
		return cfg.Errorf(ke.Field, "%s", ke.Msg)
	case err != nil:
		return cfg.Errorf(sp.Field, "%v", err)
	case rule == nil:
		return nil
	}
	o := &targetWindow{rule: rule, n: targets, res: w.res, note: rule.Note()}
	o.fine, o.spacing = rule.Finer()
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
		o.fill, o.fillV = sp.nanFill()
	}
	n.targets = o
	if sp.NormaliseMean != nil {
		n.c.setNormalisation(2, n.chans, mean, std, lo, hi)
	}
	return nil
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

// maxStaleness is how much older than t0 a run may be under the window rule, seconds (the
// valid t0 periods use it).
func (n *nwpSource) maxStaleness() int64 { return n.targets.rule.MaxStaleness() }

// start is the first target time at t0.
func (o *targetWindow) start(t0 int64) int64 { return o.rule.Start(t0) }

// pickAt picks the run and step of each target time of the window starting at start for
// t0_available avail (rules.Targets.Pick).
func (n *nwpSource) pickAt(start, avail int64, run, step []int) (missing int) {
	return n.targets.rule.Pick(n.inits.vals, n.steps.vals, start, avail, n.targets.n, run, step)
}

// available is t0_available of an example: t0, or t0 + its NWP dropout timedelta.
func available(ex *example, i int) int64 {
	if c := ex.cut[i]; c != math.MaxInt64 {
		return ex.t0 + c
	}
	return ex.t0
}

func (n *nwpSource) pick(ex *example, run, step []int) bool {
	return n.pickAt(n.targets.start(ex.t0), available(ex, n.s.Index), run, step) < 0
}

// fitsTargets: the window can be selected at t0 for t0_available = t0 and for every dropout
// timedelta.
func (n *nwpSource) fitsTargets(t0 int64) bool {
	for _, avail := range n.availables(t0) {
		if n.pickAt(n.targets.start(t0), avail, nil, nil) >= 0 {
			return false
		}
	}
	return true
}

// availables are the t0_available an example at t0 may have: t0 unless a dropout is certain,
// and t0 moved by each timedelta a dropout may choose.
func (n *nwpSource) availables(t0 int64) []int64 {
	var out []int64
	if n.s.DropoutFraction < 1 {
		out = append(out, t0)
	}
	if n.s.DropoutFraction > 0 {
		for k, d := range n.s.DropoutTimedeltasMinutes {
			if n.s.DropoutFractions == nil || n.s.DropoutFractions[k] > 0 {
				out = append(out, t0+d*60)
			}
		}
	}
	return out
}

func (n *nwpSource) whyNotTargets(t0 int64, detail bool) reject {
	o := n.targets
	start := o.start(t0)
	oldest := o.rule.OldestRun(n.steps.vals, start)
	for _, avail := range n.availables(t0) {
		k := n.pickAt(start, avail, nil, nil)
		if k < 0 {
			continue
		}
		target := start + int64(k)*o.res
		i := latestAtOrBefore(n.inits.vals, min(target, avail))
		if i < 0 || n.inits.value(i) < oldest {
			if !detail {
				return reject{cause: causeNoRun}
			}
			return reject{causeNoRun, fmt.Sprintf("no run for target time %s: none with init_time in %s .. %s (t0_available)",
				fmtTime(target), fmtTime(oldest), fmtTime(avail))}
		}
		if !detail {
			return reject{cause: causeNoStep}
		}
		return reject{causeNoStep, fmt.Sprintf("the run %s has no step %s for target time %s",
			fmtTime(n.inits.value(i)), fmtOffset(target-n.inits.value(i)), fmtTime(target))}
	}
	return reject{}
}

// checkRuns notes whether the window at t0 is covered by one run for every t0_available, and
// can then be laid on the finer steps (every one of them stored): a t0 the sample space may
// hold (the job calls it for each valid t0 while the rule set finds its pairs).
func (n *nwpSource) checkRuns(t0 int64) {
	o := n.targets
	if o == nil || o.fine == nil || o.manyRuns {
		return
	}
	if o.runs0 == nil {
		o.runs0, o.steps0 = make([]int, o.n), make([]int, o.n)
	}
	start := o.start(t0)
	for _, avail := range n.availables(t0) {
		if n.pickAt(start, avail, o.runs0, o.steps0) >= 0 {
			continue // not a valid t0: no example there
		}
		for _, r := range o.runs0 {
			if r != o.runs0[0] {
				o.manyRuns = true
				return
			}
		}
		if o.fine.Pick(n.inits.vals, n.steps.vals, start, avail, o.fineTargets(), nil, nil) >= 0 {
			o.manyRuns = true // a fine step the run lacks
			return
		}
		o.seen = true
	}
}

// fineTargets is the number of target times of the window on the finer steps: the same first
// and last target, spacing apart.
func (o *targetWindow) fineTargets() int { return int(int64(o.n-1)*o.res/o.spacing) + 1 }

// layFine lays the window on the store's finer steps when every t0 checkRuns saw is covered by
// one run (the rule set's reference takes every stored step then): more steps, spacing apart,
// the same first and last target; the rule's note (which says it would differ) goes.
func (n *nwpSource) layFine() {
	o := n.targets
	if o == nil || o.fine == nil || o.manyRuns || !o.seen {
		return
	}
	targets := o.fineTargets()
	n.rule.window.n = targets - (o.n - n.rule.window.n) // the extra target of accumulated channels stays one
	o.rule, o.n, o.res, o.note = o.fine, targets, o.spacing, ""
	o.runs0, o.steps0 = nil, nil
}

// windowSteps is the steps of source s's window: its configuration's, or an NWP's on the
// store's finer steps (layFine).
func windowSteps(s dataSource) int {
	if n, ok := s.(*nwpSource); ok {
		return n.rule.window.n
	}
	return s.spec().Steps()
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
// chans (store indices), the crop starting at (y0, x0). Every box of a per-target window is
// made here.
func (n *nwpSource) stepsBox(y0, x0, run, a0, stride, na int, chans []int) box4 {
	return box4{lead: run, a0: a0, aStride: stride, na: na, b: chans,
		y0: y0, h: n.s.Height, x0: x0, w: n.s.Width, nanFrom: na, nanTo: na}
}

// fillTargets writes example ex's window: each target time from its run, then the difference
// of the accumulated channels, their normalisation and the NaN fill.
func (n *nwpSource) fillTargets(rs *readerState, ex *example, out []float32) error {
	o := n.targets
	run, step := rs.nwpPicks(o.n)
	if !n.pick(ex, run, step) {
		return fmt.Errorf("%s: no run for the window at t0 %d", n.c.what, ex.t0)
	}
	T := n.rule.window.n
	y0, x0 := n.cropStart(ex)
	plane := n.s.Height * n.s.Width
	per := len(n.chans) * plane
	defer rs.pins.ReleaseAll()
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
// difference along the steps, v[k+1] - v[k] in float32 (next
// holds the step after the window), normalised with the channel's constants.
func (o *targetWindow) diff(out, next []float32, T, C, plane int) {
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

// addKeysTargets adds the keys of the chunks example ex's window touches (prefetch).
func (n *nwpSource) addKeysTargets(rs *readerState, ex *example, keys []uint64) []uint64 {
	o := n.targets
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

// nwpTimeTensors lists the time tensors of every NWP source with a per-target window, the
// first at index at of the batch's tensors; a source name too long for them is refused.
func (j *Job) nwpTimeTensors(at int) ([]config.Tensor, error) {
	var out []config.Tensor
	for _, s := range j.srcs {
		n, ok := s.(*nwpSource)
		if !ok || n.targets == nil {
			continue
		}
		sp, T := n.s, n.rule.window.n
		if len(sp.Name)+len(rules.TargetSuffix) > ring.MaxTensorName {
			return nil, j.cfg.Errorf(sp.Field, "the NWP name %q is too long for its time tensors (%s%s has more than %d characters); expected a name of at most %d characters",
				sp.Name, sp.Name, rules.TargetSuffix, ring.MaxTensorName, ring.MaxTensorName-len(rules.TargetSuffix))
		}
		n.targets.timesAt = at + len(out)
		out = append(out,
			config.Tensor{Name: sp.Name + rules.InitSuffix, DType: ring.Float64, Shape: []int{j.size, T}},
			config.Tensor{Name: sp.Name + rules.StepSuffix, DType: ring.Int64, Shape: []int{j.size, T}},
			config.Tensor{Name: sp.Name + rules.TargetSuffix, DType: ring.Float64, Shape: []int{j.size, T}})
	}
	return out, nil
}

// writeTimes writes example e's init time, step and target time of every step of the window
// (nanoseconds as float64, the step in whole hours truncated toward zero).
func (n *nwpSource) writeTimes(rs *readerState, ex *example, tensors [][]byte, e int) error {
	o := n.targets
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
