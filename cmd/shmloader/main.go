// Command shmloader reads training data, assembles batches and writes them into a gobatch
// shared-memory ring (docs/PROTOCOL.md) that a trainer maps with `import gobatch`.
//
// Each subcommand lives in a file of its own (run.go, stat.go, gc.go, inspect.go, read.go, ...).
//
//	shmloader run --config FILE (--ring NAME | --memfd FD) [--readers N] [--start K] [--join]
//	shmloader stat NAME [--once] [--json]
//	shmloader gc [--dry-run]
//	shmloader version
//
// Logs go to stderr through zerolog, warnings and errors only unless -v or --log-level says
// otherwise; a command's failure is one plain line on stderr, and its exit status is one of
// the codes below. GOBATCH_SHM_DIR moves named rings out of /dev/shm (tests use it).
package main

import (
	"fmt"
	"os"
	"sort"

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

func usage() {
	fmt.Fprintln(os.Stderr, "usage: shmloader <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'shmloader <command> -h' for a command's flags.")
	fmt.Fprintln(os.Stderr, "Named rings live in /dev/shm; the environment variable GOBATCH_SHM_DIR moves them (tests use a private directory).")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(exitUsage)
		}
		return
	}
	if d := os.Getenv("GOBATCH_SHM_DIR"); d != "" {
		shm.Dir = d
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "shmloader: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(exitUsage)
	}
	os.Exit(c.run(os.Args[2:]))
}
