package sampler

import (
	"runtime"
	"slices"
	"sync"
)

// Prefetch: before a Fill gathers, it lists the chunks its examples need and, when several are
// missing from the cache, decodes them on all cores at once. With a warm cache this costs a few
// hundred lookups per batch; with a cold one (the first batches, a locality rotation) it turns
// one reader's sequential decoding into parallel decoding, which is what bounds the time to
// the first batch.

// has reports whether key is cached (or being loaded).
func (c *Cache) has(key uint64) bool {
	c.mu.Lock()
	_, ok := c.entries[key]
	c.mu.Unlock()
	return ok
}

// addBoxKeys adds the keys of the chunks a box4 touches (a indices in [aLo, aHi]).
func addBoxKeys(c *chunked, bx *box4, keys []uint64) []uint64 {
	d := 0
	leadKey := 0
	if bx.lead >= 0 {
		d = 1
		leadKey = bx.lead / c.chunks[0] * c.gstride[0]
	}
	ca, cb, cy, cx := c.chunks[d], c.chunks[d+1], c.chunks[d+2], c.chunks[d+3]
	aLo, aHi := bx.a0, bx.a0+(min(bx.na, bx.nanFrom)-1)*bx.aStride
	if aHi < aLo {
		return keys
	}
	for ka := aLo / ca; ka <= aHi/ca; ka++ {
		lastKb := -1
		for _, b := range bx.b {
			kb := b / cb
			if kb == lastKb {
				continue
			}
			lastKb = kb
			for ky := bx.y0 / cy; ky <= (bx.y0+bx.h-1)/cy; ky++ {
				for kx := bx.x0 / cx; kx <= (bx.x0+bx.w-1)/cx; kx++ {
					keys = append(keys, c.key(leadKey+ka*c.gstride[d]+kb*c.gstride[d+1]+ky*c.gstride[d+2]+kx*c.gstride[d+3]))
				}
			}
		}
	}
	return keys
}

// prefetch decodes, in parallel, the missing chunks of the grid and NWP windows of global
// batch g (point data is small and left to the gather).
func (j *Job) prefetch(g uint64, rs *readerState) {
	keys := rs.keys[:0]
	ex := &rs.ex
	for e := 0; e < j.size; e++ {
		j.draw(g, e, ex, nil)
		for _, s := range j.srcs {
			var bx box4
			switch v := s.(type) {
			case *gridSource:
				if !v.box(ex, &bx) {
					continue
				}
			case *nwpSource:
				if !v.box(ex, &bx) {
					continue
				}
			default:
				continue
			}
			keys = addBoxKeys(s.data(), &bx, keys)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	missing := keys[:0]
	var bytes int64
	for _, k := range keys {
		if !j.cache.has(k) {
			missing = append(missing, k)
			bytes += j.srcs[k>>keyShift].data().chunkBytes()
		}
	}
	rs.keys = keys
	workers := min(runtime.GOMAXPROCS(0), len(missing))
	// Only when it helps (several chunks) and fits (loading more than the cache holds would
	// evict what this very batch needs).
	if workers < 2 || bytes > j.cache.Budget()/2 {
		return
	}
	j.loadParallel(missing, workers)
}

// loadParallel decodes the chunks of keys into the cache with workers goroutines.
func (j *Job) loadParallel(keys []uint64, workers int) {
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				if i == len(keys) {
					next.Unlock()
					return
				}
				k := keys[i]
				i++
				next.Unlock()
				c := j.srcs[k>>keyShift].data()
				if e, err := j.cache.acquire(k, c.elems, c.load); err == nil {
					j.cache.release(e)
				} // an error is reported by the gather, which retries the load
			}
		}()
	}
	wg.Wait()
}
