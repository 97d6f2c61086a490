package sampler

import (
	"context"
	"errors"
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
// filling has begun the group paceLag (1) before it, and goes on when the slowest moves,
// leaves, or stops filling for the stall time; jobs of another order never hold it; a
// cancelled context ends the wait.
func TestPacer(t *testing.T) {
	p := newPacer()
	p.stall = 300 * time.Millisecond
	ctx := context.Background()
	a, b, other := p.join("order"), p.join("order"), p.join("another order")
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
	c := p.join("order")
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
	d := p.join("order")
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
