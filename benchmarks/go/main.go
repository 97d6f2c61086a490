// Command ringbench measures the gobatch ring (package ring) across two processes: the
// consumer in this process, the producer in a child (this binary re-executed) that shares
// the ring through an inherited memfd, as `shmloader run --memfd` does.
//
//	go run ./benchmarks/go            # all benchmarks, markdown tables on stdout
//	go run ./benchmarks/go -quick     # fewer samples
//	go run ./benchmarks/go -only latency|throughput
//
// Latency: the producer publishes one batch, then idles (gap) so that the consumer is asleep
// in FUTEX_WAIT (or spinning, with -spin) when the next batch arrives; the sample is the
// consumer's CLOCK_MONOTONIC when Next returns minus the slot's publish_ns. The payload fill
// happens before publish_ns, so 30 MB batches measure the same handoff on a large slot. The
// baseline is the same handoff through one bare futex word in a shared page (no ring).
//
// Throughput: the producer's writer goroutines claim slots and memcpy a prepared 30 MB batch
// into them as fast as the ring allows; the consumer releases each batch without reading it.
// The roofline is the same memcpy into a mapped memfd without the ring, measured in this run
// with the same number of goroutines, in a child process of its own (ring and roofline runs
// alternate). RINGBENCH_DEBUG=1 prints the ring's producer busy and
// wait times of every throughput run on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
	"golang.org/x/sys/unix"
)

const childEnv = "GOBATCH_RINGBENCH_CHILD"

// big is the reference workload's batch: 32 examples of 19x12x32x32 float32 (29.9 MB).
func big() ring.Tensor {
	return ring.Tensor{Name: "x", DType: ring.Float32, Shape: []int{32, 19, 12, 32, 32}}
}

func empty() ring.Tensor { return ring.Tensor{Name: "x", DType: ring.Uint8, Shape: []int{1, 8}} }

type params struct {
	Kind    string // "latency" or "throughput"
	Big     bool
	N       int
	Writers int
	GapUs   int
	Slots   int
}

func (p params) layout() ring.Layout {
	t := empty()
	if p.Big {
		t = big()
	}
	return ring.Layout{Slots: p.Slots, TotalBatches: uint64(p.N), BatchSize: t.Shape[0], Tensors: []ring.Tensor{t}}
}

func main() {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(child(v))
	}
	quick := flag.Bool("quick", false, "fewer samples")
	only := flag.String("only", "", "latency or throughput")
	spin := flag.Int("spin", 200000, "state loads before sleeping, for the spin rows of the latency table")
	flag.Parse()
	scale := 1
	if *quick {
		scale = 5
	}
	fmt.Printf("ringbench: %s, GOMAXPROCS %d, %d CPUs, %s\n\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), loadavg())
	if *only == "" || *only == "latency" {
		fmt.Println("Cross-process handoff latency (publish_ns to the consumer's Next returning), microseconds")
		fmt.Println()
		fmt.Println("| batch | consumer wait | samples | p50 | p90 | p99 | p99.9 | max |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		rows := []struct {
			name string
			big  bool
			n    int
			gap  int
			spin int
		}{
			{"8 B", false, 20000 / scale, 300, 0},
			{"8 B", false, 20000 / scale, 50, *spin},
			{"29.9 MB", true, 1000 / scale, 300, 0},
			{"29.9 MB", true, 1000 / scale, 50, *spin},
		}
		// The baseline and the 8 B futex row are measured in 4 alternating chunks, so that a
		// busy spell of the machine hits both alike.
		var base, small []float64
		for k := 0; k < 4; k++ {
			b, err := bareFutex(rows[0].n/4, rows[0].gap)
			if err != nil {
				fmt.Fprintln(os.Stderr, "latency baseline:", err)
				os.Exit(1)
			}
			l, err := latency(params{Kind: "latency", N: rows[0].n / 4, GapUs: rows[0].gap, Slots: 4, Writers: 1}, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, "latency:", err)
				os.Exit(1)
			}
			base, small = append(base, b...), append(small, l...)
		}
		fmt.Printf("| baseline: bare futex word, no ring | futex | %d | %s |\n", len(base), percentiles(base))
		for i, r := range rows {
			if i == 0 {
				fmt.Printf("| %s | futex | %d | %s |\n", r.name, len(small), percentiles(small))
				fmt.Printf("| ring / baseline (p50, p99) | | | %.2f | | %.2f | | |\n", median(small)/median(base), quantile(small, 0.99)/quantile(base, 0.99))
				continue
			}
			lat, err := latency(params{Kind: "latency", Big: r.big, N: r.n, GapUs: r.gap, Slots: 4, Writers: 1}, r.spin)
			if err != nil {
				fmt.Fprintln(os.Stderr, "latency:", err)
				os.Exit(1)
			}
			wait := "futex"
			if r.spin > 0 {
				wait = fmt.Sprintf("spin %d loads, then futex", r.spin)
			}
			fmt.Printf("| %s | %s | %d | %s |\n", r.name, wait, len(lat), percentiles(lat))
		}
		fmt.Println()
	}
	if *only == "" || *only == "throughput" {
		reps := 7
		if *quick {
			reps = 3
		}
		fmt.Printf("Ring throughput, producer process memcpy into slots, consumer releases unread (median of %d runs, ring and roofline alternated)\n", reps)
		fmt.Println()
		fmt.Println("Median and best run; the machine is shared, so compare the ratio of runs made side by side.")
		fmt.Println()
		fmt.Println("| batch | slots | writers | batches/run | batches/s (median, best) | GB/s (median, best) | memcpy roofline GB/s (median, best) | ring / roofline (median, best) |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for _, tc := range []struct {
			big     bool
			n       int
			slots   int
			writers int
		}{{true, 200, 4, 1}, {true, 200, 4, 2}, {false, 200000, 8, 1}, {false, 200000, 8, 4}} {
			p := params{Kind: "throughput", Big: tc.big, N: tc.n / scale, Writers: tc.writers, Slots: tc.slots}
			var bs, gs, roofs []float64
			for k := 0; k < reps; k++ {
				bps, gbs, err := throughput(p)
				if err != nil {
					fmt.Fprintln(os.Stderr, "throughput:", err)
					os.Exit(1)
				}
				bs, gs = append(bs, bps), append(gs, gbs)
				if tc.big {
					roofs = append(roofs, roofline(p.layout().SlotBytes(), tc.writers, p.N))
				}
			}
			name, roof, ratio := "8 B", "-", "-"
			if tc.big {
				name = "29.9 MB"
				roof = fmt.Sprintf("%.2f, %.2f", median(roofs), slices.Max(roofs))
				ratio = fmt.Sprintf("%.2f, %.2f", median(gs)/median(roofs), slices.Max(gs)/slices.Max(roofs))
			}
			fmt.Printf("| %s | %d | %d | %d | %.0f, %.0f | %.3f, %.3f | %s | %s |\n", name, tc.slots, tc.writers, p.N,
				median(bs), slices.Max(bs), median(gs), slices.Max(gs), roof, ratio)
		}
		fmt.Println()
	}
	fmt.Printf("(%s at the end)\n", loadavg())
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	f := strings.Fields(string(b))
	return "load average " + strings.Join(f[:3], " ")
}

// start creates the memfd ring and the producer child.
func start(p params) (*shm.Segment, *ring.Ring, *exec.Cmd, error) {
	l := p.layout()
	seg, err := shm.CreateMemfd(l.SegmentBytes())
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := ring.Create(seg.Bytes(), l, false)
	if err != nil {
		seg.Close()
		return nil, nil, nil, err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%v,%d,%d,%d,%d", childEnv, p.Kind, p.Big, p.N, p.Writers, p.GapUs, p.Slots))
	f, err := seg.DupFile()
	if err != nil {
		seg.Close()
		return nil, nil, nil, err
	}
	defer f.Close()
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		seg.Close()
		return nil, nil, nil, err
	}
	return seg, r, cmd, nil
}

func latency(p params, spin int) ([]float64, error) {
	seg, r, cmd, err := start(p)
	if err != nil {
		return nil, err
	}
	defer seg.Close()
	r.Spin = spin
	c, err := r.NewConsumer()
	if err != nil {
		return nil, err
	}
	lat := make([]float64, 0, p.N)
	for {
		s, err := c.Next(context.Background())
		now := ring.MonotonicNs()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		lat = append(lat, float64(now-s.PublishNs())/1e3)
		c.Release(s)
	}
	c.Close()
	return lat, cmd.Wait()
}

func throughput(p params) (batchesPerS, gbPerS float64, err error) {
	seg, r, cmd, err := start(p)
	if err != nil {
		return 0, 0, err
	}
	defer seg.Close()
	c, err := r.NewConsumer()
	if err != nil {
		return 0, 0, err
	}
	// Time from batch `slots` on: start-up and the slots filled before the consumer came are
	// not counted.
	var t0 time.Time
	n := 0
	for {
		s, err := c.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		n++
		if n == p.Slots {
			t0 = time.Now()
		}
		c.Release(s)
	}
	d := time.Since(t0).Seconds()
	if os.Getenv("RINGBENCH_DEBUG") != "" {
		st := r.Stats()
		fmt.Fprintf(os.Stderr, "n %d d %.3f s busy %.3f s wait %.3f s written %d\n", n, d, float64(st.ProducerBusyNs)/1e9, float64(st.ProducerWaitNs)/1e9, st.BatchesWritten)
	}
	c.Close()
	if err := cmd.Wait(); err != nil {
		return 0, 0, err
	}
	b := float64(n-p.Slots) / d
	return b, b * float64(r.SlotBytes()) / 1e9, nil
}

// roofline copies the batch n times into a mapped memfd region with w goroutines, without
// the ring, in a fresh child process like the ring's producer (so both are measured alike).
func roofline(size int64, w, n int) float64 {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=roofline,%d,%d,%d", childEnv, size, w, n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "roofline:", err)
		return 0
	}
	v, _ := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	return v
}

// rooflineChild makes the source and 4 destination slots once, warms them, and times n copies.
func rooflineChild(size int64, w, n int) int {
	seg, err := shm.CreateMemfd(size * 4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roofline:", err)
		return 1
	}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for k := int64(0); k < 4; k++ {
		copy(seg.Bytes()[k*size:][:size], src)
	}
	var wg sync.WaitGroup
	t0 := time.Now()
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := g; k < n; k += w {
				copy(seg.Bytes()[int64(k%4)*size:][:size], src)
			}
		}(g)
	}
	wg.Wait()
	fmt.Println(float64(n) * float64(size) / time.Since(t0).Seconds() / 1e9)
	return 0
}

func quantile(v []float64, p float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[min(len(v)-1, int(p*float64(len(v))))]
}

// bareFutex is the latency baseline: the same cross-process handoff with one futex word and
// a timestamp in a shared memfd page, without the ring protocol (no claim, no slot states,
// no liveness checks). The child stores the timestamp and the counter, then wakes.
func bareFutex(n, gapUs int) ([]float64, error) {
	seg, err := shm.CreateMemfd(4096)
	if err != nil {
		return nil, err
	}
	defer seg.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=futex,%d,%d", childEnv, n, gapUs))
	f, err := seg.DupFile()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	word, waiters, ack, stamp := bareWords(seg.Bytes())
	lat := make([]float64, 0, n)
	for k := uint32(1); k <= uint32(n); k++ {
		for atomic.LoadUint32(word) != k {
			atomic.AddUint32(waiters, 1)
			if v := atomic.LoadUint32(word); v != k {
				ts := unix.NsecToTimespec(int64(100 * time.Millisecond))
				unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), 0, uintptr(v), uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			atomic.AddUint32(waiters, ^uint32(0))
		}
		now := ring.MonotonicNs()
		lat = append(lat, float64(now-atomic.LoadUint64(stamp))/1e3)
		atomic.StoreUint32(ack, k)
	}
	return lat, cmd.Wait()
}

func bareWords(b []byte) (word, waiters, ack *uint32, stamp *uint64) {
	return (*uint32)(unsafe.Pointer(&b[0])), (*uint32)(unsafe.Pointer(&b[4])), (*uint32)(unsafe.Pointer(&b[64])), (*uint64)(unsafe.Pointer(&b[8]))
}

func bareFutexChild(n, gapUs int) int {
	seg, err := shm.FromFD(3, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	word, waiters, ack, stamp := bareWords(seg.Bytes())
	for k := uint32(1); k <= uint32(n); k++ {
		for atomic.LoadUint32(ack) != k-1 { // the parent took the previous one
			time.Sleep(10 * time.Microsecond)
		}
		time.Sleep(time.Duration(gapUs) * time.Microsecond)
		atomic.StoreUint64(stamp, ring.MonotonicNs())
		atomic.StoreUint32(word, k)
		if atomic.LoadUint32(waiters) != 0 {
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), 1, 1<<31-1, 0, 0, 0)
		}
	}
	return 0
}

func percentiles(v []float64) string {
	slices.Sort(v)
	q := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return fmt.Sprintf("%.1f | %.1f | %.1f | %.1f | %.1f", q(0.5), q(0.9), q(0.99), q(0.999), v[len(v)-1])
}

// child is the producer process.
func child(spec string) int {
	f := strings.Split(spec, ",")
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if f[0] == "futex" {
		return bareFutexChild(atoi(f[1]), atoi(f[2]))
	}
	if f[0] == "roofline" {
		return rooflineChild(int64(atoi(f[1])), atoi(f[2]), atoi(f[3]))
	}
	p := params{Kind: f[0], Big: f[1] == "true", N: atoi(f[2]), Writers: atoi(f[3]), GapUs: atoi(f[4]), Slots: atoi(f[5])}
	seg, err := shm.FromFD(3, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	r, err := ring.Open(seg.Bytes())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	prod, err := r.NewProducer(p.Writers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	src := make([]byte, r.SlotBytes())
	for i := range src {
		src[i] = byte(i * 7)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, p.Writers)
	for g := 0; g < p.Writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				w, err := prod.Claim(ctx)
				if err != nil {
					if !errors.Is(err, io.EOF) {
						errc <- err
					}
					return
				}
				copy(w.Payload(), src)
				if err := w.Publish(); err != nil {
					errc <- err
					return
				}
				if p.GapUs > 0 {
					time.Sleep(time.Duration(p.GapUs) * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}
