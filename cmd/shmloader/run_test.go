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
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// failingFiller delegates to a synthetic filler but fails on one batch.
type failingFiller struct {
	inner  filler
	failAt uint64
}

func (f failingFiller) Fill(ctx context.Context, dst []byte, k uint64) error {
	if k == f.failAt {
		return errors.New("disk on fire")
	}
	return f.inner.Fill(ctx, dst, k)
}

// newTestRun builds a producerRun over a memfd ring in this process (no child, no signals).
func newTestRun(t *testing.T, text string, wrap func(filler) filler) *producerRun {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(text), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	l, err := layoutFor(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr := &producerRun{log: zerolog.Nop(), cfg: cfg, layout: l, flags: runFlags{readers: 2, memfd: -1}, creator: true,
		sigc: make(chan os.Signal)}
	for _, s := range cfg.Sources {
		f, err := newFiller(s, cfg.Batch.Size, sourceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pr.fillers = append(pr.fillers, wrap(f))
	}
	if pr.seg, err = shm.CreateMemfd(l.SegmentBytes()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.seg.Close() })
	if pr.r, err = ring.Create(pr.seg.Bytes(), l, false); err != nil {
		t.Fatal(err)
	}
	if pr.p, err = pr.r.NewProducer(2); err != nil {
		t.Fatal(err)
	}
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
	pr := newTestRun(t, fmt.Sprintf(oneSource, 0), func(f filler) filler { return failingFiller{f, 3} })
	c, err := pr.r.NewConsumer()
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
		if err := checkBatch(pr.r, s); err != nil {
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
	if st := pr.r.Stats(); st.Producers[0].State != ring.EntryFailed {
		t.Fatalf("producer entry %s, want FAILED", ring.EntryStateName(st.Producers[0].State))
	}
}

// The creator stays until the consumer has read a bounded stream, then stops with no error.
func TestRunCreatorWaitsForConsumer(t *testing.T) {
	pr := newTestRun(t, fmt.Sprintf(oneSource, 5), func(f filler) filler { return f })
	c, err := pr.r.NewConsumer()
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

func TestLayoutFor(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(fmt.Sprintf(oneSource, 10)), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	l, err := layoutFor(cfg, 4)
	if err != nil || l.StartBatch != 4 || l.TotalBatches != 6 || l.Slots != 2 || l.BatchSize != 2 ||
		len(l.Tensors) != 1 || l.Tensors[0].DType != ring.Int32 || fmt.Sprint(l.Tensors[0].Shape) != "[2 3]" {
		t.Fatalf("%+v %v", l, err)
	}
	if _, err := layoutFor(cfg, 10); err == nil || !strings.Contains(err.Error(), "--start 10 is past the end") {
		t.Fatalf("start past the end: %v", err)
	}
	cfg.Batch.Batches = 0
	if l, err := layoutFor(cfg, 1<<40); err != nil || l.TotalBatches != 0 {
		t.Fatalf("unbounded: %+v %v", l, err)
	}
}

func TestSyntheticDelayHonoursContext(t *testing.T) {
	f := newSynthetic(&config.Synthetic{Shape: []int{1}, DType: config.Uint8, Delay: time.Hour}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if err := f.Fill(ctx, make([]byte, 1), 0); !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 5*time.Second {
		t.Fatalf("Fill with a cancelled context: %v after %v", err, time.Since(t0))
	}
	f.delay = 30 * time.Millisecond
	t0 = time.Now()
	if err := f.Fill(context.Background(), make([]byte, 1), 0); err != nil || time.Since(t0) < 30*time.Millisecond {
		t.Fatalf("delay: %v after %v", err, time.Since(t0))
	}
}

func TestPreflight(t *testing.T) {
	for _, named := range []bool{true, false} {
		err := preflight(1<<50, named)
		if err == nil || !strings.Contains(err.Error(), "the ring needs 1125899906842624 bytes") {
			t.Fatalf("named=%v: %v", named, err)
		}
		if err := preflight(1<<20, named); err != nil {
			t.Fatalf("named=%v, 1 MiB: %v", named, err)
		}
	}
	if n, ok := memAvailable(); !ok || n <= 0 {
		t.Fatalf("MemAvailable: %d %v", n, ok)
	}
}
