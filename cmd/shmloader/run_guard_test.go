package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// TestRunTruncatedRing: a named ring's file cut short under its producer (by a process of the
// same user) ends the producer with an error naming the ring and both sizes, never SIGBUS:
// while it waits for the consumer (the size check of its watchdog loop), and while it writes a
// slot whose pages are gone (stopped right after WRITING by its failpoint, cut, continued: the
// write faults, or the size check sees it first).
func TestRunTruncatedRing(t *testing.T) {
	cfg := writeConfig(t, "c.toml", `[batch]
size = 64
batches = 0
[ring]
slots = 4
[[source]]
name = "x"
kind = "synthetic"
shape = [4096]
dtype = "float32"
`)
	for _, tc := range []struct{ name, failpoint string }{{"waiting", ""}, {"writing", ring.FPSlotWriting + ":3:stop"}} {
		t.Run(tc.name, func(t *testing.T) {
			name := ringName(t)
			cmd := exec.Command(binPath, "run", "--config", cfg, "--ring", name)
			if tc.failpoint != "" {
				cmd.Env = append(os.Environ(), ring.FailpointEnv+"="+tc.failpoint)
			}
			p := startCmd(t, cmd)
			_, r := attach(t, name, p)
			size := r.SegmentBytes()
			if tc.failpoint != "" {
				waitUntil(t, "the producer to stop at "+tc.failpoint, func() bool { return ring.Stopped(uint32(cmd.Process.Pid)) })
			} else {
				waitUntil(t, "the ring to fill", func() bool { return r.Stats().Full == 4 })
			}
			cut := int64(8192 + 4*ring.SlotHeaderBytes + 4096) // the header and the first payload page
			if err := os.Truncate(shm.Path(name), cut); err != nil {
				t.Fatal(err)
			}
			if tc.failpoint != "" {
				cmd.Process.Signal(syscall.SIGCONT)
			}
			if code := p.wait(t); code != exitFailure {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, p.stderr.String())
			}
			got := p.stderr.String()
			want := "ring " + name + " (" + shm.Path(name) + ") was truncated to " + strconv.FormatInt(cut, 10) + " bytes while this producer wrote to it, but the ring is " + strconv.FormatInt(size, 10) + " bytes"
			if !strings.Contains(got, want) || strings.Contains(got, "SIGBUS") || strings.Contains(got, "fatal error") || strings.Contains(got, "goroutine ") {
				t.Fatalf("stderr:\n%s\nwant %q, and no crash", got, want)
			}
			noSegment(t, name) // the creator still unlinks it
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
