package main

import (
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// logFlags are the logging flags every subcommand shares: quiet (warnings and errors only) by
// default, -v for info, --log-level for anything else. Logs go to stderr, as JSON lines unless
// stderr is a terminal (or --log-format says otherwise).
type logFlags struct {
	verbose bool
	level   string
	format  string
}

func addLogFlags(fs *flagSet) *logFlags {
	l := &logFlags{}
	fs.BoolVar(&l.verbose, "v", false, "log start-up facts and progress (same as --log-level info)")
	fs.StringVar(&l.level, "log-level", "", "log level: debug, info, warn, error (default warn)")
	fs.StringVar(&l.format, "log-format", "auto", "log format: json, text, or auto (text on a terminal)")
	return l
}

// logger builds the logger the flags ask for.
func (l *logFlags) logger(cmd string) (zerolog.Logger, error) {
	level := zerolog.WarnLevel
	if l.verbose {
		level = zerolog.InfoLevel
	}
	if l.level != "" {
		lv, err := zerolog.ParseLevel(l.level)
		if err != nil || lv == zerolog.NoLevel {
			return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
		}
		level = lv
	}
	var w = zerolog.New(os.Stderr)
	switch l.format {
	case "json":
	case "text":
		w = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly, NoColor: true})
	case "auto":
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			w = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly})
		}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want json, text or auto", l.format)
	}
	return w.Level(level).With().Timestamp().Str("cmd", cmd).Int("pid", os.Getpid()).Logger(), nil
}

// usageError prints a usage or configuration error and returns exitUsage.
func usageError(cmd string, err error) int {
	fmt.Fprintf(os.Stderr, "shmloader %s: %v\n", cmd, err)
	return exitUsage
}
