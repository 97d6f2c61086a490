package ring

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobatch/gobatch/shm"
)

// Cross-process tests re-run the test binary as a child with GOBATCH_RING_ROLE set; the
// child runs one role of childMain instead of the tests.

func TestMain(m *testing.M) {
	if role := os.Getenv("GOBATCH_RING_ROLE"); role != "" {
		os.Exit(childMain(role))
	}
	os.Exit(m.Run())
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func childLayout() Layout {
	return streamLayout(envInt("SLOTS", 4), uint64(envInt("TOTAL", 0)), envInt("WORDS", 16))
}

func childMain(role string) int {
	shm.Dir = os.Getenv("GOBATCH_SHM_DIR")
	name := os.Getenv("RING")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "child %s: %s\n", role, fmt.Sprintf(format, a...))
		return 1
	}
	ctx := context.Background()
	var r *Ring
	switch role {
	case "create-produce":
		l := childLayout()
		seg, err := shm.Create(name, l.SegmentBytes())
		if err != nil {
			return fail("%v", err)
		}
		if r, err = Create(seg.Bytes(), l, true); err != nil {
			return fail("%v", err)
		}
	case "join-produce", "consume":
		_, rr, err := AttachNamed(ctx, name, true)
		if err != nil {
			return fail("%v", err)
		}
		r = rr
	case "consume-fd":
		seg, err := shm.FromFD(3, 0)
		if err != nil {
			return fail("%v", err)
		}
		if r, err = Open(seg.Bytes()); err != nil {
			return fail("%v", err)
		}
	default:
		return fail("unknown role")
	}
	if strings.HasPrefix(role, "consume") {
		c, err := r.NewConsumer()
		if err != nil {
			return fail("%v", err)
		}
		fmt.Println("ready")
		n := envInt("READ", -1)
		for k := 0; n < 0 || k < n; k++ {
			s, err := c.Next(ctx)
			if err == io.EOF {
				return 0
			}
			if err != nil {
				return fail("%v", err)
			}
			if check(s.Tensor(0), s.Seq()) >= 0 {
				return fail("batch %d corrupt", s.Seq())
			}
			c.Release(s)
		}
		fmt.Println("read")
		if os.Getenv("HOLD") != "" {
			select {} // wait to be killed
		}
		c.Close()
		return 0
	}
	if role == "join-produce" {
		if err := r.Compatible(childLayout()); err != nil {
			return fail("%v", err)
		}
	}
	p, err := r.NewProducer(envInt("WRITERS", 1))
	if err != nil {
		return fail("%v", err)
	}
	fmt.Println("ready")
	if n := envInt("HANG_AFTER", -1); n >= 0 {
		for k := 0; k < n; k++ {
			w, err := p.Claim(ctx)
			if err != nil {
				return fail("%v", err)
			}
			fill(w.Tensor(0), w.Seq())
			w.Publish()
		}
		if _, err := p.Claim(ctx); err != nil { // claimed, never published
			return fail("%v", err)
		}
		for { // until killed (a sleeper, so that the runtime sees no deadlock in a process without a watchdog)
			time.Sleep(time.Hour)
		}
	}
	if err := produce(ctx, p, envInt("WRITERS", 1), time.Duration(envInt("DELAY_US", 0))*time.Microsecond); err != nil {
		return fail("%v", err)
	}
	return 0
}

type child struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
}

// startChild starts the test binary in role with env (KEY=VALUE) and waits for its "ready".
func startChild(t *testing.T, role string, env []string, files ...*os.File) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "GOBATCH_RING_ROLE="+role, "GOBATCH_SHM_DIR="+shm.Dir)...)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = files
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: bufio.NewScanner(out)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c.expect(t, "ready")
	return c
}

func (c *child) expect(t *testing.T, line string) {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- c.lines.Scan() && c.lines.Text() == line }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("child %v did not print %q", c.cmd.Args, line)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("child did not print %q in time", line)
	}
}

func (c *child) wait(t *testing.T) {
	t.Helper()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child %s: %v", c.cmd.Env[len(c.cmd.Env)-2], err)
	}
}

// killLater SIGKILLs the child after 100 ms and sends the time of the kill.
func killLater(ch *child) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		at <- time.Now()
		ch.cmd.Process.Signal(syscall.SIGKILL)
	}()
	return at
}

func useShmDir(t *testing.T) string {
	t.Helper()
	old := shm.Dir
	shm.Dir = t.TempDir()
	t.Cleanup(func() { shm.Dir = old })
	return fmt.Sprintf("t%d", time.Now().UnixNano()%1e9)
}

// TestCrossProcessStream: the creator and producer in one process, the consumer in another.
func TestCrossProcessStream(t *testing.T) {
	name := useShmDir(t)
	ch := startChild(t, "create-produce", []string{"RING=" + name, "TOTAL=3000", "WRITERS=3", "SLOTS=4", "WORDS=512"})
	seg, r, err := AttachNamed(context.Background(), name, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	consumeAll(t, c, 0, 3000)
	ch.wait(t)
	st := r.Stats()
	if st.BatchesWritten != 3000 || st.Producers[0].State != EntryDone || st.CreatorAlive {
		t.Errorf("after the child exited: %s", st)
	}
}

// TestProducerKilled: SIGKILL of the only producer (holding a claimed slot) makes the
// consumer's Next fail with a *ProducerDiedError within about a second.
func TestProducerKilled(t *testing.T) {
	name := useShmDir(t)
	ch := startChild(t, "create-produce", []string{"RING=" + name, "HANG_AFTER=3", "SLOTS=4"})
	seg, r, err := AttachNamed(context.Background(), name, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ {
		s, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Release(s)
	}
	killed := killLater(ch) // the consumer is asleep in Next by then
	_, err = c.Next(context.Background())
	d := time.Since(<-killed)
	var de *ProducerDiedError
	if !errors.As(err, &de) || int(de.PID) != ch.cmd.Process.Pid || de.Batch != 3 {
		t.Fatalf("Next after SIGKILL of the producer = %v", err)
	}
	// How soon (about the 100 ms wait slice) is measured by the fault trials (make faults).
	t.Logf("producer death noticed %v after SIGKILL: %v", d, err)
}

// TestConsumerKilled: SIGKILL of the consumer (a child attached through an inherited memfd)
// makes a producer blocked on the full ring return ErrConsumerGone, and the watchdog too.
func TestConsumerKilled(t *testing.T) {
	l := streamLayout(2, 0, 16)
	seg, r := newMemfdRing(t, l)
	p, _ := r.NewProducer(1)
	f, err := seg.DupFile()
	if err != nil {
		t.Fatal(err)
	}
	ch := startChild(t, "consume-fd", []string{"READ=2", "HOLD=1"}, f)
	f.Close()
	ctx := context.Background()
	for k := 0; k < 4; k++ { // 2 read by the child, 2 fill the ring
		w, err := p.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fill(w.Tensor(0), w.Seq())
		w.Publish()
	}
	ch.expect(t, "read")
	watch := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() { watch <- p.Watch(wctx, WatchOptions{}) }()
	killed := killLater(ch)
	_, err = p.Claim(ctx) // the ring is full: waits
	d := time.Since(<-killed)
	if !errors.Is(err, ErrConsumerGone) {
		t.Fatalf("Claim after SIGKILL of the consumer = %v", err)
	}
	t.Logf("consumer death noticed %v after SIGKILL", d) // how soon: the fault trials (make faults)
	if err := <-watch; !errors.Is(err, ErrConsumerGone) {
		t.Errorf("Watch = %v", err)
	}
	if st := r.Stats(); st.ConsumerState != ConsumerAttached || st.ConsumerAlive || st.Error != nil {
		t.Errorf("stats after consumer death: %s", st)
	}
	t.Logf("consumer death noticed %v after SIGKILL", d)
}

// TestSeveralProducerProcesses: three producer processes join the creator's ring; the
// consumer gets every batch once, in order.
func TestSeveralProducerProcesses(t *testing.T) {
	name := useShmDir(t)
	const total = 3000
	env := []string{"RING=" + name, "TOTAL=3000", "SLOTS=8", "WORDS=64"}
	l := streamLayout(8, total, 64)
	seg, err := shm.Create(name, l.SegmentBytes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	r, err := Create(seg.Bytes(), l, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	var kids []*child
	for k := 0; k < 3; k++ {
		kids = append(kids, startChild(t, "join-produce", append(env, "WRITERS=2", "DELAY_US=300")))
	}
	p, _ := r.NewProducer(1)
	errc := startProducing(t, p, c, 1, 300*time.Microsecond)
	consumeAll(t, c, 0, total)
	for _, k := range kids {
		k.wait(t)
	}
	// The consumer may read the last batch before this process's producer has stored DONE:
	// wait for it to return (an event, not a time).
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if len(st.Producers) != 4 {
		t.Fatalf("%d producer entries, want 4", len(st.Producers))
	}
	var sum uint64
	for _, e := range st.Producers {
		sum += e.Batches
		if e.State != EntryDone || e.Batches == 0 {
			t.Errorf("entry %d: %s with %d batches", e.Entry, EntryStateName(e.State), e.Batches)
		}
	}
	if sum != total {
		t.Errorf("entries published %d batches, want %d", sum, total)
	}
	// A producer with another configuration is refused.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOBATCH_RING_ROLE=join-produce", "GOBATCH_SHM_DIR="+shm.Dir, "RING="+name, "TOTAL=3000", "SLOTS=8", "WORDS=65")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tensor 0") {
		t.Errorf("mismatched producer: %v: %s", err, out)
	}
}
