package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/readers/zarr"
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
		return usageError("read", fmt.Errorf("array %s: %w", arrayName(a), err))
	}
	par := *parallel
	switch {
	case par == 0 && objstore.IsRemote(a.Store):
		par = objstore.DefaultInFlight // fetching is I/O-bound: more requests than cores
	case par == 0:
		par = -1 // GOMAXPROCS
	}
	req := boxRequest{a: a, start: start, stop: stop, cf: *cf, parallel: par}
	t0 := time.Now()
	res, err := req.read()
	if err != nil {
		return failure("read", err)
	}
	if *bench > 0 {
		secs := make([]float64, 0, *bench)
		cpu := make([]float64, 0, *bench)
		for range *bench {
			t, c := time.Now(), cpuSeconds()
			if res, err = req.read(); err != nil {
				return failure("read", err)
			}
			secs = append(secs, time.Since(t).Seconds())
			cpu = append(cpu, cpuSeconds()-c)
		}
		b, _ := json.Marshal(map[string]any{"array": arrayName(a), "reads": *bench, "seconds": secs,
			"cpu_seconds": cpu, "decoded_bytes": len(res.data)})
		fmt.Fprintln(os.Stderr, string(b))
	}
	if err := writeNpyTo(*out, res.descr, res.shape, res.data); err != nil {
		return failure("read", err)
	}
	log.Info().Str("array", arrayName(a)).Str("descr", res.descr).Ints("shape", res.shape).
		Int("bytes", len(res.data)).Dur("took", time.Since(t0)).Str("out", *out).Msg("read")
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

// arrayName names an array in messages: its store and path.
func arrayName(a *zarr.Array) string {
	if a.Path == "" {
		return a.Store.String()
	}
	return a.Store.String() + "/" + a.Path
}

// writeNpyTo writes a .npy file to path: "-" is stdout, an existing non-regular file
// (/dev/null, a pipe) is written in place, anything else atomically (writeNpy).
func writeNpyTo(path, descr string, shape []int, data []byte) error {
	var f *os.File
	if path == "-" {
		f = os.Stdout
	} else if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return fmt.Errorf("write %s: is a directory", path)
		}
		if f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		defer f.Close()
	} else {
		return writeNpy(path, descr, shape, data)
	}
	hdr, err := npyHeader(descr, shape)
	if err != nil {
		return err
	}
	if _, err := f.Write(hdr); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
