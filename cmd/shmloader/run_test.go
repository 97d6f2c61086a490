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
	l, err := layoutFor(cfg, src.Tensors(), 0)
	if err != nil {
		t.Fatal(err)
	}
	pr := &producerRun{log: zerolog.Nop(), cfg: cfg, layout: l, src: src, flags: runFlags{readers: 2, memfd: -1}, creator: true,
		sigc: make(chan os.Signal)}
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
	var pr *producerRun
	pr = newTestRun(t, fmt.Sprintf(oneSource, 0), func(s sampler.Source) sampler.Source {
		return failingSource{s, 3, func() uint64 { return pr.r.Stats().BatchesWritten }}
	})
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
	pr := newTestRun(t, fmt.Sprintf(oneSource, 5), func(s sampler.Source) sampler.Source { return s })
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
	set, err := sampler.Open(cfg, sampler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := layoutFor(cfg, set.Tensors(), 4)
	if err != nil || l.StartBatch != 4 || l.TotalBatches != 6 || l.Slots != 2 || l.BatchSize != 2 ||
		len(l.Tensors) != 1 || l.Tensors[0].DType != ring.Int32 || fmt.Sprint(l.Tensors[0].Shape) != "[2 3]" {
		t.Fatalf("%+v %v", l, err)
	}
	if _, err := layoutFor(cfg, set.Tensors(), 10); err == nil || !strings.Contains(err.Error(), "--start 10 is past the end") {
		t.Fatalf("start past the end: %v", err)
	}
	cfg.Batch.Batches = 0
	if l, err := layoutFor(cfg, set.Tensors(), 1<<40); err != nil || l.TotalBatches != 0 {
		t.Fatalf("unbounded: %+v %v", l, err)
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

// --epoch E bounds the ring to epoch E of the rank's stream; --start must lie inside it.
func TestStreamLayoutEpoch(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(strings.Replace(fmt.Sprintf(oneSource, 0), "batches = 0\n", "order = \"epochs\"\n", 1)), config.TOML)
	if err != nil {
		t.Fatal(err)
	}
	tensors := []config.Tensor{{Name: "x", DType: config.Int32, Shape: []int{2, 3}}}
	st := sampler.Stats{Order: config.OrderEpochs, EpochBatches: 7}
	for _, c := range []struct {
		f            runFlags
		start, total uint64
		err          string
	}{
		{f: runFlags{}, start: 0, total: 0}, // no --epoch: epochs one after another, unbounded
		{f: runFlags{start: 9, startSet: true}, start: 9, total: 0},
		{f: runFlags{epoch: 0, epochSet: true}, start: 0, total: 7},
		{f: runFlags{epoch: 2, epochSet: true}, start: 14, total: 7},
		{f: runFlags{epoch: 2, epochSet: true, start: 18, startSet: true}, start: 18, total: 3},
		{f: runFlags{epoch: 2, epochSet: true, start: 20, startSet: true}, start: 20, total: 1},
		{f: runFlags{epoch: 2, epochSet: true, start: 21, startSet: true}, err: "--start 21 is not in --epoch 2, whose batches are 14 .. 20 of this rank's stream (7 per epoch); expected --start in that range, or --epoch 3"},
		{f: runFlags{epoch: 2, epochSet: true, start: 13, startSet: true}, err: "--start 13 is not in --epoch 2"},
		{f: runFlags{epoch: 1 << 62, epochSet: true}, err: "past the largest stream index"},
	} {
		l, err := streamLayout(cfg, tensors, c.f, st)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %v, want %q", c.f, err, c.err)
			}
			continue
		}
		if err != nil || l.StartBatch != c.start || l.TotalBatches != c.total {
			t.Errorf("%+v: start %d total %d (%v), want %d %d", c.f, l.StartBatch, l.TotalBatches, err, c.start, c.total)
		}
	}
	cfg.Batch.Order = config.OrderStream
	stream := sampler.Stats{Order: config.OrderStream}
	if _, err := streamLayout(cfg, tensors, runFlags{epoch: 1, epochSet: true}, stream); err == nil || !strings.Contains(err.Error(), `--epoch 1 needs [batch] order = "epochs"; this configuration's order is "stream"`) {
		t.Errorf("--epoch on a stream: %v", err)
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
