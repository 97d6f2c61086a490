package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// testFlagSet is a flag set with one flag of each kind the verbs use; its output is captured.
func testFlagSet() (fs *flagSet, out, errOut *bytes.Buffer, once *bool, iv *time.Duration, dst *string, n *int) {
	fs = newFlagSet("t", "NAME --out FILE.npy")
	out, errOut = &bytes.Buffer{}, &bytes.Buffer{}
	fs.stdout, fs.stderr = out, errOut
	once = fs.Bool("once", false, "stop after one")
	iv = fs.Duration("interval", time.Second, "refresh interval")
	dst = fs.String("out", "", "the file to write")
	n = fs.Int("parallel", 0, "workers")
	fs.Func("start", "begin at batch `K`", func(string) error { return nil })
	fs.String("log-level", "", "log level")
	fs.Bool("v", false, "verbose")
	return
}

func TestFlagSetParse(t *testing.T) {
	fs, out, errOut, once, iv, dst, n := testFlagSet()
	// Flags before, between and after positional arguments; "--" ends the flags.
	pos, code, ok := fs.parse([]string{"--interval", "2s", "NAME", "--once", "a/b", "--out", "x.npy", "-parallel=3", "--", "-odd", "--once"})
	if !ok || code != 0 || !*once || *iv != 2*time.Second || *dst != "x.npy" || *n != 3 || !reflect.DeepEqual(pos, []string{"NAME", "a/b", "-odd", "--once"}) {
		t.Fatalf("pos %q code %d ok %v once %v interval %v out %q parallel %d", pos, code, ok, *once, *iv, *dst, *n)
	}
	if out.Len()+errOut.Len() != 0 {
		t.Fatalf("a good command line printed %q %q", out, errOut)
	}

	for _, h := range []string{"-h", "--help", "-help"} {
		fs, out, errOut, _, _, _, _ := testFlagSet()
		if pos, code, ok := fs.parse([]string{"NAME", h, "--once"}); ok || code != exitOK || pos != nil {
			t.Fatalf("%s: pos %q code %d ok %v", h, pos, code, ok)
		}
		if !strings.HasPrefix(out.String(), "usage: shmloader t NAME --out FILE.npy ") || errOut.Len() != 0 {
			t.Fatalf("%s: stdout %q stderr %q; want the usage on stdout only", h, out, errOut)
		}
	}

	for _, bad := range [][]string{{"NAME", "--nope"}, {"--interval", "soon"}, {"--parallel"}} {
		fs, out, errOut, _, _, _, _ := testFlagSet()
		if _, code, ok := fs.parse(bad); ok || code != exitUsage {
			t.Fatalf("%q: code %d ok %v, want exit %d", bad, code, ok, exitUsage)
		}
		first, rest, _ := strings.Cut(errOut.String(), "\n")
		if out.Len() != 0 || !strings.Contains(first, strings.TrimLeft(bad[len(bad)-1], "-")) || !strings.HasPrefix(rest, "usage: shmloader t ") {
			t.Fatalf("%q: stdout %q stderr %q; want the error naming the flag, then the usage, on stderr", bad, out, errOut)
		}
	}
}

func TestFlagSetUsage(t *testing.T) {
	fs, out, _, _, _, _, _ := testFlagSet()
	want := "shmloader t NAME --out FILE.npy [--interval D] [--log-level LEVEL] [--once] [--parallel N] [--start K] [-v]"
	if got := fs.synopsis(); got != want {
		t.Fatalf("synopsis\n got %q\nwant %q", got, want)
	}
	fs.parse([]string{"-h"})
	for _, entry := range []string{
		"\n  --interval D\n      refresh interval (default 1s)\n",
		"\n  --out FILE.npy\n      the file to write\n", // the lead's placeholder
		"\n  --once\n      stop after one\n",
		"\n  --start K\n      begin at batch K\n",
		"\n  -v\n      verbose\n",
	} {
		if !strings.Contains(out.String(), entry) {
			t.Errorf("usage lacks %q:\n%s", entry, out)
		}
	}
	// A synopsis past usageWidth is wrapped, without losing a part.
	parts := []string{"shmloader run", strings.Repeat("x", 60), "[--a N]", strings.Repeat("y", 30), "[--b]"}
	w := wrapParts(parts, 7, "    ")
	for i, line := range strings.Split(w, "\n") {
		if used := len(line) + 7*btoi(i == 0); used > usageWidth || line != strings.TrimRight(line, " ") {
			t.Errorf("line %q is too long or ends in a space", line)
		}
	}
	if strings.Join(strings.Fields(w), " ") != strings.Join(parts, " ") || !strings.Contains(w, "\n") {
		t.Fatalf("wrapped %q", w)
	}
}

// verbFlags returns each verb's flag set, complete, without running the verb.
func verbFlags(t *testing.T) map[string]*flagSet {
	t.Helper()
	sets := map[string]*flagSet{}
	for name, c := range commands {
		describeFlags = func(fs *flagSet) { sets[name] = fs }
		code := c.run(nil)
		describeFlags = nil
		if sets[name] == nil || code != exitOK {
			t.Fatalf("verb %s did not reach its flag parser (exit %d)", name, code)
		}
	}
	return sets
}

// TestVerbUsage holds every verb's generated usage to the flags the verb registered.
func TestVerbUsage(t *testing.T) {
	want := []string{"gc", "inspect", "plan", "read", "run", "serve", "stat", "version"}
	sets := verbFlags(t)
	var names []string
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("verbs %v, want %v", names, want)
	}
	for _, name := range names {
		fs := sets[name]
		syn := " " + fs.synopsis() + " "
		var usage bytes.Buffer
		fs.writeUsage(&usage)
		fs.VisitAll(func(f *flag.Flag) {
			d := dashed(f.Name)
			if !strings.Contains(syn, " "+d+" ") && !strings.Contains(syn, "["+d+" ") && !strings.Contains(syn, "["+d+"]") &&
				!strings.Contains(syn, "("+d+" ") {
				t.Errorf("%s: synopsis %q lacks %s", name, syn, d)
			}
			if !strings.Contains(usage.String(), "\n  "+d+"\n") && !strings.Contains(usage.String(), "\n  "+d+" ") {
				t.Errorf("%s: usage lacks an entry for %s:\n%s", name, d, usage.String())
			}
		})
		// The hand-written lead may name only flags the verb has.
		for _, w := range strings.Fields(fs.lead) {
			if w = strings.Trim(w, "()[]|,"); strings.HasPrefix(w, "-") && fs.Lookup(strings.TrimLeft(w, "-")) == nil {
				t.Errorf("%s: lead %q names %s, which is not a flag of the verb", name, fs.lead, w)
			}
		}
	}
	// The flags `run -h` used to leave out of its synopsis (issue 7).
	for _, f := range []string{"[--rank N]", "[--world-size N]", "[--cache-mb N]", "[--readers N]", "[--join]", "--config FILE"} {
		if !strings.Contains(sets["run"].synopsis(), f) {
			t.Errorf("run synopsis %q lacks %s", sets["run"].synopsis(), f)
		}
	}
}

// TestHelpOutput runs the binary: -h and --help print the verb's usage to stdout and exit 0;
// a bad flag prints the error and the usage to stderr and exits 2.
func TestHelpOutput(t *testing.T) {
	for name, fs := range verbFlags(t) {
		var usage bytes.Buffer
		fs.writeUsage(&usage)
		for _, h := range []string{"-h", "--help"} {
			stdout, stderr, code := runBinary(t, name, h)
			if code != exitOK || stderr != "" || stdout != usage.String() {
				t.Errorf("%s %s: exit %d, stderr %q, stdout\n%s\nwant exit 0 and on stdout\n%s", name, h, code, stderr, stdout, usage.String())
			}
		}
		stdout, stderr, code := runBinary(t, name, "--no-such-flag")
		if code != exitUsage || stdout != "" || stderr != "flag provided but not defined: -no-such-flag\n"+usage.String() {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr\n%s", name, code, stdout, stderr)
		}
	}

	stdout, stderr, code := runBinary(t, "-h")
	if code != exitOK || stderr != "" {
		t.Fatalf("shmloader -h: exit %d stderr %q", code, stderr)
	}
	flat := strings.Join(strings.Fields(stdout), " ")
	for name, fs := range verbFlags(t) {
		if !strings.Contains(flat, " "+fs.synopsis()+" ") {
			t.Errorf("shmloader -h lacks %s's synopsis %q:\n%s", name, fs.synopsis(), stdout)
		}
	}
	if stdout2, stderr2, code := runBinary(t); code != exitUsage || stdout2 != "" || stderr2 != stdout {
		t.Errorf("shmloader without a command: exit %d, stdout %q, stderr %q; want exit 2 and the usage on stderr", code, stdout2, stderr2)
	}
	if _, stderr, code := runBinary(t, "nope"); code != exitUsage || !strings.HasPrefix(stderr, "shmloader: unknown command \"nope\"\nusage:") {
		t.Errorf("shmloader nope: exit %d, stderr %q", code, stderr)
	}
}

func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(binPath, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%v: %v", args, err)
		}
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// TestMainDoc holds main.go's doc comment to the verbs' generated synopses.
func TestMainDoc(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "\npackage main")
	flat := strings.Join(strings.Fields(strings.ReplaceAll(doc, "//", " ")), " ")
	for name, fs := range verbFlags(t) {
		if !strings.Contains(flat, fs.synopsis()) {
			t.Errorf("main.go's doc comment lacks %s's synopsis (update it):\n//\t%s", name, fs.synopsis())
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
