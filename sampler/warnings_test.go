package sampler

import (
	"fmt"
	"strings"
	"testing"
)

// A site-anchored job warns of the systems it leaves out, naming each (here under ocf's rule
// set, whose crops some sites' positions leave); a site-anchored stream whose batch is larger
// than its (t0, location) samples warns that batches repeat examples; a job with neither
// warns of nothing.
func TestJobWarnings(t *testing.T) {
	j, _ := newMemJob(t, smallMem, "locations = \"pv\"\nrules = \"ocf\"", Options{})
	if j.LocationsDropped() == 0 {
		t.Fatal("fixture: no location left out")
	}
	w := strings.Join(j.Warnings(), "\n")
	if !strings.Contains(w, fmt.Sprintf("%d of the %d systems of pv are left out", j.LocationsDropped(), j.LocationsDropped()+j.Locations())) {
		t.Errorf("warnings %q: want the count of systems left out", w)
	}
	for _, e := range j.SiteExclusions() {
		for _, id := range e.IDs {
			if !strings.Contains(w, fmt.Sprint(id)) {
				t.Errorf("system %d left out but not named in %q", id, w)
			}
		}
	}

	if w := j.Warnings(); len(w) != 1 {
		t.Errorf("warnings %q: want only the locations'", w)
	}
	plain, _ := newMemJob(t, smallMem, "", Options{})
	if w := plain.Warnings(); len(w) != 0 {
		t.Errorf("a plain job warns %q", w)
	}
	n := j.sampleCount()
	cfg, err := parseCfg(t, strings.Replace(memConfigFmt("locations = \"pv\"\nrules = \"ocf\""), "size = 4", fmt.Sprintf("size = %d", n+1), 1))
	if err != nil {
		t.Fatal(err)
	}
	big, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem))})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if w := strings.Join(big.Warnings(), "\n"); !strings.Contains(w, fmt.Sprintf("batch_size %d is more than the %d samples", n+1, n)) {
		t.Errorf("a batch of %d over %d samples warns %q", n+1, n, w)
	}
}
