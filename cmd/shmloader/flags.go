package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/sampler"
	"github.com/gobatch/gobatch/shm"
)

// flagSet is a verb's command line: package flag's FlagSet (register flags on it as usual)
// plus the one parser every verb uses and a usage text generated from the registered flags,
// so that `-h` cannot fall behind the flags a verb really takes.
type flagSet struct {
	*flag.FlagSet
	verb string
	// lead is the part of the synopsis that flag declarations cannot say: positional
	// arguments and which flags are required, e.g. "--config FILE (--ring NAME | --memfd FD)".
	lead string
	// stdout receives -h's usage, stderr a bad flag's error and the usage; tests replace them.
	stdout, stderr io.Writer
}

// newFlagSet makes verb's flag set. lead is the hand-written start of the synopsis (may be
// empty); every registered flag it does not mention is appended to the synopsis as [--name V].
func newFlagSet(verb, lead string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("shmloader "+verb, flag.ContinueOnError),
		verb: verb, lead: lead, stdout: os.Stdout, stderr: os.Stderr}
	// parse prints the errors and the usage itself, to the stream each belongs on.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// describeFlags, when set, makes parse hand the verb's complete flag set to it and stop the
// verb (exitOK, false) without parsing: the top-level usage learns each verb's synopsis this
// way, and the tests each verb's flags. So a verb registers all its flags, and does nothing
// that outlives it, before it calls parse.
var describeFlags func(*flagSet)

// parse parses args; flags may come before, between and after positional arguments
// (`shmloader read STORE/ARRAY --out x.npy`), and "--" ends the flags. It returns the
// positional arguments, or (nil, exit code, false) when the verb must stop: -h or --help
// (the usage went to stdout, exit 0) or a bad flag (the error and the usage went to stderr,
// exit 2).
func (fs *flagSet) parse(args []string) (pos []string, code int, ok bool) {
	if describeFlags != nil {
		describeFlags(fs)
		return nil, exitOK, false
	}
	pos, err := fs.interspersed(args)
	switch {
	case err == nil:
		return pos, 0, true
	case errors.Is(err, flag.ErrHelp):
		fs.writeUsage(fs.stdout)
		return nil, exitOK, false
	default:
		fmt.Fprintln(fs.stderr, err)
		fs.writeUsage(fs.stderr)
		return nil, exitUsage, false
	}
}

// interspersed runs package flag's parser, which stops at the first positional argument,
// once per positional argument.
func (fs *flagSet) interspersed(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil // package flag consumed the "--"
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// dashed is a flag's name as the synopsis spells it: -v, --log-level.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// isBool reports whether f is a switch that takes no value (-v, --join).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// valueName is the placeholder for f's value: the one the lead gives it (--config FILE), else
// the `quoted` word of its usage, N for numbers, D for durations, else the last word of the
// flag's name (--log-level LEVEL).
func (fs *flagSet) valueName(f *flag.Flag) string {
	if v := fs.leadFlags()[f.Name]; v != "" {
		return v
	}
	name, _ := flag.UnquoteUsage(f)
	switch name {
	case "int", "uint", "float":
		return "N"
	case "duration":
		return "D"
	case "string", "value":
		parts := strings.Split(f.Name, "-")
		return strings.ToUpper(parts[len(parts)-1])
	}
	return name
}

// leadFlags maps each registered flag the lead names to the placeholder the lead writes after
// it ("" when none): "--config FILE (--ring NAME | --memfd FD)" gives config: FILE, ring:
// NAME, memfd: FD.
func (fs *flagSet) leadFlags() map[string]string {
	m := map[string]string{}
	words := strings.Fields(fs.lead)
	for i, w := range words {
		w = strings.Trim(w, "()[]|,")
		if !strings.HasPrefix(w, "-") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if fs.Lookup(name) == nil {
			continue
		}
		if next := ""; value == "" && i+1 < len(words) {
			if next = strings.Trim(words[i+1], "()[]|,"); next != "" && !strings.HasPrefix(next, "-") && !strings.HasPrefix(words[i+1], "(") && !strings.HasPrefix(words[i+1], "[") {
				value = next
			}
		}
		m[name] = value
	}
	return m
}

// synopsisParts are the units of the verb's one-line usage: "shmloader VERB", the lead,
// then one [--name V] per flag the lead does not name, in name order.
func (fs *flagSet) synopsisParts() []string {
	parts := []string{"shmloader " + fs.verb}
	if fs.lead != "" {
		parts = append(parts, fs.lead)
	}
	inLead := fs.leadFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := inLead[f.Name]; ok {
			return
		}
		if isBool(f) {
			parts = append(parts, "["+dashed(f.Name)+"]")
		} else {
			parts = append(parts, "["+dashed(f.Name)+" "+fs.valueName(f)+"]")
		}
	})
	return parts
}

// synopsis is the verb's usage on one line.
func (fs *flagSet) synopsis() string { return strings.Join(fs.synopsisParts(), " ") }

// usageWidth is where writeUsage wraps the synopsis.
const usageWidth = 100

// wrapParts joins parts with spaces, starting a new line indented by indent before a part
// that would pass usageWidth; first is the width already used on the first line.
func wrapParts(parts []string, first int, indent string) string {
	var b strings.Builder
	col := first
	for i, p := range parts {
		switch {
		case i == 0:
		case col+1+len(p) > usageWidth:
			b.WriteString("\n" + indent)
			col = len(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(p)
		col += len(p)
	}
	return b.String()
}

// writeUsage writes the synopsis and one entry per flag: its name, value and help, and its
// default when that is not the zero value.
func (fs *flagSet) writeUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", wrapParts(fs.synopsisParts(), len("usage: "), "         "))
	if !fs.hasFlags() {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	fs.VisitAll(func(f *flag.Flag) {
		_, help := flag.UnquoteUsage(f)
		head := dashed(f.Name)
		if !isBool(f) {
			head += " " + fs.valueName(f)
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" {
			help += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(w, "  %s\n      %s\n", head, help)
	})
}

func (fs *flagSet) hasFlags() bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// addAllowUIDFlag registers --allow-uid on a verb that opens named rings by name: besides its
// own user's rings, it then accepts those of that uid (PROTOCOL.md 1.1). The default accepts
// only one's own.
func addAllowUIDFlag(fs *flagSet) *int {
	uid := shm.NoOtherUID
	fs.Func("allow-uid", "also accept named rings owned by user `UID` (and writable by its group); by default only your own", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 31)
		if err != nil {
			return errors.New("want a numeric uid >= 0")
		}
		uid = int(n)
		return nil
	})
	return &uid
}

// sourceFlags say how the configured sources open. They are declared here once for every verb
// that opens sources: --data-root, --cache-mb and the batch options for run, plan and serve, --rank and
// --world-size for run and plan (serve's ranks are its node's).
type sourceFlags struct {
	dataRoot string
	cacheMB  int64
	rank     int
	world    int
	batch    config.Overrides // --batch-size, --seed, --order, --t0-start, --t0-end, --slots
}

// addDataFlags registers --data-root, --cache-mb and the batch options.
func addDataFlags(fs *flagSet, f *sourceFlags) {
	f.batch.AddFlags(fs.FlagSet)
	fs.StringVar(&f.dataRoot, "data-root", "", "directory that relative data paths in the configuration are resolved against")
	fs.Int64Var(&f.cacheMB, "cache-mb", 0, "decoded-chunk cache budget in MiB (default: the anchor source's cache_mb; serve: one cache for every rank)")
}

// addSourceFlags registers the data flags, --rank and --world-size.
func addSourceFlags(fs *flagSet, f *sourceFlags) {
	addDataFlags(fs, f)
	fs.IntVar(&f.rank, "rank", 0, "data-parallel rank: this process produces global batches k*world_size + rank")
	fs.IntVar(&f.world, "world-size", 1, "number of data-parallel ranks")
}

// checkData validates the data flags.
func (f *sourceFlags) checkData() error {
	if err := sampler.CheckCacheMB(f.cacheMB); err != nil {
		return fmt.Errorf("--cache-mb: %w", err)
	}
	return nil
}

// check validates the source flags and returns the rank's stream.
func (f *sourceFlags) check() (sampler.Stream, error) {
	if err := f.checkData(); err != nil {
		return sampler.Stream{}, err
	}
	s, err := sampler.NewStream(f.rank, f.world)
	if err != nil {
		return s, fmt.Errorf("--rank %d --world-size %d: %w", f.rank, f.world, err)
	}
	return s, nil
}
