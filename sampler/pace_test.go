package sampler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// waitDone runs p.wait in a goroutine and returns a channel that gets its result.
func waitDone(ctx context.Context, p *pacer, m *paceMember, pos uint64) chan error {
	done := make(chan error, 1)
	go func() { done <- p.wait(ctx, m, pos) }()
	return done
}

func returned(t *testing.T, done chan error, within time.Duration) (error, bool) {
	t.Helper()
	select {
	case err := <-done:
		return err, true
	case <-time.After(within):
		return nil, false
	}
}

// TestPacer: a job of an order waits at a group until every other job of that order still
// filling has begun the group its lag (1 here) before it, and goes on when the slowest moves,
// leaves, or stops filling for the stall time; jobs of another order never hold it; a
// cancelled context ends the wait.
func TestPacer(t *testing.T) {
	p := newPacer()
	p.stall = 300 * time.Millisecond
	ctx := context.Background()
	a, b, other := p.join("order", 1), p.join("order", 1), p.join("another order", 1)
	if err := p.wait(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(ctx, other, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(ctx, a, 1); err != nil { // one group ahead of b: allowed
		t.Fatal(err)
	}
	done := waitDone(ctx, p, a, 2)
	if _, ok := returned(t, done, 100*time.Millisecond); ok {
		t.Fatal("a began group 2 while b was still at group 0")
	}
	if err := p.wait(ctx, b, 1); err != nil { // b begins group 1: a may begin 2
		t.Fatal(err)
	}
	if err, ok := returned(t, done, time.Second); !ok || err != nil {
		t.Fatalf("a still waits after b began group 1 (%v, %v)", err, ok)
	}
	// b leaves: a goes on alone.
	done = waitDone(ctx, p, a, 3)
	if _, ok := returned(t, done, 100*time.Millisecond); ok {
		t.Fatal("a began group 3 while b was at group 1")
	}
	p.leave(b)
	if err, ok := returned(t, done, time.Second); !ok || err != nil {
		t.Fatalf("a still waits after b left (%v, %v)", err, ok)
	}
	// c stops filling at group 2: after the stall time it holds a no more.
	c := p.join("order", 1)
	if err := p.wait(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.wait(ctx, a, 4); err != nil {
		t.Fatal(err)
	}
	if held := time.Since(start); held < 200*time.Millisecond || held > 2*time.Second {
		t.Fatalf("a was held %v by a job that stopped filling; want about the stall time (300ms)", held)
	}
	// The other order never held anyone, and a cancelled wait ends with the context's error.
	if err := p.wait(ctx, other, 9); err != nil {
		t.Fatal(err)
	}
	d := p.join("order", 1)
	if err := p.wait(ctx, d, 3); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done = waitDone(cctx, p, a, 5)
	if _, ok := returned(t, done, 50*time.Millisecond); ok {
		t.Fatal("a began group 5 while d was at group 3")
	}
	cancel()
	if err, ok := returned(t, done, time.Second); !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v, %v; want context.Canceled", err, ok)
	}
}

// TestPacerNoLag: a job whose cache holds no group beyond its own may not begin a group
// before the slowest job of its order has begun it; the slowest never waits.
func TestPacerNoLag(t *testing.T) {
	p := newPacer()
	ctx := context.Background()
	a, b := p.join("order", 0), p.join("order", 0)
	for _, m := range []*paceMember{a, b} {
		if err := p.wait(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	done := waitDone(ctx, p, a, 1)
	if _, ok := returned(t, done, 100*time.Millisecond); ok {
		t.Fatal("a began group 1 while b was at group 0")
	}
	if err := p.wait(ctx, b, 1); err != nil { // b is the slowest: it never waits
		t.Fatal(err)
	}
	if err, ok := returned(t, done, time.Second); !ok || err != nil {
		t.Fatalf("a still waits after b began group 1 (%v, %v)", err, ok)
	}
}

// TestPaceLag: a job may run ahead of the slowest job of its order by the groups the cache
// holds beyond its own (its group, and the next when it fetches ahead), so that every job's
// groups stay resident together: one where the block shuffle sized its group for two, none
// when it also fetches the next group ahead, none when the cache holds less than two segments.
func TestPaceLag(t *testing.T) {
	wide := bigPixels
	wide.P = 96 // a segment of the shortest length is more than half of a 1 MB cache
	for _, c := range []struct {
		name  string
		p     memParams
		extra string
		mb    int64
		own   int64
		want  uint64
	}{
		{"two groups", bigPixels, "", 2, 1, 1},
		{"fetching ahead", bigPixels, "fetch_ahead_batches = 2", 2, 2, 0},
		{"less than two segments", wide, "", 1, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := blockJob(t, c.p, c.extra, c.mb, Stream{})
			if j.epochs.blocks == nil {
				t.Fatalf("no block shuffle: %s", j.why)
			}
			if short := strings.Contains(j.why, "less than two segments"); short != (c.name == "less than two segments") {
				t.Fatalf("plan: %s", j.why)
			}
			group := int64(j.epochs.blocks.group) * j.blockBytes
			lag := j.paceLag()
			if lag != c.want {
				t.Fatalf("lag %d, want %d (groups of %d bytes, cache %d bytes): %s", lag, c.want, group, j.cache.Budget(), j.why)
			}
			// The groups of every job (its own, and lag more behind) fit the cache, one more would not.
			fits := func(groups int64) bool { return groups*group <= j.cache.Budget()*9/10 }
			if n := c.own + int64(lag); (!fits(n) && lag > 0) || fits(n+1) {
				t.Errorf("%d groups of %d bytes in a cache of %d: lag %d does not fill it", n, group, j.cache.Budget(), lag)
			}
		})
	}
}
