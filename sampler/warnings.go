package sampler

import (
	"fmt"
	"strings"

	"github.com/gobatch/gobatch/config"
)

// Warnings implements Source: what a user would want to know before the first batch, each a
// sentence the trainer's side shows once (PROTOCOL.md 2.9, "warnings"): the locations the job
// leaves out (how many, which, and why), coordinates that differ between the stores of a
// source read as one (the first store's are used), the notes of the rule set's NWP windows
// (rules.Targets.Note), and a site-anchored batch larger than the sample space in stream order
// (every batch then repeats examples).
func (j *Job) Warnings() []string {
	var out []string
	if s := j.sites; s != nil && len(s.left) > 0 {
		why := s.why
		for _, e := range j.siteExclusions {
			why += "; " + e.String()
		}
		out = append(out, fmt.Sprintf("%d of the %d systems of %s are left out as locations (%s): %s",
			len(s.left), len(s.left)+s.n(), s.src.s.Name, idList(s.left, 20), why))
	}
	for _, d := range j.joined {
		out = append(out, d.Warnings()...)
	}
	for _, s := range j.srcs {
		if n, ok := s.(*nwpSource); ok && n.targets != nil && n.targets.note != "" {
			out = append(out, n.targets.note)
		}
	}
	if j.cfg.Batch.Order != config.OrderEpochs && j.sites != nil { // drawn centres make new samples
		if n := j.sampleCount(); n > 0 && uint64(j.size) > n {
			out = append(out, fmt.Sprintf("batch_size %d is more than the %d samples of the sample space: the stream draws them "+
				"with replacement, so every batch repeats examples; a %s of at most %d draws each at most once a batch, "+
				"and %s \"epochs\" visits each once an epoch", j.size, n, config.Spell("batch_size"), n, config.Spell("order")))
		}
	}
	return out
}

// sampleCount is the number of (t0, location) samples a site-anchored stream draws from: the
// rule set's pairs, else the t0 candidates times the locations.
func (j *Job) sampleCount() uint64 {
	if j.drawsPairs() {
		return j.space.N()
	}
	return uint64(len(j.cands)) * uint64(j.sampledSites())
}

// idList writes at most max ids, then how many more.
func idList(ids []int64, max int) string {
	parts := make([]string, 0, min(len(ids), max))
	for _, id := range ids[:min(len(ids), max)] {
		parts = append(parts, fmt.Sprint(id))
	}
	s := "ids " + strings.Join(parts, ", ")
	if len(ids) > max {
		s += fmt.Sprintf(" and %d more", len(ids)-max)
	}
	return s
}
