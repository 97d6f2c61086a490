package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gobatch/gobatch/internal/npy"
	"github.com/gobatch/gobatch/readers/objstore"
)

func init() {
	register("read", "read a Zarr array (or a box of it) into a .npy file", cmdRead)
}

func cmdRead(args []string) int {
	fs := newFlagSet("read", "STORE/ARRAY --out FILE.npy")
	out := fs.String("out", "", "the .npy file to write (required; \"-\" for stdout)")
	box := fs.String("box", "", "the region to read, one START:STOP per dimension, open ends allowed, e.g. 0:10,:,5: (default: the whole array)")
	cf := fs.Bool("cf", false, "CF-decode: scale_factor, add_offset, _FillValue/missing_value -> NaN, as float32; CF time coordinates as datetime64[ns]")
	parallel := fs.Int("parallel", 0, "chunks decoded at once (0: GOMAXPROCS; for a remote store, objstore.DefaultInFlight requests in flight)")
	bench := fs.Int("bench", 0, "benchmark: read the region N times and print each read's seconds to stderr as JSON")
	lf := addLogFlags(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 1:
		return usageError("read", fmt.Errorf("want one STORE/ARRAY argument, got %d (usage: %s)", len(pos), fs.synopsis()))
	case *out == "":
		return usageError("read", errors.New("--out FILE.npy is required"))
	case *bench < 0:
		return usageError("read", fmt.Errorf("--bench %d: want a count >= 0", *bench))
	}
	log, err := lf.logger("read")
	if err != nil {
		return usageError("read", err)
	}
	a, err := objstore.OpenArrayPath(pos[0])
	if err != nil {
		return failure("read", err)
	}
	start, stop, err := parseBox(*box, a.Shape)
	if err != nil {
		return usageError("read", fmt.Errorf("array %s: %w", a.Name(), err))
	}
	par := *parallel
	switch {
	case par == 0 && objstore.IsRemote(a.Store):
		par = objstore.DefaultInFlight // fetching is I/O-bound: more requests than cores
	case par == 0:
		par = -1 // GOMAXPROCS
	}
	req := npy.Box{A: a, Start: start, Stop: stop, CF: *cf, Parallel: par}
	t0 := time.Now()
	res, err := req.Read()
	if err != nil {
		return failure("read", err)
	}
	if *bench > 0 {
		secs := make([]float64, 0, *bench)
		cpu := make([]float64, 0, *bench)
		for range *bench {
			t, c := time.Now(), cpuSeconds()
			if res, err = req.Read(); err != nil {
				return failure("read", err)
			}
			secs = append(secs, time.Since(t).Seconds())
			cpu = append(cpu, cpuSeconds()-c)
		}
		b, _ := json.Marshal(map[string]any{"array": a.Name(), "reads": *bench, "seconds": secs,
			"cpu_seconds": cpu, "decoded_bytes": len(res.Data)})
		fmt.Fprintln(os.Stderr, string(b))
	}
	if err := npy.Write(*out, res.Descr, res.Shape, res.Data); err != nil {
		return failure("read", err)
	}
	log.Info().Str("array", a.Name()).Str("descr", res.Descr).Ints("shape", res.Shape).
		Int("bytes", len(res.Data)).Dur("took", time.Since(t0)).Str("out", *out).Msg("read")
	return exitOK
}

// cpuSeconds is the user+system CPU time of this process so far (all threads).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// failure reports a runtime error and returns exitFailure.
func failure(cmd string, err error) int {
	fmt.Fprintf(os.Stderr, "shmloader %s: %v\n", cmd, err)
	return exitFailure
}
