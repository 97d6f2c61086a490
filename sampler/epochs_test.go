package sampler

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
)

func TestPermutationIsABijection(t *testing.T) {
	sizes := []uint64{1, 2, 3, 4, 5, 7, 8, 13, 31, 64, 97, 100, 127, 128, 129, 1000, 4093, 65536, 65537, 1<<20 + 7}
	for _, n := range sizes {
		for _, key := range []struct{ seed, epoch uint64 }{{0, 0}, {7, 1}, {7, 2}} {
			p := newPermutation(n, key.seed, key.epoch)
			seen := make([]bool, n)
			for i := uint64(0); i < n; i++ {
				v := p.at(i)
				if v >= n {
					t.Fatalf("n %d seed %d epoch %d: at(%d) = %d, out of range", n, key.seed, key.epoch, i, v)
				}
				if seen[v] {
					t.Fatalf("n %d seed %d epoch %d: %d is the image of two indices", n, key.seed, key.epoch, v)
				}
				seen[v] = true
			}
		}
	}
}

func TestPermutationsDifferAndMix(t *testing.T) {
	const n = 10007 // prime: most of the Feistel domain (16384) is walked over
	a, b, c := newPermutation(n, 7, 0), newPermutation(n, 7, 1), newPermutation(n, 8, 0)
	same, sameSeed, fixed := 0, 0, 0
	var sum float64
	for i := uint64(0); i < n; i++ {
		if a.at(i) == b.at(i) {
			same++
		}
		if a.at(i) == c.at(i) {
			sameSeed++
		}
		if a.at(i) == i {
			fixed++
		}
		sum += float64(a.at(i)) - float64(i)
	}
	// A random permutation agrees with another in about 1 place and fixes about 1 point.
	if same > 10 || sameSeed > 10 || fixed > 10 {
		t.Fatalf("epochs 0/1 agree in %d places, seeds 7/8 in %d, %d fixed points", same, sameSeed, fixed)
	}
	// Not a rotation or a near-identity: the first 100 places land all over [0, n).
	lo, hi := uint64(n), uint64(0)
	for i := uint64(0); i < 100; i++ {
		lo, hi = min(lo, a.at(i)), max(hi, a.at(i))
	}
	if lo > n/10 || hi < n-n/10 {
		t.Fatalf("the first 100 places map into [%d, %d] of [0, %d)", lo, hi, n)
	}
}

// epochsConfig is memConfig with [batch] order = "epochs".
func epochsConfig(extra string) string {
	return strings.Replace(memConfigFmt(extra), "seed = 7\n", "seed = 7\norder = \"epochs\"\n", 1)
}

func newEpochsJob(t *testing.T, extra string, opt Options) *Job {
	t.Helper()
	cfg, err := parseCfg(t, epochsConfig(extra))
	if err != nil {
		t.Fatal(err)
	}
	opt.Open = memOpen(newMemNowcast(smallMem))
	j, err := NewJob(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// sampleKey is an example's identity as a trainer sees it: t0, x, y.
type sampleKey struct {
	t0   int64
	x, y float64
}

// examplesOf reads t0, x and y of every example of the filled batches (fillStream's output).
func examplesOf(j *Job, batches [][]byte) [][]sampleKey {
	off := map[string]int64{}
	at := int64(0)
	for _, tn := range j.Tensors() {
		off[tn.Name] = at
		at += tn.NBytes()
	}
	out := make([][]sampleKey, len(batches))
	for b, raw := range batches {
		for e := 0; e < j.size; e++ {
			u := func(name string) uint64 { return binary.LittleEndian.Uint64(raw[off[name]+int64(8*e):]) }
			out[b] = append(out[b], sampleKey{int64(u("t0")), math.Float64frombits(u("x")), math.Float64frombits(u("y"))})
		}
	}
	return out
}

func TestEpochsEverySampleOncePerRankAndReaders(t *testing.T) {
	ref := newEpochsJob(t, "", Options{})
	cands := map[int64]bool{}
	for _, ci := range ref.cands {
		cands[ref.anchor.times.value(int(ci))] = true
	}
	N := uint64(len(ref.cands))
	for _, world := range []int{1, 2} {
		var epochT0 [2][]int64
		for _, readers := range []int{1, 2} {
			for epoch := uint64(0); epoch < 2; epoch++ {
				var all []sampleKey
				var perRank uint64
				for rank := 0; rank < world; rank++ {
					s, err := NewStream(rank, world)
					if err != nil {
						t.Fatal(err)
					}
					j := newEpochsJob(t, "", Options{Stream: s})
					perRank = j.Stats().EpochBatches
					if want := N / uint64(j.size) / uint64(world); perRank != want {
						t.Fatalf("world %d: %d batches per rank per epoch, want floor(%d / %d / %d) = %d", world, perRank, N, j.size, world, want)
					}
					got := fillStream(t, j, s, epoch*perRank, (epoch+1)*perRank, readers)
					for _, b := range examplesOf(j, got) {
						all = append(all, b...)
					}
				}
				// Every sample (a t0 candidate) at most once; all but the dropped tail.
				seen := map[int64]bool{}
				for _, k := range all {
					if !cands[k.t0] {
						t.Fatalf("world %d epoch %d: t0 %d is not a candidate", world, epoch, k.t0)
					}
					if seen[k.t0] {
						t.Fatalf("world %d readers %d epoch %d: t0 %d twice", world, readers, epoch, k.t0)
					}
					seen[k.t0] = true
				}
				used := perRank * uint64(world) * uint64(ref.size)
				if uint64(len(seen)) != used || N-used >= uint64(world*ref.size) {
					t.Fatalf("world %d epoch %d: %d distinct samples of %d, expected %d (drop-last below one batch per rank)", world, epoch, len(seen), N, used)
				}
				var order []int64
				for _, k := range all {
					order = append(order, k.t0)
				}
				if readers == 1 {
					epochT0[epoch] = order
				} else if fmt.Sprint(order) != fmt.Sprint(epochT0[epoch]) {
					t.Fatalf("world %d epoch %d: 2 readers give another order than 1", world, epoch)
				}
			}
		}
		if fmt.Sprint(epochT0[0]) == fmt.Sprint(epochT0[1]) {
			t.Fatalf("world %d: epochs 0 and 1 have the same order", world)
		}
	}
}

func TestEpochsCentresAndExactResume(t *testing.T) {
	j := newEpochsJob(t, "", Options{})
	B := j.Stats().EpochBatches
	whole := fillRange(t, j, 0, 2*B, 2)
	// Resume in the middle of epoch 1 (and across the epoch boundary from epoch 0).
	for _, from := range []uint64{B + 3, B - 2} {
		r := newEpochsJob(t, "", Options{})
		got := fillRange(t, r, from, 2*B, 2)
		for k := range got {
			if !bytes.Equal(got[k], whole[from+uint64(k)]) {
				t.Fatalf("started at %d: batch %d differs", from, from+uint64(k))
			}
		}
	}
	// The centre is drawn per (epoch, sample): a t0 gets new centres in another epoch.
	centre := [2]map[int64][2]float64{{}, {}}
	for b, ex := range examplesOf(j, whole) {
		for _, k := range ex {
			centre[uint64(b)/B][k.t0] = [2]float64{k.x, k.y}
		}
	}
	moved, both := 0, 0
	xs := map[float64]bool{}
	for t0, c := range centre[0] {
		xs[c[0]] = true
		if d, ok := centre[1][t0]; ok {
			both++
			if d != c {
				moved++
			}
		}
	}
	if both < 50 || moved < both*9/10 || len(xs) < 10 {
		t.Fatalf("%d t0 in both epochs, %d with another centre; %d distinct x in epoch 0", both, moved, len(xs))
	}
}

func TestEpochsAreRefusedWhereTheyCannotWork(t *testing.T) {
	// A sample space smaller than one batch per rank.
	cfg, err := parseCfg(t, strings.Replace(epochsConfig(""), "size = 4", "size = 64", 1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem)), Stream: Stream{Rank: 0, WorldSize: 2}})
	if err == nil || !strings.Contains(err.Error(), "batch.size: 64 with order = \"epochs\"") || !strings.Contains(err.Error(), "each of 2 ranks") {
		t.Fatalf("too few samples: %v", err)
	}
	// Synthetic sources have no sample space.
	cfg, err = config.Parse("s.toml", []byte("[batch]\nsize = 2\norder = \"epochs\"\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [3]\ndtype = \"int64\"\n"), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = Open(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "batch.order") {
		t.Fatalf("synthetic epochs: %v", err)
	}
}

func TestStreamEpochSplit(t *testing.T) {
	for _, c := range []struct{ world, n, global, per uint64 }{{1, 31, 31, 31}, {2, 31, 30, 15}, {3, 31, 30, 10}, {4, 3, 0, 0}, {0, 5, 5, 5}} {
		g, p := Stream{WorldSize: c.world}.Epoch(c.n)
		if g != c.global || p != c.per {
			t.Errorf("world %d, %d batches: (%d, %d), want (%d, %d)", c.world, c.n, g, p, c.global, c.per)
		}
	}
}

func TestEpochsFillAllocatesNothingWhenWarm(t *testing.T) {
	j := newEpochsJob(t, "", Options{})
	if allocs := warmFillAllocs(t, j); allocs != 0 { // 300 batches: several epochs
		t.Errorf("epochs: %.1f allocations per warm Fill", allocs)
	}
}

func BenchmarkPermutationAt(b *testing.B) {
	p := newPermutation(123456789, 7, 3) // a sample space of 10^8 and more: O(1) memory
	var sink uint64
	for i := 0; i < b.N; i++ {
		sink += p.at(uint64(i) % 123456789)
	}
	_ = sink
}

// [batch] drop_last = false: an epoch has ceil(N / size) global batches, rounded up to the world
// size; the first N places are every sample once, and the places past N are the epoch's first
// samples again (DistributedSampler's padding), on every rank.
func TestEpochsKeepLastHasEverySample(t *testing.T) {
	ref := newEpochsJob(t, "", Options{})
	N := uint64(len(ref.cands))
	for _, world := range []int{1, 2, 3} {
		size := uint64(ref.size)
		batches := (N + size - 1) / size
		perRank := (batches + uint64(world) - 1) / uint64(world)
		if perRank*uint64(world)*size == N {
			t.Fatalf("fixture: %d samples fill the batches of world %d exactly; nothing to pad", N, world)
		}
		byGlobal := map[uint64][]sampleKey{}
		for rank := 0; rank < world; rank++ {
			s, err := NewStream(rank, world)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := parseCfg(t, strings.Replace(epochsConfig(""), "order = \"epochs\"\n", "order = \"epochs\"\ndrop_last = false\n", 1))
			if err != nil {
				t.Fatal(err)
			}
			j, err := NewJob(cfg, Options{Open: memOpen(newMemNowcast(smallMem)), Stream: s})
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Stats().EpochBatches; got != perRank {
				t.Fatalf("world %d: %d batches per rank, want ceil(ceil(%d / %d) / %d) = %d", world, got, N, size, world, perRank)
			}
			for k, b := range examplesOf(j, fillStream(t, j, s, perRank, 2*perRank, 1)) { // epoch 1
				byGlobal[uint64(k)*uint64(world)+uint64(rank)] = b
			}
			j.Close()
		}
		var places []sampleKey
		for g := uint64(0); g < perRank*uint64(world); g++ {
			places = append(places, byGlobal[g]...)
		}
		seen := map[int64]bool{}
		for _, k := range places[:N] {
			if seen[k.t0] {
				t.Fatalf("world %d: t0 %d twice among the first %d places", world, k.t0, N)
			}
			seen[k.t0] = true
		}
		if uint64(len(seen)) != N {
			t.Fatalf("world %d: %d distinct samples, want all %d", world, len(seen), N)
		}
		for i, k := range places[N:] {
			if k.t0 != places[uint64(i)%N].t0 {
				t.Fatalf("world %d: padding place %d is t0 %d, want the epoch's sample %d again (t0 %d)", world, N+uint64(i), k.t0, i, places[i].t0)
			}
		}
	}
}
