package sampler

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gobatch/gobatch/readers/zarr"
)

// The cache in the stored width (chunked.go) and its block pool (chunks/cache.go).

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
				t.Parallel() // independent jobs: the slowest test under -race, on every core
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
	// A float32 source is cached as stored too (the preset's NWP and PV): 4 bytes a value.
	ds := newMemNowcast(smallMem)
	j, _ := newMemJob(t, smallMem, "", Options{})
	nwp := j.srcs[1].data()
	if !nwp.stored || nwp.chunkBytes() != int64(nwp.elems)*4 || ds["nwp.zarr"].arrays["UKV"].size != 4 {
		t.Fatalf("float32 nwp: stored %v, %d bytes per chunk of %d values", nwp.stored, nwp.chunkBytes(), nwp.elems)
	}
}

// TestCacheMissesOfAJobReuseBlocks: a job whose cache holds a third of its data (entries of
// three sizes, the satellite's most of them) maps hardly a block after its first batches: the
// misses reuse the blocks of the entries they evict.
func TestCacheMissesOfAJobReuseBlocks(t *testing.T) {
	j, _ := newMemJob(t, smallMem, `sampling = "random"`, Options{})
	sat := j.srcs[0].data().chunkBytes()
	j.cache.SetBudget(40 * sat) // a third of the data
	fillRange(t, j, 0, 4, 1)
	warm := j.Cache().Stats()
	fillRange(t, j, 4, 24, 1)
	st := j.Cache().Stats()
	if st.Misses-warm.Misses < 20 || st.PeakBytes > j.cache.Budget()+8*sat {
		t.Fatalf("stats after warm-up %+v, at the end %+v: want misses, within the budget", warm, st)
	}
	satMisses := st.Misses - warm.Misses
	t.Logf("after warm-up: %d misses, %d maps, %d unmaps", satMisses, st.Maps-warm.Maps, st.Unmaps-warm.Unmaps)
	if maps := st.Maps - warm.Maps; maps*20 > satMisses {
		t.Errorf("%d blocks mapped and %d unmapped for %d misses after warm-up; want most misses reusing a block", maps, st.Unmaps-warm.Unmaps, satMisses)
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
	j.cache.SetBudget(8 * j.srcs[0].data().chunkBytes())
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
	if st := j.Cache().Stats(); st.ResidentBytes > j.cache.Budget()+4*j.srcs[0].data().chunkBytes() {
		t.Fatalf("cache %+v", st)
	}
}
