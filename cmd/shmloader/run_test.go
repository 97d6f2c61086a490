package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/feed"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// failingSource delegates to the configured sources but fails on one batch, naming the source
// as a real one would. It fails only once the batches before it are written (written reports
// how many), so that the consumer sees exactly those before the error, whatever the timing of
// the two readers.
type failingSource struct {
	sampler.Source
	failAt  uint64
	written func() uint64
}

func (f failingSource) Fill(ctx context.Context, g uint64, dst [][]byte) error {
	if g == f.failAt {
		for deadline := time.Now().Add(5 * time.Second); f.written() < f.failAt && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		return fmt.Errorf("source %q, batch %d: disk on fire", f.Tensors()[0].Name, g)
	}
	return f.Source.Fill(ctx, g, dst)
}

// newTestRun builds a producerRun over a memfd ring in this process (no child, no signals).
func newTestRun(t *testing.T, text string, wrap func(sampler.Source) sampler.Source) *producerRun {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(text), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	set, err := sampler.Open(cfg, sampler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &runSource{Source: wrap(set), log: zerolog.Nop()}
	l, err := feed.Window{}.Layout(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	pr := &producerRun{log: zerolog.Nop(), layout: l, src: src, flags: runFlags{readers: 2, memfd: -1}, sigc: make(chan os.Signal)}
	if pr.ring, err = feed.CreateMemfd("test", l, 2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.ring.Close() })
	return pr
}

const oneSource = "[batch]\nsize = 2\nbatches = %d\n[ring]\nslots = 2\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [3]\ndtype = \"int32\"\n"

type produced struct {
	cause       error
	readersDone bool
}

func startProduce(pr *producerRun) chan produced {
	ch := make(chan produced, 1)
	go func() {
		c, d := pr.produce()
		ch <- produced{c, d}
	}()
	return ch
}

// A source error reaches the consumer as the ring's error record, and the process exits 1.
func TestRunFillErrorReachesConsumer(t *testing.T) {
	var pr *producerRun
	pr = newTestRun(t, fmt.Sprintf(oneSource, 0), func(s sampler.Source) sampler.Source {
		return failingSource{s, 3, func() uint64 { return pr.ring.R.Stats().BatchesWritten }}
	})
	c, err := pr.ring.R.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	done := startProduce(pr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []uint64
	for {
		s, err := c.Next(ctx)
		if err != nil {
			var pe *ring.ProducerError
			if !errors.As(err, &pe) || !strings.Contains(pe.Text, `source "x", batch 3: disk on fire`) {
				t.Fatalf("consumer got %v", err)
			}
			break
		}
		if err := checkBatch(pr.ring.R, s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s.Seq())
		c.Release(s)
	}
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("batches before the error: %v", got)
	}
	res := <-done
	if !res.readersDone || exitCode(res.cause) != exitFailure || !strings.Contains(res.cause.Error(), "disk on fire") {
		t.Fatalf("produce: %+v (exit %d)", res, exitCode(res.cause))
	}
	if st := pr.ring.R.Stats(); st.Producers[0].State != ring.EntryFailed {
		t.Fatalf("producer entry %s, want FAILED", ring.EntryStateName(st.Producers[0].State))
	}
}

// The creator stays until the consumer has read a bounded stream, then stops with no error.
func TestRunCreatorWaitsForConsumer(t *testing.T) {
	pr := newTestRun(t, fmt.Sprintf(oneSource, 5), func(s sampler.Source) sampler.Source { return s })
	c, err := pr.ring.R.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	done := startProduce(pr)
	for i := range 5 {
		s, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			// Everything is written; the creator must still be there.
			time.Sleep(150 * time.Millisecond)
			select {
			case res := <-done:
				t.Fatalf("creator left before the last batch was read: %+v", res)
			default:
			}
		}
		c.Release(s)
	}
	select {
	case res := <-done:
		if res.cause != nil || !res.readersDone {
			t.Fatalf("produce: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("creator did not stop after the stream was read")
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{ring.ErrConsumerClosed, exitOK},
		{fmt.Errorf("%w (pid 7)", ring.ErrConsumerGone), exitConsumerDied},
		{fmt.Errorf("%w (was pid 7)", ring.ErrParentDied), exitConsumerDied},
		{signalStop{syscall.SIGTERM}, exitOK},
		{signalStop{os.Interrupt}, exitInterrupted},
		{&ring.ProducerError{Producer: 2, Text: "x"}, exitFailure},
		{errors.New("anything else"), exitFailure},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestRunAllowUIDNeedsJoin: --allow-uid accepts another user's ring for a process that joins
// one; a creator's ring is always its own, so the flag without --join is a usage error.
func TestRunAllowUIDNeedsJoin(t *testing.T) {
	uid := 1234
	f := runFlags{config: "x.toml", ring: "r", memfd: -1, readers: 1, allowUID: &uid, sourceFlags: sourceFlags{world: 1}}
	if _, err := f.check(nil); err == nil || !strings.Contains(err.Error(), "--allow-uid needs --join") {
		t.Errorf("--allow-uid without --join: %v", err)
	}
	f.join = true
	if _, err := f.check(nil); err != nil {
		t.Errorf("--allow-uid with --join: %v", err)
	}
	if f.allowedUID() != uid || (&runFlags{}).allowedUID() != shm.NoOtherUID {
		t.Errorf("allowedUID = %d, unset %d", f.allowedUID(), (&runFlags{}).allowedUID())
	}
}

// TestRunEpochsNeedsEpoch: --epochs counts epochs from --epoch's, so it is refused alone.
func TestRunEpochsNeedsEpoch(t *testing.T) {
	f := runFlags{config: "x.toml", ring: "r", memfd: -1, readers: 1, sourceFlags: sourceFlags{world: 1}}
	f.window.Epochs = 3
	if _, err := f.check(nil); err == nil || !strings.Contains(err.Error(), "--epochs needs --epoch") {
		t.Errorf("--epochs without --epoch: %v", err)
	}
	f.window.EpochSet = true
	if _, err := f.check(nil); err != nil {
		t.Errorf("--epochs with --epoch: %v", err)
	}
}
