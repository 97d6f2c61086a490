package sampler

import (
	"strings"
	"testing"
)

func TestStreamRankRule(t *testing.T) {
	for _, c := range []struct{ rank, world int }{{0, 0}, {-1, 2}, {2, 2}, {5, 3}} {
		if _, err := NewStream(c.rank, c.world); err == nil || !strings.Contains(err.Error(), "expected world size >= 1") {
			t.Errorf("rank %d of %d: %v", c.rank, c.world, err)
		}
	}
	// Every global batch belongs to exactly one rank, at stream index global / world.
	const world = 3
	seen := map[uint64]int{}
	for r := 0; r < world; r++ {
		s, err := NewStream(r, world)
		if err != nil {
			t.Fatal(err)
		}
		for k := uint64(0); k < 100; k++ {
			g := s.Global(k)
			if g%world != uint64(r) || g/world != k {
				t.Fatalf("rank %d batch %d -> global %d", r, k, g)
			}
			seen[g]++
		}
	}
	for g := uint64(0); g < 300; g++ {
		if seen[g] != 1 {
			t.Fatalf("global batch %d is produced %d times", g, seen[g])
		}
	}
	one, _ := NewStream(0, 1)
	if one.Global(12345) != 12345 {
		t.Fatal("world size 1 is the identity")
	}
}
