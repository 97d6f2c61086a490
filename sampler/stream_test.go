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

func TestNodeStreams(t *testing.T) {
	for _, c := range []struct{ node, local, world int }{{0, 0, 4}, {2, 2, 4}, {-1, 2, 4}, {0, 3, 4}, {0, 2, 0}} {
		if _, err := NodeStreams(c.node, c.local, c.world); err == nil || !strings.Contains(err.Error(), "expected local ranks >= 1") {
			t.Errorf("node %d local %d world %d: %v", c.node, c.local, c.world, err)
		}
	}
	// Two nodes of two ranks: node 1 serves global ranks 2 and 3 (torchrun's RANK for
	// GROUP_RANK 1, LOCAL_RANK 0 and 1), and the nodes' ranks are the world's, once each.
	seen := map[uint64]bool{}
	for node := 0; node < 2; node++ {
		ss, err := NodeStreams(node, 2, 4)
		if err != nil {
			t.Fatal(err)
		}
		for l, s := range ss {
			if want := uint64(node*2 + l); s.Rank != want || s.WorldSize != 4 || seen[want] {
				t.Fatalf("node %d local %d: %+v, want rank %d of 4 once", node, l, s, want)
			}
			seen[s.Rank] = true
			if NodeOf(int(s.Rank), 2) != node {
				t.Fatalf("NodeOf(%d, 2) = %d, want %d", s.Rank, NodeOf(int(s.Rank), 2), node)
			}
		}
	}
	if len(seen) != 4 {
		t.Fatalf("ranks %v", seen)
	}
}
