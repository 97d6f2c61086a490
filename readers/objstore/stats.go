package objstore

import (
	"sync/atomic"

	"github.com/gobatch/gobatch/readers/zarr"
)

// Stats are a remote store's counters since it was opened.
type Stats struct {
	Requests uint64 // requests sent, retries included
	Retries  uint64 // requests that were retries of a transient failure
	Bytes    uint64 // body bytes received
}

type counters struct{ requests, retries, bytes atomic.Uint64 }

func (c *counters) snapshot() Stats {
	return Stats{Requests: c.requests.Load(), Retries: c.retries.Load(), Bytes: c.bytes.Load()}
}

// StatsOf returns the counters of s when it is a remote store of this package.
func StatsOf(s zarr.Store) (Stats, bool) {
	if r, ok := s.(interface{ Stats() Stats }); ok {
		return r.Stats(), true
	}
	return Stats{}, false
}

// DefaultInFlight is how many requests a reader keeps in flight against a remote store
// unless configured otherwise: with the sampler's prefetch ahead, 8 per source hid 30 ms per
// request on the reference workload (benchmarks/README.md), and more only cost CPU.
const DefaultInFlight = 8

// IsRemote reports whether s is a remote store of this package (its reads are I/O-bound:
// callers fetch with more requests in flight than they have cores).
func IsRemote(s zarr.Store) bool {
	_, ok := s.(interface{ Stats() Stats })
	return ok
}
