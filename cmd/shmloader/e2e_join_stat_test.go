package main

// End-to-end tests of the shmloader binary, continued (e2e_test.go has the harness): joining a
// ring, stat and gc, version, the memfd's parent thread, sizes, a bad memfd.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

func TestRunJoin(t *testing.T) {
	name := ringName(t)
	cfg := writeConfig(t, "c.toml", allDTypes(3, 40, "delay_ms = 4"))
	creator := start(t, "run", "--config", cfg, "--ring", name, "--readers", "1")
	r, c := consume(t, name, creator)
	joiner := start(t, "run", "--config", cfg, "--ring", name, "--readers", "1", "--join")
	// Read only once the joiner has registered (until then the creator fills the 3 slots and
	// waits), so that both take part however slowly the joiner starts.
	for deadline := time.Now().Add(10 * time.Second); len(r.Stats().Producers) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the joiner did not register; stderr:\n%s", joiner.stderr.String())
		}
	}
	seqs, owners := readAll(t, r, c)
	if len(seqs) != 40 {
		t.Fatalf("read %d batches", len(seqs))
	}
	for i, s := range seqs {
		if s != uint64(i) {
			t.Fatalf("batch %d has seq %d", i, s)
		}
	}
	if len(owners) != 2 || owners[0] == 0 || owners[1] == 0 {
		t.Fatalf("batches per producer entry: %v, want both producers to contribute", owners)
	}
	joiner.expectExit(t, exitOK)
	c.Close()
	creator.expectExit(t, exitOK)
	noSegment(t, name)
}

func TestRunJoinMismatch(t *testing.T) {
	name := ringName(t)
	cfg := writeConfig(t, "c.toml", allDTypes(3, 0, ""))
	creator := start(t, "run", "--config", cfg, "--ring", name)
	attach(t, name, creator)
	for _, tc := range []struct{ text, want string }{
		{strings.Replace(allDTypes(3, 0, ""), "shape = [3, 5]", "shape = [3, 6]", 1), "tensor 0 is f32 float32[3 3 5]"},
		{allDTypes(4, 0, ""), "tensor 0"},
		{strings.Replace(allDTypes(3, 0, ""), "slots = 3", "slots = 4", 1), "the ring has 3 slots, this configuration 4"},
		{allDTypes(3, 50, ""), "stream ends at batch 0"},
	} {
		other := writeConfig(t, "other.toml", tc.text)
		j := start(t, "run", "--config", other, "--ring", name, "--join")
		j.expectExit(t, exitUsage)
		if !strings.Contains(j.stderr.String(), tc.want) {
			t.Errorf("stderr lacks %q:\n%s", tc.want, j.stderr.String())
		}
	}
	j := start(t, "run", "--config", cfg, "--ring", "no-such-ring", "--join")
	j.expectExit(t, exitFailure)
	// A second creator of the same name is refused and leaves the first one's segment alone.
	dup := start(t, "run", "--config", cfg, "--ring", name)
	dup.expectExit(t, exitFailure)
	if !strings.Contains(dup.stderr.String(), "shmloader gc") {
		t.Errorf("stderr: %s", dup.stderr.String())
	}
	if _, err := os.Stat(shm.Path(name)); err != nil {
		t.Fatal(err)
	}
	creator.cmd.Process.Signal(syscall.SIGTERM)
	creator.expectExit(t, exitOK)
	noSegment(t, name)
}

func TestStatAndGC(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, "delay_ms = 1"))
	live, dead := ringName(t)+"-live", ringName(t)+"-dead"
	pl := start(t, "run", "--config", cfg, "--ring", live)
	_, c := consume(t, live, pl)
	pd := start(t, "run", "--config", cfg, "--ring", dead)
	attach(t, dead, pd)
	pd.cmd.Process.Kill() // leaves its segment behind, creator dead
	pd.wait(t)

	// Consume in the background so that the live ring moves; stop before the mapping goes.
	ctx, cancel := context.WithCancel(context.Background())
	bgDone := make(chan struct{})
	defer func() { cancel(); <-bgDone }()
	go func() {
		defer close(bgDone)
		for {
			s, err := c.Next(ctx)
			if err != nil {
				return
			}
			c.Release(s)
		}
	}()

	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(binPath, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, _ := cmd.Output()
		if stderr.Len() > 0 {
			t.Logf("%v stderr: %s", args, stderr.String())
		}
		return string(out), cmd.ProcessState.ExitCode()
	}

	out, code := run("stat", live, "--once", "--json", "--interval", "200ms")
	var v statView
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("stat --json: %v (exit %d) %q", err, code, out)
	}
	if v.Ring != live || v.SlotsTotal != 3 || v.ProducersAlive != 1 || !v.CreatorAlive || v.ConsumerState != "ATTACHED" ||
		!v.ConsumerAlive || v.ConsumerPID != uint32(os.Getpid()) || v.ReadPerS <= 0 || v.WrittenMBPerS <= 0 || v.Error != "" {
		t.Fatalf("live stat: %+v", v)
	}
	if len(v.Producers) != 1 || v.Producers[0].PID != uint32(pl.cmd.Process.Pid) || v.Producers[0].State != "ACTIVE" {
		t.Fatalf("live producers: %+v", v.Producers)
	}
	out, code = run("stat", "--once", "--interval", "100ms", live)
	if code != 0 || !strings.Contains(out, "ring "+live+"  slots ") || !strings.Contains(out, "producers alive 1") {
		t.Fatalf("stat text (exit %d):\n%s", code, out)
	}
	out, code = run("stat", dead, "--once", "--json", "--interval", "50ms")
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("stat dead: %v %q", err, out)
	}
	if v.ProducersAlive != 0 || v.CreatorAlive || v.ConsumerState != "NONE" || v.WrittenPerS != 0 {
		t.Fatalf("dead stat: %+v", v)
	}
	if _, code = run("stat", "no-such-ring", "--once"); code != exitFailure {
		t.Fatalf("stat of a missing ring exited %d", code)
	}

	out, code = run("gc", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove "+shm.Path(dead)+": creator pid") || strings.Contains(out, live) {
		t.Fatalf("gc --dry-run (exit %d):\n%s", code, out)
	}
	if _, err := os.Stat(shm.Path(dead)); err != nil {
		t.Fatal("dry run removed the dead ring")
	}
	out, code = run("gc")
	if code != 0 || !strings.Contains(out, "removed "+shm.Path(dead)) || strings.Contains(out, live) {
		t.Fatalf("gc (exit %d):\n%s", code, out)
	}
	noSegment(t, dead)
	if _, err := os.Stat(shm.Path(live)); err != nil {
		t.Fatal("gc removed the live ring")
	}
	out, _ = run("gc", "--json")
	if !strings.Contains(out, `"removed":false`) || !strings.Contains(out, "is alive") {
		t.Fatalf("gc --json: %s", out)
	}

	pl.cmd.Process.Signal(syscall.SIGTERM)
	pl.expectExit(t, exitOK)
	noSegment(t, live)
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(binPath, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.LayoutVersion != ring.LayoutVersion || !strings.HasPrefix(v.GoVersion, "go") || v.Module != "github.com/gobatch/gobatch" {
		t.Fatalf("%+v", v)
	}
	out, err = exec.Command(binPath, "version").Output()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("ring layout version %d", ring.LayoutVersion)) {
		t.Fatalf("%v %s", err, out)
	}
}

// BenchmarkRunThroughput30MB measures batches through `shmloader run` (a child process, two
// readers, 4 slots) into a Go consumer that releases each batch unread: the producer side's
// rate. Compare with BenchmarkClear30MB (write bandwidth into memory) of the same run.
func BenchmarkRunThroughput30MB(b *testing.B) {
	for _, readers := range []int{1, 2} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			dir := b.TempDir()
			cfg := filepath.Join(dir, "c.toml")
			os.WriteFile(cfg, []byte("[batch]\nsize = 32\n[ring]\nslots = 4\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [19, 12, 32, 32]\ndtype = \"float32\"\n"), 0o644)
			name := strings.NewReplacer("/", "-", "=", "").Replace(b.Name())
			cmd := exec.Command(binPath, "run", "--config", cfg, "--ring", name, "--readers", fmt.Sprint(readers))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
			var seg *shm.Segment
			var r *ring.Ring
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				var err error
				if seg, r, err = ring.AttachNamed(context.Background(), name, true); err == nil {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%v: %s", err, stderr.String())
				}
			}
			defer seg.Close()
			c, err := r.NewConsumer()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(r.SlotBytes())
			ctx := context.Background()
			for b.Loop() {
				s, err := c.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				c.Release(s)
			}
		})
	}
}

// PR_SET_PDEATHSIG fires when the parent *thread* that started the child exits, even though
// the parent process lives on (a trainer that starts its loader from a helper thread). The
// child must keep running then, and still stop when the whole parent process dies
// (TestRunMemfdParentDies).
func TestRunMemfdParentThreadExits(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, "delay_ms = 1"))
	fd, err := unix.MemfdCreate("gobatch", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	mf := os.NewFile(uintptr(fd), "memfd")
	defer mf.Close()
	cmd := exec.Command(binPath, "run", "--config", cfg, "--memfd", "3")
	cmd.ExtraFiles = []*os.File{mf}
	started, exitThread := make(chan *proc), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		started <- startCmd(t, cmd)
		<-exitThread
	}()
	p := <-started
	// Let the thread exit only once the child has set PR_SET_PDEATHSIG (it has when it has
	// sized the memfd).
	var st unix.Stat_t
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if unix.Fstat(fd, &st) == nil && st.Size > 0 || time.Now().After(deadline) {
			break
		}
	}
	close(exitThread)
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
	c, err := r.NewConsumer()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the thread is gone by now; PDEATHSIG has fired
	select {
	case <-p.done:
		t.Fatalf("shmloader exited %d when its parent thread exited; stderr:\n%s", p.code, p.stderr.String())
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
	c.Close()
	p.expectExit(t, exitOK)
}

// A ring larger than shared memory is refused before anything is reserved.
func TestRunTooLarge(t *testing.T) {
	cfg := writeConfig(t, "big.toml", "[batch]\nsize = 64\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [1024, 1024, 256]\ndtype = \"float64\"\n")
	name := ringName(t)
	p := start(t, "run", "--config", cfg, "--ring", name)
	p.expectExit(t, exitFailure)
	if !strings.Contains(p.stderr.String(), "the ring needs 549757911040 bytes") {
		t.Fatalf("stderr: %s", p.stderr.String())
	}
	noSegment(t, name)
}

// The live view refreshes until interrupted, and ends by itself when the ring goes away.
func TestStatLive(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 0, "delay_ms = 1"))
	name := ringName(t)
	p := start(t, "run", "--config", cfg, "--ring", name)
	attach(t, name, p)

	st := exec.Command(binPath, "stat", name, "--json", "--interval", "50ms")
	pipe, err := st.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sp := startCmd(t, st)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for i := range 3 { // it keeps refreshing
		select {
		case l := <-lines:
			var v statView
			if err := json.Unmarshal([]byte(l), &v); err != nil || v.Ring != name {
				t.Fatalf("snapshot %d: %v %q", i, err, l)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no snapshot %d", i)
		}
	}
	st.Process.Signal(os.Interrupt)
	for range lines {
	}
	sp.expectExit(t, exitOK)

	st = exec.Command(binPath, "stat", name, "--interval", "50ms")
	if pipe, err = st.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	sp = startCmd(t, st)
	rd := bufio.NewReader(pipe)
	first, err := rd.ReadString('\n') // attached and printing
	if err != nil || !strings.HasPrefix(first, "ring "+name+"  slots ") {
		t.Fatalf("first line %q: %v", first, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.expectExit(t, exitOK)
	io.Copy(io.Discard, rd)
	sp.expectExit(t, exitOK)
	if !strings.Contains(sp.stderr.String(), "is gone") {
		t.Fatalf("stderr:\n%s", sp.stderr.String())
	}
}

func TestRunBadMemfd(t *testing.T) {
	cfg := writeConfig(t, "c.toml", allDTypes(2, 3, ""))
	p := start(t, "run", "--config", cfg, "--memfd", "99")
	p.expectExit(t, exitFailure)
	if !strings.Contains(p.stderr.String(), "--memfd 99") || !strings.Contains(p.stderr.String(), "inherited") {
		t.Fatalf("stderr: %s", p.stderr.String())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(binPath, "run", "--config", cfg, "--memfd", "3")
	cmd.ExtraFiles = []*os.File{r}
	p = startCmd(t, cmd)
	p.expectExit(t, exitFailure)
	if !strings.Contains(p.stderr.String(), "not a regular file or memfd") {
		t.Fatalf("stderr: %s", p.stderr.String())
	}
}
