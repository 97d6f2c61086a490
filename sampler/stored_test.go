package sampler

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gobatch/gobatch/readers/zarr"
)

// The cache in the stored width (chunked.go) and its block pool (cache.go).

// storedCase is one stored element type of the in-memory nowcast's arrays: the raw values'
// range, the fill value and the CF numbers.
type storedCase struct {
	kind          byte
	size          int
	lo, hi, fill  float64
	scale, offset float64
}

var storedCases = map[string]storedCase{
	"int8":    {'i', 1, -127, 127, -128, 0.5, 3},
	"uint8":   {'u', 1, 0, 254, 255, 0.25, -10},
	"int16":   {'i', 2, -3000, 3000, -32768, 0.001, 0},
	"uint16":  {'u', 2, 0, 60000, 65535, 0.01, -5},
	"float16": {'f', 2, -500, 500, -999, 0.5, 1},
}

// storeAs rewrites a's raw values in sc's type: values spread over its range, every 37th the
// fill value, and for float16 quarters (exact) and some NaN.
func storeAs(a *memArray, sc storedCase) {
	a.kind, a.size, a.fill, a.hasFill, a.scale, a.offset = sc.kind, sc.size, sc.fill, true, sc.scale, sc.offset
	span := sc.hi - sc.lo + 1
	for i := range a.raw {
		v := sc.lo + math.Mod(float64(i)*7919+float64(i/13), span)
		if sc.kind == 'f' {
			v = math.Round((sc.lo+math.Mod(float64(i)*0.37, span))*4) / 4
			if i%53 == 7 {
				v = math.NaN()
			}
		}
		if i%37 == 5 {
			v = sc.fill
		}
		a.raw[i] = v
	}
}

// channelLast reorders a 4-d (time, channel, y, x) array as (time, y, x, channel).
func channelLast(a *memArray) {
	T, C, H, W := a.shape[0], a.shape[1], a.shape[2], a.shape[3]
	raw := make([]float64, len(a.raw))
	for t := 0; t < T; t++ {
		for c := 0; c < C; c++ {
			for y := 0; y < H; y++ {
				for x := 0; x < W; x++ {
					raw[((t*H+y)*W+x)*C+c] = a.raw[((t*C+c)*H+y)*W+x]
				}
			}
		}
	}
	a.raw = raw
	a.shape = []int{T, H, W, C}
	a.chunks = []int{a.chunks[0], a.chunks[2], a.chunks[3], a.chunks[1]}
	a.dims = []string{"time", "y", "x", "channel"}
}

// storedJob is a job over the in-memory nowcast with every data array stored as sc, with
// per-channel normalisation and nan_policy zero (the satellite: a clip and nan_fill) when norm is
// set.
func storedJob(t *testing.T, sc storedCase, chLast, norm bool, float32Cache bool) *Job {
	t.Helper()
	sat := `sampling = "random"`
	text := memConfigFmt(sat)
	if norm {
		text = memConfigFmt(sat + "\nnormalise_mean = [1.5, 0, -2.25, 0.125]\nnormalise_std = [0.3, 1, 7, 2]\nnan_fill = -1.5" +
			"\nnormalise_clip_min = [0.2, -inf, -inf, 0]\nnormalise_clip_max = [0.6, inf, 0.5, inf]")
		text = strings.Replace(text, `channels = ["u", "v", "w"]`, `channels = ["w", "u"]`+"\nnormalise_mean = [3, -1]\nnormalise_std = [0.5, 4]\nnan_policy = \"zero\"", 1)
		text = strings.Replace(text, "nearest_k = 5", "nearest_k = 5\nnormalise_mean = [0.7]\nnormalise_std = [2.5]\nnan_policy = \"zero\"", 1)
	}
	cfg, err := parseCfg(t, text)
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	storeAs(ds["satellite.zarr"].arrays["data"], sc)
	storeAs(ds["nwp.zarr"].arrays["UKV"], sc)
	storeAs(ds["pv.zarr"].arrays["power"], sc)
	if chLast {
		channelLast(ds["satellite.zarr"].arrays["data"])
	}
	j, err := NewJob(cfg, Options{Open: memOpen(ds)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	if float32Cache {
		cacheFloat32(j)
	}
	return j
}

// cacheFloat32 makes j's cache hold every chunk as float32, converted when it is loaded (the
// conversion the cache made for every element type before it kept narrow ones as stored):
// the reference of the stored path.
func cacheFloat32(j *Job) {
	for _, s := range j.srcs {
		c := s.data()
		c.stored, c.width, c.convs = false, 4, nil
		c.direct = !c.transpose && c.elem == zarr.Float32
	}
}

// TestStoredSameBatches: batches gathered from chunks cached in their stored type (converted
// in the gather) are bit for bit those gathered from chunks converted to float32 at load, for
// every narrow type, with CF, masks, per-channel normalisation, nan_policy zero, and a store
// whose order the cache transposes in the stored width.
func TestStoredSameBatches(t *testing.T) {
	for name, sc := range storedCases {
		for _, v := range []struct{ chLast, norm bool }{{false, false}, {false, true}, {true, true}} {
			t.Run(fmt.Sprintf("%s/channel-last=%v/norm=%v", name, v.chLast, v.norm), func(t *testing.T) {
				got := fillRange(t, storedJob(t, sc, v.chLast, v.norm, false), 0, 4, 2)
				want := fillRange(t, storedJob(t, sc, v.chLast, v.norm, true), 0, 4, 2)
				for b := range want {
					if string(got[b]) != string(want[b]) {
						t.Fatalf("batch %d differs from the float32 cache's", b)
					}
				}
			})
		}
	}
}

// TestCacheHoldsStoredWidth: an int16 source's chunks take half the bytes of the same chunks
// cached as float32, and its job's data size says so.
func TestCacheHoldsStoredWidth(t *testing.T) {
	sc := storedCases["int16"]
	j16 := storedJob(t, sc, false, false, false)
	j32 := storedJob(t, sc, false, false, true)
	fillRange(t, j16, 0, 4, 1)
	fillRange(t, j32, 0, 4, 1)
	s16, s32 := j16.Cache().Stats(), j32.Cache().Stats()
	if s16.Misses != s32.Misses || s16.Entries != s32.Entries || s16.ResidentBytes*2 != s32.ResidentBytes {
		t.Fatalf("int16 cache: %d misses, %d entries, %d bytes; float32 cache: %d misses, %d entries, %d bytes; want the same entries in half the bytes",
			s16.Misses, s16.Entries, s16.ResidentBytes, s32.Misses, s32.Entries, s32.ResidentBytes)
	}
	c := j16.srcs[0].data()
	if c.chunkBytes() != int64(c.elems)*2 || !c.stored || !c.direct {
		t.Fatalf("int16 satellite: %d bytes per chunk of %d values, stored %v, direct %v", c.chunkBytes(), c.elems, c.stored, c.direct)
	}
	// A float32 source stays float32 (the preset's NWP and PV).
	ds := newMemNowcast(smallMem)
	j, _ := newMemJob(t, smallMem, "", Options{})
	nwp := j.srcs[1].data()
	if nwp.stored || nwp.chunkBytes() != int64(nwp.elems)*4 || ds["nwp.zarr"].arrays["UKV"].size != 4 {
		t.Fatalf("float32 nwp: stored %v, %d bytes per chunk of %d values", nwp.stored, nwp.chunkBytes(), nwp.elems)
	}
}

// TestCacheSteadyMissesMapNothing: once the cache has filled, misses of one entry size reuse
// evicted entries' blocks: no mapping or unmapping, and the budget holds.
func TestCacheSteadyMissesMapNothing(t *testing.T) {
	const n = 1 << 14 // 64 KiB entries
	c := NewCache(4 * 4 * n)
	defer c.Close()
	var loads atomic.Int64
	for k := uint64(0); k < 200; k++ {
		getChecked(t, c, k, n, &loads)
	}
	st := c.Stats()
	if st.Misses != 200 || st.Maps != 4 || st.Unmaps != 0 || st.Evictions != 196 || st.PeakBytes > c.Budget() {
		t.Fatalf("200 misses of one size in a cache of 4: %+v; want 4 maps, no unmap", st)
	}
	// Two sizes: the budget holds, and a block of the evicted size is reused before any map.
	for k := uint64(1000); k < 1100; k++ {
		size := int64(4 * n)
		if k%3 == 0 {
			size = 4 * n / 4
		}
		e, err := c.acquire(k, size, fillWith(0, &loads))
		if err != nil {
			t.Fatal(err)
		}
		c.release(e)
		if st := c.Stats(); st.ResidentBytes > c.Budget() || st.OverBudget != 0 {
			t.Fatalf("mixed sizes: %+v", st)
		}
	}
	if st := c.Stats(); st.Maps-st.Unmaps > 16 || st.Maps >= 4+100 {
		t.Fatalf("mixed sizes: %d maps, %d unmaps for 100 misses", st.Maps, st.Unmaps)
	}
}

// TestCacheMissesOfAJobReuseBlocks: a job whose cache holds a third of its data (entries of
// three sizes, the satellite's most of them) maps hardly a block after its first batches: the
// misses reuse the blocks of the entries they evict.
func TestCacheMissesOfAJobReuseBlocks(t *testing.T) {
	j, _ := newMemJob(t, smallMem, `sampling = "random"`, Options{})
	sat := j.srcs[0].data().chunkBytes()
	j.cache.budget = 40 * sat // a third of the data
	fillRange(t, j, 0, 4, 1)
	warm := j.Cache().Stats()
	fillRange(t, j, 4, 24, 1)
	st := j.Cache().Stats()
	if st.Misses-warm.Misses < 20 || st.PeakBytes > j.cache.budget+8*sat {
		t.Fatalf("stats after warm-up %+v, at the end %+v: want misses, within the budget", warm, st)
	}
	satMisses := st.Misses - warm.Misses
	t.Logf("after warm-up: %d misses, %d maps, %d unmaps", satMisses, st.Maps-warm.Maps, st.Unmaps-warm.Unmaps)
	if maps := st.Maps - warm.Maps; maps*20 > satMisses {
		t.Errorf("%d blocks mapped and %d unmapped for %d misses after warm-up; want most misses reusing a block", maps, st.Unmaps-warm.Unmaps, satMisses)
	}
}

// TestAbandonedReadKeepsItsBlock: a load abandoned at its deadline while its read still writes
// into the entry's block never gives that block to another entry until the read returns; then
// the block is reused.
func TestAbandonedReadKeepsItsBlock(t *testing.T) {
	const n = 1024
	c := NewCache(3 * 4 * n)
	defer c.Close()
	hung := make(chan struct{})
	var late []byte
	var lateDone sync.WaitGroup
	lateDone.Add(1)
	abandon := func(key uint64, mem []byte) (func(), error) {
		late = mem
		done := make(chan struct{})
		go func() { // the read that returns only after the deadline, scribbling over its buffer
			<-hung
			for i := range mem {
				mem[i] = 0xAA
			}
			close(done)
			lateDone.Done()
		}()
		return func() { <-done }, fmt.Errorf("chunk %d: %w", key, ErrChunkDeadline)
	}
	if _, err := c.acquire(1, 4*n, abandon); err == nil {
		t.Fatal("an abandoned load succeeded")
	}
	var loads atomic.Int64
	check := func(round string) {
		for k := uint64(10); k < 30; k++ {
			e, err := c.acquire(k, 4*n, fillWith(0, &loads))
			if err != nil {
				t.Fatal(err)
			}
			if unsafe.SliceData(e.mem) == unsafe.SliceData(late) && round == "pending" {
				t.Fatalf("entry %d was given the block of a read still writing it", k)
			}
			c.release(e)
		}
	}
	check("pending")
	if st := c.Stats(); st.ResidentBytes > c.Budget() {
		t.Fatalf("the abandoned block is not counted in the budget: %+v", st)
	}
	// Pin the last entries (two: with the abandoned block, the budget), let the read scribble,
	// and check that none of them changed.
	var pinned []*entry
	for k := uint64(28); k < 30; k++ {
		e, _ := c.acquire(k, 4*n, fillWith(0, &loads))
		pinned = append(pinned, e)
	}
	close(hung)
	lateDone.Wait()
	for _, e := range pinned {
		if e.f32()[0] != float32(e.key) || e.f32()[n-1] != float32(e.key) {
			t.Fatalf("entry %d corrupted by the late read", e.key)
		}
		c.release(e)
	}
	// The read has returned: its block goes back to the free list and serves later misses.
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().FreeBytes == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	maps := c.Stats().Maps
	e, err := c.acquire(99, 4*n, fillWith(0, &loads))
	if err != nil {
		t.Fatal(err)
	}
	c.release(e)
	if st := c.Stats(); unsafe.SliceData(e.mem) != unsafe.SliceData(late) || st.Maps != maps || st.ResidentBytes > c.Budget() {
		t.Fatalf("after the late read returned: reused its block %v, %+v", unsafe.SliceData(e.mem) == unsafe.SliceData(late), st)
	}
}

// lateArray is the satellite array of a job whose first read of chunk hangIdx blocks until
// release, then writes garbage into the buffer it was given (a hung mount that recovers after
// the loader gave up on the read).
type lateArray struct {
	*memArray
	hangIdx string
	release chan struct{}
	hung    atomic.Bool
	done    chan struct{}
}

func (l *lateArray) DecodeChunkFound(idx []int, dst []byte) (bool, error) {
	if fmt.Sprint(idx) == l.hangIdx && l.hung.CompareAndSwap(false, true) {
		<-l.release
		for i := range dst {
			dst[i] = 0xAA
		}
		close(l.done)
		return true, nil
	}
	return true, l.memArray.decode(idx, dst)
}

func (l *lateArray) MissingChunkError(idx []int) error { return l.ChunkError(idx, nil) }
func (l *lateArray) ChunkError(idx []int, err error) error {
	return fmt.Errorf("chunk %v: %w", idx, err)
}

// TestDeadlineAbandonedReadNeverCorruptsTheCache: a job whose chunk read hangs past
// chunk_deadline_s fails that batch; the batches after it, read through a cache small enough
// to reuse blocks, before and after the hung read wakes and writes into its buffer, are the
// batches of a job that never hung.
func TestDeadlineAbandonedReadNeverCorruptsTheCache(t *testing.T) {
	want, _ := newMemJob(t, smallMem, `sampling = "random"`, Options{})
	cfg, err := parseCfg(t, memConfigFmt("sampling = \"random\"\nchunk_deadline_s = 0.2"))
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(smallMem)
	// The first chunk batch 0 needs: its first example's first satellite chunk.
	_, ti, cy, cx := want.Draw(0, 0)
	w := want.anchor
	t0 := w.times.value(ti)
	sp, _ := w.times.place(w.win, t0, make([]int, w.win.n))
	c0 := w.c.chunks
	hang := fmt.Sprint([]int{sp.index(0) / c0[0], w.chans[0] / c0[1], (cy - w.s.Height/2) / c0[2], (cx - w.s.Width/2) / c0[3]})
	la := &lateArray{memArray: ds["satellite.zarr"].arrays["data"], hangIdx: hang, release: make(chan struct{}), done: make(chan struct{})}
	open := memOpen(ds)
	j, err := NewJob(cfg, Options{Open: func(p string) (Dataset, error) {
		if strings.HasSuffix(p, "satellite.zarr") {
			return &holeyDS{memDataset: ds["satellite.zarr"], h: la}, nil
		}
		return open(p)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	j.cache.budget = 8 * j.srcs[0].data().chunkBytes()
	err = j.Fill(ctx, 0, batchBuf(j))
	t.Logf("batch 0: %v", err)
	if !la.hung.Load() || !errors.Is(err, ErrChunkDeadline) {
		t.Fatalf("a batch whose chunk read hangs (hung: %v): %v", la.hung.Load(), err)
	}
	ref := fillRange(t, want, 1, 13, 1)
	compare := func(when string, got [][]byte) {
		for b := range got {
			if string(got[b]) != string(ref[b]) {
				t.Fatalf("%s: batch %d differs from a job that never hung", when, b+1)
			}
		}
	}
	compare("the read still hung", fillRange(t, j, 1, 13, 1))
	close(la.release)
	<-la.done
	compare("the read returned", fillRange(t, j, 1, 13, 1))
	if st := j.Cache().Stats(); st.ResidentBytes > j.cache.budget+4*j.srcs[0].data().chunkBytes() {
		t.Fatalf("cache %+v", st)
	}
}
