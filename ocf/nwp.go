package ocf

import (
	"fmt"
	"sort"

	"github.com/gobatch/gobatch/sampler/rules"
)

// An NWP window under ocf's rules is ocf-data-sampler 1.0.24's select_time_slice_nwp:
//
//   - the target times run from ceil(t0 + interval_start) to ceil(t0 + interval_end) on the
//     resolution's grid (aligned to the Unix epoch), one step further when the source has
//     accumulated channels (the job differences them along the steps);
//   - each target time takes the latest init time in [first target - last step, t0_available]
//     that is at or before it, with step target - init: the window may mix runs;
//   - t0_available is t0, or with NWP dropout t0 + a timedelta drawn for the example.
//
// The staleness limit of the valid t0 periods is max_staleness_minutes, else the largest the
// steps allow (the last step - interval_end, - the resolution with accumulated channels).

// nwpTargets is the rule for one source.
type nwpTargets struct {
	first, res int64 // Window.First, Window.Res
	step       int64 // the targets' spacing when finer than res (Finer); 0: res
	maxStale   int64
	note       string
	fine       int64 // the store's finest step when finer than res; 0 otherwise
}

func (ocfRules) NWPTargets(n rules.NWP) (rules.Targets, error) {
	w := n.Window
	limit := n.Steps[len(n.Steps)-1] - n.IntervalEnd - int64(n.Targets-w.N)*w.Res
	t := &nwpTargets{first: w.First, res: w.Res, maxStale: limit}
	if n.MaxStalenessSet {
		if n.MaxStaleness > limit {
			accum := ""
			if n.Targets > w.N {
				accum = fmt.Sprintf(" - time_resolution_minutes %d for the accumulated channels", w.Res/60)
			}
			return nil, &rules.KeyError{Field: n.Field + ".max_staleness_minutes", Msg: fmt.Sprintf(
				"%d is more than the steps allow: at most %d (the last step + %d min - interval_end_minutes %d%s)",
				n.MaxStaleness/60, rules.FloorDiv(limit, 60), n.Steps[len(n.Steps)-1]/60, n.IntervalEnd/60, accum)}
		}
		t.maxStale = n.MaxStaleness
	}
	t.note, t.fine = finerSteps(n)
	return t, nil
}

// Finer: ocf-data-sampler's select_time_slice_nwp takes, when one run covers the window, every
// stored step between the first target's and the last's (its label slice over steps).
func (t *nwpTargets) Finer() (rules.Targets, int64) {
	if t.fine == 0 {
		return nil, 0
	}
	f := *t
	f.step, f.note = t.fine, ""
	return &f, t.fine
}

// finerSteps gives, when the store's lead times are finer than the window's resolution, the
// finest step and the note the job shows when it cannot follow ocf-data-sampler there: with
// one run covering a window ocf takes every stored step from the first target to the last (its
// label slice over steps); with several runs, one step per target. The job lays its windows on
// the finer steps when one run covers every window (Finer), else keeps the resolution's.
func finerSteps(n rules.NWP) (note string, finest int64) {
	w := n.Window
	finest = w.Res
	for i := 1; i < len(n.Steps); i++ {
		finest = min(finest, n.Steps[i]-n.Steps[i-1])
	}
	if finest >= w.Res || w.Res%finest != 0 {
		return "", 0
	}
	return fmt.Sprintf("%s: the store's steps are %d min apart, finer than time_resolution_minutes %d, and some windows take more than one run: ocf-data-sampler lays a window that one run covers on every stored step (up to %d steps) and one that several runs cover on the resolution's %d, and fails to batch the two; gobatch gives every window the resolution's %d steps (docs/OCF.md)",
		n.Field, finest/60, w.Res/60, int64(w.N-1)*w.Res/finest+1, w.N, w.N), finest
}

func (t *nwpTargets) Note() string { return t.note }

func (t *nwpTargets) Start(t0 int64) int64 { return CeilTo(t0+t.first*t.res, t.res) }

func (t *nwpTargets) MaxStaleness() int64 { return t.maxStale }

func (t *nwpTargets) OldestRun(steps []int64, start int64) int64 { return start - steps[len(steps)-1] }

func (t *nwpTargets) Pick(inits, steps []int64, start, avail int64, n int, run, step []int) int {
	spacing := t.res
	if t.step > 0 {
		spacing = t.step
	}
	return PickRuns(inits, steps, start, spacing, n, avail, run, step)
}

// CeilTo rounds t up to a multiple of res (pandas' Timestamp.ceil, aligned to the epoch).
func CeilTo(t, res int64) int64 { return -rules.FloorDiv(-t, res) * res }

// PickRuns chooses, for each of the n target times start + k*res, the latest init time in
// [start - the last step, avail] at or before it, and the step target - init: run[k] and
// step[k] are their indices in inits and steps (both ascending; nil slices: only checked).
// missing is -1 when every target has both, else the first k that lacks one.
func PickRuns(inits, steps []int64, start, res int64, n int, avail int64, run, step []int) (missing int) {
	tmin := start - steps[len(steps)-1]
	for k := range n {
		target := start + int64(k)*res
		i := rules.LatestAtOrBefore(inits, min(target, avail))
		if i < 0 || inits[i] < tmin {
			return k
		}
		s, ok := indexOf(steps, target-inits[i])
		if !ok {
			return k
		}
		if run != nil {
			run[k], step[k] = i, s
		}
	}
	return -1
}

// indexOf is the index of v in vals (ascending).
func indexOf(vals []int64, v int64) (int, bool) {
	i := sort.Search(len(vals), func(i int) bool { return vals[i] >= v })
	return i, i < len(vals) && vals[i] == v
}
