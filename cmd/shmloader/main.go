// Command shmloader reads training data, assembles batches and writes them into a gobatch
// shared-memory ring (docs/PROTOCOL.md) that a trainer maps with `import gobatch`.
//
// Each verb lives in files named by it (run*.go, serve*.go, plan.go, stat.go, gc.go,
// inspect*.go, read*.go, version.go); flags.go is the one flag parser they share (and declares
// the source flags once), and it generates each verb's `-h` from the flags the verb registers;
// sources.go opens the configured sources for run and serve, with their logging;
// log.go is the logger. The producer engine under run and serve is package feed. The verbs and their synopses (a test holds this
// list to the generated ones):
//
//	shmloader run --config FILE (--ring NAME | --memfd FD) [--allow-uid UID] [--batch-size N]
//	    [--cache-mb N] [--concurrent] [--data-root ROOT] [--drop-last BOOL] [--epoch E] [--epochs N]
//	    [--join] [--log-format FORMAT] [--log-level LEVEL] [--order ORDER] [--rank N] [--readers N]
//	    [--resident-segments N] [--seed N] [--segment-steps N] [--slots N] [--start K] [--t0-end END]
//	    [--t0-start START] [--time-period START/END] [-v] [--world-size N]
//	shmloader plan --config FILE [--batch-size N] [--cache-mb N] [--concurrent] [--data-root ROOT]
//	    [--drop-last BOOL] [--json] [--order ORDER] [--rank N] [--resident-segments N] [--seed N]
//	    [--segment-steps N] [--slots N] [--t0-end END] [--t0-start START] [--time-period START/END]
//	    [--world-size N]
//	shmloader stat NAME [--allow-uid UID] [--interval D] [--json] [--log-format FORMAT]
//	    [--log-level LEVEL] [--once] [-v]
//	shmloader gc [--allow-uid UID] [--dry-run] [--grace D] [--json] [--log-format FORMAT]
//	    [--log-level LEVEL] [-v]
//	shmloader inspect STORE[/GROUP] [--json] [--log-format FORMAT] [--log-level LEVEL] [-v]
//	shmloader read STORE/ARRAY --out FILE.npy [--bench N] [--box BOX] [--cf]
//	    [--log-format FORMAT] [--log-level LEVEL] [--parallel N] [-v]
//	shmloader version [--json]
//	shmloader serve (--share | --config FILE --local-world-size N) (--socket NAME | --listen-fd FD)
//	    [--allow-uid UID] [--batch-size N] [--cache-mb N] [--concurrent] [--data-root ROOT]
//	    [--drop-last BOOL] [--linger D] [--log-format FORMAT] [--log-level LEVEL] [--node-rank G]
//	    [--of-rank R] [--order ORDER] [--readers N] [--resident-segments N] [--seed N]
//	    [--segment-steps N] [--slots N] [--t0-end END] [--t0-start START] [--time-period START/END]
//	    [-v] [--world-size N]
//
// run produces batches into a new ring (or, with --join, into an existing named one); plan
// is its dry run (the sources' stores, dimensions, windows, t0 candidates, sampling mode, batch
// order, tensors and ring size, without a ring); stat
// shows a named ring live; gc removes named rings whose creator died; inspect lists a Zarr
// store's groups and arrays; read writes a Zarr array, or a box of it, to a .npy file;
// version prints the build and the ring layout version; serve is the node loader, one process
// feeding a memfd ring per local rank from one cache, which gobatch.Loader starts under
// torchrun (and, with --share, one process feeding every job on the node that asks, each from
// its own configuration, over one cache: gobatch.Loader(share=True)). Flags may come before or after the positional arguments; `shmloader VERB -h` prints the verb's flags to stdout.
//
// Logs go to stderr through zerolog, warnings and errors only unless -v or --log-level says
// otherwise; a command's failure is one plain line on stderr, and its exit status is one of
// the codes below. GOBATCH_SHM_DIR moves named rings out of /dev/shm (tests use it).
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	// The ocf-data-sampler YAML format and rule set (docs/OCF.md): config and sampler know
	// them only through what the package registers.
	_ "github.com/gobatch/gobatch/ocf"
	"github.com/gobatch/gobatch/shm"
)

// Exit codes shared with python/gobatch, which maps them to exception classes.
const (
	exitOK           = 0
	exitFailure      = 1 // runtime error (I/O, corrupt data, ...)
	exitUsage        = 2 // bad command line or bad configuration (Python: ConfigError)
	exitConsumerDied = 3 // the consumer of the ring died
)

type command struct {
	summary string
	run     func(args []string) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	commands[name] = command{summary: summary, run: run}
}

// usage writes the top-level usage: every verb with its summary and its synopsis, which
// each verb's flag set generates (see describeFlags).
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: shmloader <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
		if parts := verbSynopsis(n); parts != nil {
			fmt.Fprintf(w, "           %s\n", wrapParts(parts, 11, "             "))
		}
	}
	fmt.Fprintln(w, "\nRun 'shmloader <command> -h' for a command's flags.")
	fmt.Fprintln(w, "Named rings live in /dev/shm; the environment variable GOBATCH_SHM_DIR moves them (tests use a private directory).")
}

// verbSynopsis is the synopsis that verb name's flag set generates, learnt by letting the
// verb register its flags and stopping it at parse.
func verbSynopsis(name string) []string {
	var s []string
	describeFlags = func(fs *flagSet) { s = fs.synopsisParts() }
	defer func() { describeFlags = nil }()
	commands[name].run(nil)
	return s
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(exitUsage)
	}
	if a := os.Args[1]; a == "-h" || a == "--help" || a == "help" {
		usage(os.Stdout)
		return
	}
	if d := os.Getenv("GOBATCH_SHM_DIR"); d != "" {
		shm.Dir = d
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "shmloader: unknown command %q\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(exitUsage)
	}
	os.Exit(c.run(os.Args[2:]))
}
