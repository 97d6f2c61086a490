package ring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// streamLayout has one uint64 tensor of `words` words per batch.
func streamLayout(slots int, total uint64, words int) Layout {
	return Layout{Slots: slots, TotalBatches: total, BatchSize: 1, Tensors: []Tensor{
		{Name: "w", DType: Uint64, Shape: []int{1, words}},
	}}
}

// produce runs writers goroutines that claim, fill with the pattern (after a random delay up
// to maxDelay) and publish until Claim fails; it returns the first non-EOF error.
func produce(ctx context.Context, p *Producer, writers int, maxDelay time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for k := 0; k < writers; k++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for {
				w, err := p.Claim(ctx)
				if err != nil {
					if err != io.EOF {
						if !errors.Is(err, ErrConsumerClosed) {
							p.Fail(err) // the consumer fails with it instead of waiting for this writer's batch
						}
						errs <- err
					}
					return
				}
				if maxDelay > 0 {
					time.Sleep(time.Duration(rng.Int64N(int64(maxDelay))))
				}
				fill(w.Tensor(0), w.Seq())
				if err := w.Publish(); err != nil {
					errs <- err
					return
				}
			}
		}(uint64(k))
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startProducing runs produce in the background. At the end of the test, before the segment
// is unmapped (cleanups run last-in first-out, so register the unmapping first), it closes c,
// which stops the producers, and waits for them.
func startProducing(t *testing.T, p *Producer, c *Consumer, writers int, delay time.Duration) <-chan error {
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- produce(context.Background(), p, writers, delay)
	}()
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	return errc
}

// consumeAll reads the whole stream and checks order and content.
func consumeAll(t *testing.T, c *Consumer, start, total uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for j := uint64(0); ; j++ {
		s, err := c.Next(ctx)
		if err == io.EOF {
			if j != total {
				t.Fatalf("EOF after %d batches, want %d", j, total)
			}
			return
		}
		if err != nil {
			t.Fatalf("batch %d: %v", j, err)
		}
		if s.Seq() != start+j {
			t.Fatalf("batch %d has seq %d, want %d", j, s.Seq(), start+j)
		}
		if k := check(s.Tensor(0), s.Seq()); k >= 0 {
			t.Fatalf("batch %d: word %d is wrong", s.Seq(), k)
		}
		c.Release(s)
	}
}

func TestSingleProducerInOrder(t *testing.T) {
	for _, mem := range []string{"heap", "memfd"} {
		t.Run(mem, func(t *testing.T) {
			l := streamLayout(3, 200, 16)
			l.StartBatch = 1000
			var r *Ring
			if mem == "heap" {
				r = newHeapRing(t, l)
			} else {
				_, r = newMemfdRing(t, l)
			}
			p, err := r.NewProducer(1)
			if err != nil {
				t.Fatal(err)
			}
			c, err := r.NewConsumer()
			if err != nil {
				t.Fatal(err)
			}
			done := startProducing(t, p, c, 1, 0)
			consumeAll(t, c, 1000, 200)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			st := r.Stats()
			if st.BatchesWritten != 200 || st.BatchesRead != 200 || st.BytesRead != 200*128 || st.BytesWritten != 200*128 {
				t.Errorf("counters: %+v", st)
			}
			if len(st.Producers) != 1 || st.Producers[0].State != EntryDone || st.Producers[0].Batches != 200 || st.Producers[0].Writers != 1 {
				t.Errorf("producer entry not DONE with 200 batches: %+v", st.Producers)
			}
			if _, err := c.Next(context.Background()); err != io.EOF {
				t.Errorf("Next after the end = %v, want io.EOF", err)
			}
			c.Close()
			if st := r.Stats(); st.ConsumerState != ConsumerClosed {
				t.Errorf("consumer state %d after Close", st.ConsumerState)
			}
			if _, err := c.Next(context.Background()); err != ErrClosed {
				t.Errorf("Next after Close = %v", err)
			}
			if !strings.Contains(st.String(), "DONE") {
				t.Errorf("Stats.String lacks the entry state:\n%s", st.String())
			}
		})
	}
}

// TestManyWritersOutOfOrder: writers finish their batches in random order; the consumer
// still sees every batch once, in stream order.
func TestManyWritersOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		slots, writers int
		mem            string
	}{{4, 8, "heap"}, {4, 3, "memfd"}, {1, 4, "heap"}, {16, 6, "memfd"}} {
		t.Run(fmt.Sprintf("%s/slots%d/writers%d", tc.mem, tc.slots, tc.writers), func(t *testing.T) {
			const total = 600
			l := streamLayout(tc.slots, total, 32)
			var r *Ring
			if tc.mem == "heap" {
				r = newHeapRing(t, l)
			} else {
				_, r = newMemfdRing(t, l)
			}
			p, _ := r.NewProducer(tc.writers)
			c, err := r.NewConsumer()
			if err != nil {
				t.Fatal(err)
			}
			done := startProducing(t, p, c, tc.writers, 300*time.Microsecond)
			consumeAll(t, c, 0, total)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if st := r.Stats(); st.NextClaim < total || st.BatchesWritten != total || st.Producers[0].State != EntryDone {
				t.Errorf("stats after the stream: %+v", st)
			}
		})
	}
}

// TestLapWraparound runs batches across the 2^30 lap boundary and StartBatch across 2^64.
func TestLapWraparound(t *testing.T) {
	for _, slots := range []int{1, 3, 8} {
		t.Run(fmt.Sprint("slots", slots), func(t *testing.T) {
			l := streamLayout(slots, 0, 8)
			l.StartBatch = ^uint64(0) - 50 // absolute indices wrap through 2^64 too
			r := newHeapRing(t, l)
			p, _ := r.NewProducer(4)
			c, _ := r.NewConsumer()
			j0 := uint64(1<<30)*uint64(slots) - 40
			setPosition(r, c, j0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go produce(ctx, p, 4, 50*time.Microsecond)
			lapsSeen := map[uint32]bool{}
			for k := uint64(0); k < 200; k++ {
				s, err := c.Next(ctx)
				if err != nil {
					t.Fatalf("batch %d: %v", k, err)
				}
				if want := l.StartBatch + j0 + k; s.Seq() != want {
					t.Fatalf("seq %d, want %d", s.Seq(), want)
				}
				if check(s.Tensor(0), s.Seq()) >= 0 {
					t.Fatalf("batch %d corrupt", s.Seq())
				}
				lapsSeen[s.lap] = true
				c.Release(s)
			}
			if !lapsSeen[lapMask] || !lapsSeen[0] {
				t.Errorf("laps seen %v: did not cross the wrap", lapsSeen)
			}
			c.Close()
		})
	}
}

func TestTruncatedStream(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	for k := 0; k < 2; k++ {
		w, err := p.Claim(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w.Publish()
	}
	p.Done()
	if _, err := p.Claim(context.Background()); err != io.EOF {
		t.Errorf("Claim after Done = %v, want io.EOF", err)
	}
	for k := 0; k < 2; k++ {
		s, err := c.Next(context.Background())
		if err != nil {
			t.Fatalf("batch %d published before Done: %v", k, err)
		}
		c.Release(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a wait ends in ctx's error
	defer cancel()
	_, err := c.Next(ctx)
	var te *TruncatedError
	if !errors.As(err, &te) || te.Batch != 2 || !strings.Contains(err.Error(), "all producers finished before batch 2") {
		t.Fatalf("Next after all producers are done = %v", err)
	}
}

func TestErrorRecord(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p1, _ := r.NewProducer(1)
	p2, err := r.NewProducer(1) // a second entry of this process
	if err != nil || p2.Entry() == p1.Entry() {
		t.Fatalf("second producer: entry %d, %v", p2.Entry(), err)
	}
	c, _ := r.NewConsumer()
	w, _ := p1.Claim(context.Background())
	w.Publish()

	long := strings.Repeat("é", 600) // 1200 bytes: truncated at a rune boundary
	p2.Fail(errors.New("reading chunk x/0.0.1: " + long))
	p1.Fail(errors.New("second error loses"))

	// A READY batch is delivered before the error.
	s, err := c.Next(context.Background())
	if err != nil {
		t.Fatalf("ready batch: %v", err)
	}
	c.Release(s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a wait ends in ctx's error
	defer cancel()
	_, err = c.Next(ctx)
	var pe *ProducerError
	if !errors.As(err, &pe) {
		t.Fatalf("Next = %v, want a *ProducerError", err)
	}
	if pe.Producer != p2.Entry()+1 || !strings.HasPrefix(pe.Text, "reading chunk x/0.0.1: é") || len(pe.Text) > MaxErrorText ||
		!strings.HasSuffix(pe.Text, "é") {
		t.Errorf("error record: producer %d, %d bytes: %.60q", pe.Producer, len(pe.Text), pe.Text)
	}
	st := r.Stats()
	for _, e := range st.Producers {
		if e.State != EntryFailed {
			t.Errorf("entry %d is %s, want FAILED", e.Entry, EntryStateName(e.State))
		}
	}
	if _, err := p1.Claim(context.Background()); !errors.As(err, &pe) {
		t.Errorf("Claim after Fail = %v", err)
	}
}

// TestErrorWakesWaitingConsumer: an error recorded while the consumer sleeps wakes it.
func TestErrorWakesWaitingConsumer(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	go func() {
		time.Sleep(30 * time.Millisecond)
		p.Fail(errors.New("boom"))
	}()
	_, err := c.Next(context.Background())
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Next = %v", err)
	}
}

func TestConsumerCloseStopsProducer(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(2)
	c, _ := r.NewConsumer()
	errc := make(chan error, 1)
	go func() { errc <- produce(context.Background(), p, 2, 0) }()
	s, err := c.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = s // held: Close releases it
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrConsumerClosed) {
			t.Fatalf("producer stopped with %v, want ErrConsumerClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("producer did not stop after the consumer closed")
	}
	if st := r.Stats(); st.BatchesRead != 1 {
		t.Errorf("Close did not release the held slot: batches_read %d", st.BatchesRead)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.Watch(ctx, WatchOptions{}); !errors.Is(err, ErrConsumerClosed) {
		t.Errorf("Watch = %v", err)
	}
}

func TestSecondConsumerRefused(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	if _, err := r.NewConsumer(); err != nil {
		t.Fatal(err)
	}
	_, err := r.NewConsumer()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("already has a consumer, pid %d", os.Getpid())) {
		t.Fatalf("second consumer: %v", err)
	}
}

func TestConsumerHoldsAllSlots(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go produce(ctx, p, 1, 0)
	a, _ := c.Next(ctx)
	b, _ := c.Next(ctx)
	if _, err := c.Next(ctx); err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("Next with every slot held = %v", err)
	}
	c.Release(b) // out of order release is fine
	c.Release(a)
	c.Release(a) // twice: no-op
	s, err := c.Next(ctx)
	if err != nil || s.Seq() != 2 {
		t.Fatalf("Next after releases: %v %v", s, err)
	}
}

func TestContextBoundsWaits(t *testing.T) {
	r := newHeapRing(t, streamLayout(1, 0, 1))
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) { // a Next deaf to ctx never returns
		t.Errorf("Next on an empty ring = %v", err)
	}
	w, _ := p.Claim(context.Background())
	w.Publish()
	// The ring (1 slot) is full: a Claim with a deadline gives up and, since it numbered a
	// batch it cannot make, records an error for the consumer.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := p.Claim(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Claim on a full ring = %v", err)
	}
	if st := r.Stats(); st.Error == nil || !strings.Contains(st.Error.Text, "stopped before batch 1") {
		t.Errorf("abandoned claim left no error record: %+v", st.Error)
	}
}

// TestPidReuse: a registry entry whose pid is alive but whose starttime differs is a dead
// producer (the pid was reused by another process).
func TestPidReuse(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	p.Done() // the real producer finished
	c, _ := r.NewConsumer()
	me, st, _ := selfIdentity()
	e := entryOff(5)
	*r.u64(e + regStarttime) = st + 12345 // someone else's starttime ...
	*r.u32(e + regPID) = uint32(me)       // ... on a pid that is alive (ours)
	*r.u32(e + regState) = EntryActive
	_, err := c.Next(context.Background())
	var de *ProducerDiedError
	if !errors.As(err, &de) || de.PID != uint32(me) || de.Entry != 5 {
		t.Fatalf("Next = %v, want producer pid %d died", err, me)
	}
	// A CLAIMING entry with pid 0 is a registration in progress, not a death.
	*r.u32(e + regState) = EntryClaiming
	*r.u32(e + regPID) = 0
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with a registering entry = %v, want to keep waiting", err)
	}
}

// fillRegistry registers this process in every entry but the creator's, which it marks taken.
func fillRegistry(t *testing.T, r *Ring) {
	t.Helper()
	for k := 1; k < MaxProducers; k++ {
		if _, _, err := r.register(1); err != nil {
			t.Fatalf("entry %d: %v", k, err)
		}
	}
	r.creatorTaken.Store(true)
}

func TestRegistryFull(t *testing.T) {
	r := newHeapRing(t, streamLayout(1, 0, 1))
	fillRegistry(t, r)
	if _, err := r.NewProducer(1); err == nil || !strings.Contains(err.Error(), "32 producer registry entries") {
		t.Fatalf("33rd producer: %v", err)
	}
}

// TestRegistryReusesReclaimed: with no FREE entry left, a new producer reuses a RECLAIMED one
// with the next generation (PROTOCOL.md 2.6), and its claims carry that generation; DONE and
// FAILED entries are never reused.
func TestRegistryReusesReclaimed(t *testing.T) {
	r := newHeapRing(t, streamLayout(4, 0, 1))
	fillRegistry(t, r)
	atomic.StoreUint64(r.entryWordOf(5), entryWord(EntryDone, 0, 1))
	atomic.StoreUint64(r.entryWordOf(6), entryWord(EntryFailed, 0, 1))
	atomic.StoreUint64(r.entryWordOf(9), entryWord(EntryReclaimed, 7, 4242))
	p, err := r.NewProducer(1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Entry() != 9 {
		t.Fatalf("new producer took entry %d, want the RECLAIMED entry 9", p.Entry())
	}
	if st, gen, pid := entryParts(atomic.LoadUint64(r.entryWordOf(9))); st != EntryActive || gen != 8 || int(pid) != os.Getpid() {
		t.Fatalf("entry 9 is %s, generation %d, pid %d; want ACTIVE, 8, %d", EntryStateName(st), gen, pid, os.Getpid())
	}
	w, err := p.Claim(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := atomic.LoadUint64(r.slotClaim(0)); c != 1<<claimHolderBits|8<<claimEntryBits|10 || !claimHeldBy(c, 9, 8) || claimHeldBy(c, 9, 7) {
		t.Fatalf("claim word %#x, want batch 0 held by entry 9 of generation 8", c)
	}
	w.Publish()
	if _, err := r.NewProducer(1); err == nil || !strings.Contains(err.Error(), "32 producer registry entries are in use") {
		t.Fatalf("producer with every entry in use: %v", err)
	}
}

func TestWatchParentDied(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A parent pid that is not ours: the watchdog reports the parent gone.
	if err := p.Watch(ctx, WatchOptions{ParentPID: os.Getppid() + 1}); !errors.Is(err, ErrParentDied) {
		t.Fatalf("Watch = %v", err)
	}
	if _, err := p.Claim(ctx); !errors.Is(err, ErrParentDied) {
		t.Fatalf("Claim after the watchdog stopped = %v", err)
	}
	// Heartbeat ticks while nothing is wrong.
	r2 := newHeapRing(t, streamLayout(2, 0, 1))
	p2, _ := r2.NewProducer(1)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel2()
	if err := p2.Watch(ctx2, WatchOptions{ParentPID: os.Getppid(), Interval: 10 * time.Millisecond}); err != context.DeadlineExceeded {
		t.Fatalf("Watch = %v", err)
	}
	if hb := r2.Stats().Producers[0].Heartbeat; hb < 2 { // >= 25 unloaded; the machine may be busy
		t.Errorf("heartbeat %d after 250 ms at 10 ms", hb)
	}
}

// TestDoneWaitsForClaims: Done while a claim is in progress keeps the entry ACTIVE until
// the claim is published (else the consumer would see a truncated stream).
func TestDoneWaitsForClaims(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	w, _ := p.Claim(context.Background())
	p.Done()
	if st := r.Stats().Producers[0].State; st != EntryActive {
		t.Fatalf("entry %s with a claim in progress", EntryStateName(st))
	}
	w.Publish()
	if st := r.Stats().Producers[0].State; st != EntryDone {
		t.Fatalf("entry %s after the last publish", EntryStateName(st))
	}
	if _, err := p.Claim(context.Background()); err != io.EOF {
		t.Fatalf("Claim after Done = %v", err)
	}
}

func TestSetParentDeathSignal(t *testing.T) {
	if err := SetParentDeathSignal(0, os.Getppid()); err != nil {
		t.Fatal(err)
	}
	if err := SetParentDeathSignal(0, os.Getppid()+1); !errors.Is(err, ErrParentDied) {
		t.Fatalf("wrong parent: %v", err)
	}
}

func TestPublishTwice(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	w, _ := p.Claim(context.Background())
	if err := w.Publish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(); err == nil {
		t.Fatal("second Publish succeeded")
	}
}

// TestAbandon: a slot that cannot be filled records the error.
func TestAbandon(t *testing.T) {
	r := newHeapRing(t, streamLayout(2, 0, 1))
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	w, _ := p.Claim(context.Background())
	w.Abandon(errors.New("chunk missing"))
	_, err := c.Next(context.Background())
	if err == nil || !strings.Contains(err.Error(), "batch 0: chunk missing") {
		t.Fatalf("Next = %v", err)
	}
}

// TestSleepersAreWokenByTheirWake: a consumer waiting for a batch sleeps on the slot's futex and
// a producer waiting on a full ring on its batch's grant word, each counted among that word's
// waiters (which is what makes the publish and the release issue FUTEX_WAKE), and the publish
// and the release end their sleep. How soon they wake is benchmarks' business (ring_bench.py); it is logged here.
func TestSleepersAreWokenByTheirWake(t *testing.T) {
	_, r := newMemfdRing(t, streamLayout(1, 0, 1))
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a sleep nothing wakes ends in ctx's error
	defer cancel()
	asleep := func(who string, waiters *uint32) {
		t.Helper()
		for atomic.LoadUint32(waiters) == 0 {
			if ctx.Err() != nil {
				t.Fatalf("the %s never slept on the slot's futex", who)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	var consumerDelay, producerDelay []time.Duration
	for k := 0; k < 15; k++ {
		got := make(chan error, 1)
		go func() {
			s, err := c.Next(ctx)
			if err == nil {
				c.Release(s)
			}
			got <- err
		}()
		asleep("consumer", r.slotWaiters(0))
		w, err := p.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		w.Publish()
		if err := <-got; err != nil {
			t.Fatalf("round %d: the consumer's Next = %v", k, err)
		}
		consumerDelay = append(consumerDelay, time.Since(at))

		// Fill the single slot again so that the producer sleeps in Claim.
		w, err = p.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Publish()
		claimed := make(chan error, 1)
		go func() {
			w, err := p.Claim(ctx) // waits for the release below
			if err == nil {
				w.Publish()
			}
			claimed <- err
		}()
		asleep("producer", r.grantWaiters(0)) // its batch's grant word (PROTOCOL.md 3.2)
		s, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		c.Release(s)
		if err := <-claimed; err != nil {
			t.Fatalf("round %d: the producer's Claim = %v", k, err)
		}
		producerDelay = append(producerDelay, time.Since(released))
		s, err = c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Release(s)
	}
	slices.Sort(consumerDelay)
	slices.Sort(producerDelay)
	t.Logf("median wake-up: consumer %v, producer %v", consumerDelay[len(consumerDelay)/2], producerDelay[len(producerDelay)/2])
	for i := uint64(0); i < r.slots; i++ {
		if n := atomic.LoadUint32(r.slotWaiters(i)); n != 0 {
			t.Errorf("slot %d: waiters %d after all waits ended", i, n)
		}
	}
}
