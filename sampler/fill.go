package sampler

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gobatch/gobatch/sampler/chunks"
	"github.com/gobatch/gobatch/sampler/internal/rowconv"
)

// Draw returns where example e of global batch g comes from: t0 (unix seconds), the anchor
// time index (-1 when a rule set's pair has a t0 that is not an anchor time) and the centre pixel
// (cy, cx). Fill uses exactly these.
func (j *Job) Draw(g uint64, e int) (t0 int64, ti, cy, cx int) {
	ex := example{cut: make([]int64, len(j.srcs))}
	j.draw(g, e, &ex, nil)
	return ex.t0, ex.ti, ex.cy, ex.cx
}

func (j *Job) draw(g uint64, e int, ex *example, rs *readerState) {
	ue := uint64(e)
	switch {
	case j.conc != nil:
		j.drawConcurrent(g, e, ex)
	case j.epochs != nil:
		j.drawEpochs(g, ue, ex, rs)
	case j.drawsPairs() && j.loc != nil: // the rule set's pairs in the resident segments
		j.placePair(ex, j.loc.drawPair(g, ue, rs))
	case j.drawsPairs(): // the rule set's pairs (pairs.go), drawn uniformly
		j.placePair(ex, uniform64(hashKey(j.seed, drawT0, g, ue), j.space.N()))
	case j.loc != nil:
		ex.ti = j.loc.draw(g, ue, rs)
		j.drawCentre(g, ue, ex)
	default:
		ex.ti = int(j.cands[uniform(hashKey(j.seed, drawT0, g, ue), len(j.cands))])
		j.drawCentre(g, ue, ex)
	}
	if j.conc == nil && !j.drawsPairs() {
		ex.t0 = j.times.value(ex.ti)
	}
	de := ue
	if j.conc != nil {
		de = 0 // one dropout per concurrent batch and source, as its time is sliced once
	}
	for i, s := range j.srcs {
		ex.cut[i] = j.drawDropout(s.spec(), uint64(i), g, de)
	}
}

// drawDropout draws the dropout timedelta (seconds) of source si for example e of global
// batch g; math.MaxInt64 for none. With a single dropout_fraction f, a dropout happens with
// probability f, its timedelta drawn uniformly (each f/n); with a
// list, timedelta k has probability fractions[k]. (The rule set says which steps the timedelta
// fills, dropoutFills; on a per-target NWP window it moves the latest run, nwptargets.go.)
func (j *Job) drawDropout(sp *Spec, si, g, e uint64) int64 {
	if sp.DropoutFraction <= 0 {
		return math.MaxInt64
	}
	u := unitFloat(hashKey(j.seed, drawDropout+2*si, g, e))
	if sp.DropoutFractions != nil {
		cum := 0.0
		for k, f := range sp.DropoutFractions {
			if cum += f; u < cum {
				return sp.DropoutTimedeltasMinutes[k] * 60
			}
		}
		return math.MaxInt64
	}
	if u >= sp.DropoutFraction {
		return math.MaxInt64
	}
	d := sp.DropoutTimedeltasMinutes[uniform(hashKey(j.seed, drawDropout+2*si+1, g, e), len(sp.DropoutTimedeltasMinutes))]
	return d * 60
}

// drawEpochs places example e of global batch g in epochs order (epochs.go): its sample's t0
// candidate, and a centre drawn from (epoch, sample), so that the same sample has a new
// centre in every epoch whatever batch it falls in. (With site-anchored examples the sample's
// location, s mod locations, will name the site and replace the drawn centre.)
func (j *Job) drawEpochs(g, e uint64, ex *example, rs *readerState) {
	epoch, s, seg := j.epochs.sampleSeg(j.seed, g, e)
	if rs != nil && seg >= 0 && !slices.Contains(rs.segs, seg) {
		rs.segs = append(rs.segs, seg) // the batch's segments (Stats.SegmentsPerBatch)
	}
	if j.drawsPairs() { // the sample is one of the rule set's pairs
		j.placePair(ex, s)
		return
	}
	ex.ti = int(j.cands[s/j.epochs.locations])
	if j.sites != nil { // the sample is a (t0, site) pair
		ex.site = j.sampledSite(int(s % j.epochs.locations))
		ex.cy, ex.cx = j.sites.centre(ex.site)
		return
	}
	ex.cy = j.cy0 + uniform(hashKey(j.seed, drawEpochY, epoch, s), j.ny)
	ex.cx = j.cx0 + uniform(hashKey(j.seed, drawEpochX, epoch, s), j.nx)
}

// drawCentre draws example e of global batch g's centre in stream order: a site when
// site-anchored (the example is a (t0, site) pair), else a pixel whose crop fits.
func (j *Job) drawCentre(g, e uint64, ex *example) {
	if j.sites != nil {
		ex.site = j.sampledSite(uniform(hashKey(j.seed, drawSite, g, e), j.sampledSites()))
		ex.cy, ex.cx = j.sites.centre(ex.site)
		return
	}
	ex.cy = j.cy0 + uniform(hashKey(j.seed, drawY, g, e), j.ny)
	ex.cx = j.cx0 + uniform(hashKey(j.seed, drawX, g, e), j.nx)
}

// centreXY is the position of example ex's centre, for the x and y tensors: its anchor pixel's
// coordinates, or with a points anchor its system's position.
func (j *Job) centreXY(ex *example) (x, y float64) {
	if j.anchor == nil {
		return j.anchorPts.xs[ex.cx], j.anchorPts.ys[ex.cx]
	}
	return j.anchor.xs[ex.cx], j.anchor.ys[ex.cy]
}

func (j *Job) state() *readerState {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.free); n > 0 {
		rs := j.free[n-1]
		j.free = j.free[:n-1]
		return rs
	}
	j.readers++ // a fill that found every state in use: one more ran at once
	return &readerState{
		pins: chunks.NewPins(j.cache, 64),
		sel:  make([]int32, j.maxK), dist: make([]float64, j.maxK),
		ex: example{cut: make([]int64, len(j.srcs))},
	}
}

func (j *Job) putState(rs *readerState) {
	j.mu.Lock()
	j.free = append(j.free, rs)
	j.mu.Unlock()
}

// Fill implements Source: it writes global batch g into tensors, one byte slice per tensor of
// Tensors(), each exactly the tensor's size. Several goroutines may fill different batches at
// once. It stops between examples when ctx ends.
func (j *Job) Fill(ctx context.Context, g uint64, tensors [][]byte) error {
	if err := checkTensors(j.tensors, g, tensors); err != nil {
		return err
	}
	if err := j.pace(ctx, g); err != nil {
		return err
	}
	rs := j.state()
	defer j.putState(rs)
	rs.nt = j.nt && !j.layout.XYIncreasing // XY: the gather writes a scratch buffer read back at once
	j.prefetch(ctx, g, rs)
	defer j.decodes.gathered(g)
	j.fetchAhead(g)
	rs.segs = rs.segs[:0]
	ns := len(j.srcs)
	var t0s []int64
	var t0f []float64
	if j.layout.T0Float {
		t0f = bytesAsFloat64(tensors[ns])
	} else {
		t0s = bytesAsInt64(tensors[ns])
	}
	xs := bytesAsFloat64(tensors[ns+1])
	ys := bytesAsFloat64(tensors[ns+2])
	var lids []int64
	if j.sites != nil {
		lids = bytesAsInt64(tensors[j.lidAt])
	}
	ex := &rs.ex
	start, waited := time.Now(), rs.pins.Waited() // the gather: the examples copied into the slot
	for e := 0; e < j.size; e++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		j.draw(g, e, ex, rs)
		if err := j.fillExample(rs, e, tensors); err != nil {
			return fmt.Errorf("batch %d example %d: %w", g, e, err)
		}
		if t0f != nil {
			t0f[e] = float64(ex.t0)
		} else {
			t0s[e] = ex.t0
		}
		if j.windowT != nil {
			j.fillWindowTensors(rs, e, tensors)
		}
		xs[e], ys[e] = j.centreXY(ex)
		if lids != nil {
			lids[e] = j.sites.id(ex.site)
		}
		if j.capDiv != nil {
			j.capDiv.apply(tensors, e)
		}
		if j.feat != nil {
			lon, lat := j.sites.position(ex.site)
			j.feat.fill(tensors, e, ex.t0, lon, lat, &rs.sun)
		}
		for _, s := range j.srcs {
			if n, ok := s.(*nwpSource); ok && n.targets != nil {
				if err := n.writeTimes(rs, ex, tensors, e); err != nil {
					return fmt.Errorf("batch %d example %d: %w", g, e, err)
				}
			}
		}
	}
	// The gather may write the slot with stores that bypass the caches: order them before the
	// caller publishes the batch (one goroutine filled it).
	rowconv.Fence()
	gathered := uint64(time.Since(start) - (rs.pins.Waited() - waited)) // less the chunks it waited for
	j.mu.Lock()
	j.gatherNS += gathered
	j.batches++
	j.exmpl += uint64(j.size)
	j.segSum += uint64(len(rs.segs))
	j.mu.Unlock()
	return nil
}

// fillExample gathers drawn example rs.ex into row e of every source's tensor, and writes the
// ids of the systems each points source chose.
func (j *Job) fillExample(rs *readerState, e int, tensors [][]byte) error {
	ex := &rs.ex
	for i, s := range j.srcs {
		per := int(j.tensors[i].NBytes()) / j.size
		out := bytesAsFloat32(tensors[i][e*per : (e+1)*per])
		p, isPoints := s.(*pointSource)
		if isPoints {
			if err := p.choose(rs, ex); err != nil {
				return err
			}
		}
		var err error
		switch {
		case isPoints && p.c.f64: // float64 values for a float64 quotient (capacity.go)
			err = p.fill64(rs, ex, bytesAsFloat64(tensors[i][e*per:(e+1)*per]))
		case j.layout.XYIncreasing && !isPoints:
			err = j.gatherXY(rs, s, ex, out) // (time, channel, x, y): xylayout.go
		default:
			err = s.fill(rs, ex, out)
		}
		if err != nil {
			return err
		}
		if isPoints {
			k := p.s.NearestK
			ids := bytesAsInt64(tensors[len(j.srcs)+3+j.pointIndex(p)])[e*k : (e+1)*k]
			for q, sys := range rs.sel[:k] {
				ids[q] = p.ids[sys]
			}
		}
	}
	return nil
}

func (j *Job) pointIndex(p *pointSource) int {
	for i, q := range j.points {
		if q == p {
			return i
		}
	}
	return -1
}
