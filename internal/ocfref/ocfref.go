// Package ocfref holds references the tests of ocf's rules compare with: ocf-data-sampler
// 1.0.24's selections written out literally, with none of the shortcuts of the code under test
// (package ocf's rules, and the job that runs them in package sampler). Tests only.
package ocfref

// BrutePick is ocf-data-sampler's select_time_slice_nwp written out literally: the
// candidates are the init times in [first target - last step, avail]; each target takes the
// last candidate at or before it, and the step target - init must be on the step axis.
func BrutePick(inits, steps []int64, start, res int64, n int, avail int64) (runs, leads []int64, ok bool) {
	tmin := start - steps[len(steps)-1]
	var cands []int64
	for _, i := range inits {
		if tmin <= i && i <= avail {
			cands = append(cands, i)
		}
	}
	for k := range n {
		target := start + int64(k)*res
		best, found := int64(0), false
		for _, c := range cands {
			if c <= target {
				best, found = c, true
			}
		}
		if !found {
			return nil, nil, false
		}
		lead := target - best
		onAxis := false
		for _, s := range steps {
			onAxis = onAxis || s == lead
		}
		if !onAxis {
			return nil, nil, false
		}
		runs, leads = append(runs, best), append(leads, lead)
	}
	return runs, leads, true
}

// Ceil rounds t up to a multiple of res, as pandas' Timestamp.ceil does (aligned to the epoch),
// by search rather than arithmetic.
func Ceil(t, res int64) int64 {
	c := t / res * res
	for c < t {
		c += res
	}
	for c-res >= t {
		c -= res
	}
	return c
}
