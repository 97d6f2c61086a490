package main

// End-to-end tests of the shmloader binary: TestMain builds it, the tests start it as a
// child and consume its ring with the Go consumer (package ring). Named rings live in a private
// directory under /dev/shm (GOBATCH_SHM_DIR), so the tests neither see nor touch anyone
// else's segments.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/internal/synthcheck"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

var binPath string // the shmloader binary under test

// helperEnv makes the test binary act as a consumer process (see helperConsumer).
const helperEnv = "SHMLOADER_TEST_CONSUMER"

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(helperConsumer(name))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "shmloader-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "shmloader")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build shmloader: %v\n%s", err, out)
		return 1
	}
	sweepTestDirs()
	shmDir, err := os.MkdirTemp("/dev/shm", "shmloader-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(shmDir)
	shm.Dir = shmDir
	os.Setenv("GOBATCH_SHM_DIR", shmDir)
	code := m.Run()
	if left, _ := os.ReadDir(shmDir); len(left) > 0 && code == 0 {
		for _, e := range left {
			fmt.Fprintf(os.Stderr, "leftover segment %s\n", e.Name())
		}
		code = 1
	}
	return code
}

// sweepTestDirs removes empty test directories that a crashed test run left in /dev/shm.
func sweepTestDirs() {
	dirs, _ := filepath.Glob("/dev/shm/shmloader-test-*")
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > 10*time.Minute {
			os.Remove(d) // fails, harmlessly, unless empty
		}
	}
}

// proc is a running shmloader.
type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(binPath, args...))
}

func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit status, failing the test if the process runs longer than d.
// exitWait bounds a wait for a process that must exit: a hang detector, far beyond any exit
// a test expects (seconds under the race detector on a loaded machine), not a time budget.
const exitWait = 2 * time.Minute

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(exitWait):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("shmloader %v did not exit within %v; stderr:\n%s", p.cmd.Args[1:], exitWait, p.stderr.String())
		return -1
	}
}

func (p *proc) expectExit(t *testing.T, want int) {
	t.Helper()
	if code := p.wait(t); code != want {
		t.Fatalf("shmloader %v exited %d, want %d; stderr:\n%s", p.cmd.Args[1:], code, want, p.stderr.String())
	}
}

func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ringName is a name unique to this test.
func ringName(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
}

// attach waits for the named ring to appear and attaches to it (without a consumer).
func attach(t *testing.T, name string, p *proc) (*shm.Segment, *ring.Ring) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		seg, r, err := ring.AttachNamed(context.Background(), name, true)
		if err == nil {
			t.Cleanup(func() { seg.Close() })
			return seg, r
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("attach %s: %v", name, err)
		}
		select {
		case <-p.done:
			t.Fatalf("shmloader exited %d before creating ring %s; stderr:\n%s", p.code, name, p.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func consume(t *testing.T, name string, p *proc) (*ring.Ring, *ring.Consumer) {
	t.Helper()
	_, r := attach(t, name, p)
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// checkBatch verifies every element of every tensor of a batch against the synthetic contract.
func checkBatch(r *ring.Ring, s *ring.ReadSlot) error {
	l := r.Layout()
	for i, tn := range l.Tensors {
		elems := 1
		for _, d := range tn.Shape[1:] {
			elems *= d
		}
		if err := synthcheck.Check(s.Tensor(i), tn.DType, tn.Shape[0], elems, s.Seq()); err != nil {
			return fmt.Errorf("tensor %s: %w", tn.Name, err)
		}
	}
	return nil
}

// readAll consumes the rest of a bounded stream, checking every batch, and returns the
// sequence numbers seen and the producer entries that filled them.
func readAll(t *testing.T, r *ring.Ring, c *ring.Consumer) (seqs []uint64, owners map[int]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	owners = map[int]int{}
	for {
		s, err := c.Next(ctx)
		if err == io.EOF {
			return seqs, owners
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", len(seqs), err)
		}
		if err := checkBatch(r, s); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s.Seq())
		owners[s.Owner()]++
		c.Release(s)
	}
}

func noSegment(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Stat(shm.Path(name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("segment %s still exists (%v)", shm.Path(name), err)
	}
}

// allDTypes has one source of every synthetic dtype, with assorted shapes.
func allDTypes(size, batches int, extra string) string {
	return fmt.Sprintf(`[batch]
size = %d
batches = %d
[ring]
slots = 3
[[source]]
name = "f32"
kind = "synthetic"
shape = [3, 5]
dtype = "float32"
%s
[[source]]
name = "f64"
kind = "synthetic"
shape = [2]
dtype = "float64"
[[source]]
name = "i32"
kind = "synthetic"
shape = [4, 1, 3]
dtype = "int32"
[[source]]
name = "i64"
kind = "synthetic"
shape = []
dtype = "int64"
[[source]]
name = "u8"
kind = "synthetic"
shape = [300]
dtype = "uint8"
`, size, batches, extra)
}

func TestRunNamedAllDTypes(t *testing.T) {
	// The second case starts near 2^24/5 so that e mod 2^24 wraps inside the stream.
	for _, tc := range []struct {
		name           string
		start, batches uint64
	}{{"from0", 0, 12}, {"resume-across-2_24", 3355440, 3355450}} {
		t.Run(tc.name, func(t *testing.T) {
			name := ringName(t)
			cfg := writeConfig(t, "c.toml", allDTypes(5, int(tc.batches), ""))
			p := start(t, "run", "--config", cfg, "--ring", name, "--readers", "3", "--start", fmt.Sprint(tc.start))
			r, c := consume(t, name, p)
			l := r.Layout()
			if l.StartBatch != tc.start || l.TotalBatches != tc.batches-tc.start || l.BatchSize != 5 || len(l.Tensors) != 5 {
				t.Fatalf("layout %+v", l)
			}
			if got := fmt.Sprint(l.Tensors[2].Shape); got != "[5 4 1 3]" || l.Tensors[3].DType != ring.Int64 {
				t.Fatalf("tensors %+v", l.Tensors)
			}
			seqs, _ := readAll(t, r, c)
			if uint64(len(seqs)) != tc.batches-tc.start || seqs[0] != tc.start || seqs[len(seqs)-1] != tc.batches-1 {
				t.Fatalf("read batches %v", seqs)
			}
			c.Close()
			p.expectExit(t, exitOK)
			noSegment(t, name)
		})
	}
}

func TestRunJSONConfigAndMemfd(t *testing.T) {
	cfg := writeConfig(t, "c.json", `{"batch": {"size": 4, "batches": 9},
 "source": [{"name": "x", "kind": "synthetic", "shape": [1000], "dtype": "float32"}]}`)
	fd, err := unix.MemfdCreate("gobatch", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	mf := os.NewFile(uintptr(fd), "memfd")
	defer mf.Close()
	cmd := exec.Command(binPath, "run", "--config", cfg, "--memfd", "3")
	cmd.ExtraFiles = []*os.File{mf}
	p := startCmd(t, cmd)
	// The child reserves the size; map it once it has.
	var st unix.Stat_t
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if err := unix.Fstat(fd, &st); err != nil || st.Size > 0 || time.Now().After(deadline) {
			break
		}
	}
	dup, _ := unix.Dup(fd)
	seg, err := shm.FromFD(dup, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	r, err := ring.Open(seg.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if r.Named() {
		t.Fatal("memfd ring marked named")
	}
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	seqs, _ := readAll(t, r, c)
	if len(seqs) != 9 {
		t.Fatalf("read %v", seqs)
	}
	c.Close()
	p.expectExit(t, exitOK)
}

// The creator of a memfd ring exits when its parent dies (PR_SET_PDEATHSIG plus getppid).
func TestRunMemfdParentDies(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, "delay_ms = 5"))
	fd, err := unix.MemfdCreate("gobatch", 0)
	if err != nil {
		t.Fatal(err)
	}
	mf := os.NewFile(uintptr(fd), "memfd")
	defer mf.Close()
	// sh is the parent: it starts shmloader, prints its pid and waits.
	sh := exec.Command("sh", "-c", `"$0" run --config "$1" --memfd 3 & echo $!; wait`, binPath, cfg)
	sh.ExtraFiles = []*os.File{mf}
	out, _ := sh.StdoutPipe()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		sh.Process.Kill()
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Size > 0 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	if !running(pid) {
		t.Fatal("shmloader is not running")
	}
	sh.Process.Kill()
	sh.Wait()
	for deadline := time.Now().Add(3 * time.Second); running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			t.Fatal("shmloader still running 3 s after its parent died")
		}
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func TestRunBadConfig(t *testing.T) {
	for _, tc := range []struct {
		file, text string
		want       []string
	}{
		{"bad.toml", "[batch]\nsize = 4\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [2]\ndtype = \"float16\"\n",
			[]string{"bad.toml:7: source[0].dtype: unknown dtype \"float16\""}},
		{"bad.toml", "[batch]\nsize = 4\nsizes = 3\n", []string{"bad.toml:3: batch.sizes: unknown key", "source: missing"}},
		{"bad.json", `{"batch": {"size": "4"}, "source": [{"name": "x", "kind": "synthetic", "shape": [2], "dtype": "uint8", "delay_ms": -1}]}`,
			[]string{"bad.json:1: batch.size: expected an integer", "source[0].delay_ms: -1 is out of range"}},
	} {
		cfg := writeConfig(t, tc.file, tc.text)
		p := start(t, "run", "--config", cfg, "--ring", ringName(t))
		p.expectExit(t, exitUsage)
		for _, w := range tc.want {
			if !strings.Contains(p.stderr.String(), w) {
				t.Errorf("stderr lacks %q:\n%s", w, p.stderr.String())
			}
		}
		noSegment(t, ringName(t))
	}
	good := writeConfig(t, "good.toml", allDTypes(2, 10, ""))
	for _, args := range [][]string{
		{"run", "--ring", "x"},                                   // no config
		{"run", "--config", good},                                // neither ring nor memfd
		{"run", "--config", good, "--ring", "x", "--memfd", "3"}, // both
		{"run", "--config", good, "--ring", "a/b"},               // bad name
		{"run", "--config", good, "--ring", "x", "--readers", "0"},
		{"run", "--config", good, "--ring", "x", "--start", "10"}, // past the end
		{"run", "--config", good, "--ring", "x", "--start", "-1"},
		{"run", "--config", good, "--ring", "x", "extra"},
		{"run", "--bogus"},
		{"stat"},
		{"stat", "a", "b"},
		{"gc", "x"},
	} {
		p := start(t, args...)
		p.expectExit(t, exitUsage)
		if p.stderr.Len() == 0 {
			t.Errorf("%v: nothing on stderr", args)
		}
	}
}

func TestRunSignals(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, "delay_ms = 2"))
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, exitOK}, {syscall.SIGINT, exitInterrupted}} {
		t.Run(unix.SignalName(tc.sig), func(t *testing.T) {
			name := ringName(t)
			p := start(t, "run", "--config", cfg, "--ring", name)
			r, c := consume(t, name, p)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for range 5 {
				s, err := c.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkBatch(r, s); err != nil {
					t.Fatal(err)
				}
				c.Release(s)
			}
			p.cmd.Process.Signal(tc.sig)
			p.expectExit(t, tc.code)
			noSegment(t, name)
			// The consumer learns why, with the producer's text, after the batches already
			// published.
			var err error
			for i := 0; err == nil && i < 10; i++ {
				var s *ring.ReadSlot
				if s, err = c.Next(ctx); err == nil {
					c.Release(s)
				}
			}
			var pe *ring.ProducerError
			if !errors.As(err, &pe) || !strings.Contains(pe.Text, "stopped by "+unix.SignalName(tc.sig)) {
				t.Fatalf("consumer got %v, want the producer's stop message", err)
			}
		})
	}
	// Without a consumer: exits at once and leaves nothing behind.
	name := ringName(t)
	p := start(t, "run", "--config", cfg, "--ring", name)
	attach(t, name, p)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.expectExit(t, exitOK)
	noSegment(t, name)
}

// helperConsumer runs in a child copy of the test binary: it consumes two batches of the named
// ring and dies (SIGKILL) or exits without closing, as SHMLOADER_TEST_HOW says.
func helperConsumer(name string) int {
	shm.Dir = os.Getenv("GOBATCH_SHM_DIR")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r *ring.Ring
	for {
		var err error
		if _, r, err = ring.AttachNamed(ctx, name, true); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		time.Sleep(5 * time.Millisecond)
	}
	c, err := r.NewConsumer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("SHMLOADER_TEST_HOW") == "all" {
		// Take the whole (bounded) stream, keep the last batch unreleased, exit without Close.
		var last *ring.ReadSlot
		for {
			s, err := c.Next(ctx)
			if err == io.EOF {
				fmt.Println("read")
				return 0
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			c.Release(last)
			last = s
		}
	}
	for range 2 {
		s, err := c.Next(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c.Release(s)
	}
	fmt.Println("read")
	if os.Getenv("SHMLOADER_TEST_HOW") == "kill" {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return 0
}

func TestRunConsumerDiesOrCloses(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, "delay_ms = 1"))
	for _, how := range []string{"kill", "exit"} {
		t.Run(how, func(t *testing.T) {
			name := ringName(t)
			p := start(t, "run", "--config", cfg, "--ring", name)
			h := exec.Command(os.Args[0], "-test.run=^$")
			h.Env = append(os.Environ(), helperEnv+"="+name, "SHMLOADER_TEST_HOW="+how)
			out, err := h.Output()
			if string(out) != "read\n" {
				t.Fatalf("helper consumer: %v %q", err, out)
			}
			p.expectExit(t, exitConsumerDied)
			if !strings.Contains(p.stderr.String(), "consumer died") {
				t.Fatalf("stderr: %s", p.stderr.String())
			}
			noSegment(t, name)
		})
	}
	t.Run("exit-after-everything", func(t *testing.T) {
		name := ringName(t)
		bounded := writeConfig(t, "b.toml", allDTypes(2, 7, ""))
		p := start(t, "run", "--config", bounded, "--ring", name)
		h := exec.Command(os.Args[0], "-test.run=^$")
		h.Env = append(os.Environ(), helperEnv+"="+name, "SHMLOADER_TEST_HOW=all")
		if out, err := h.Output(); string(out) != "read\n" {
			t.Fatalf("helper consumer: %v %q", err, out)
		}
		p.expectExit(t, exitOK)
		noSegment(t, name)
	})
	t.Run("close", func(t *testing.T) {
		name := ringName(t)
		p := start(t, "run", "--config", cfg, "--ring", name)
		_, c := consume(t, name, p)
		s, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Release(s)
		c.Close()
		p.expectExit(t, exitOK)
		noSegment(t, name)
	})
}
