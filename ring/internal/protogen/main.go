// Command protogen writes the consumer side's copy of the ring protocol from package ring:
// a C header for pybind/ and a Python module for python/gobatch. ring's constants are held to
// docs/PROTOCOL.md by ring's tests, and these files are generated from those constants, so the
// C library and the Python package carry no protocol number written by hand.
//
// It runs from ring/ through `go generate ./ring` (the //go:generate line in ring/protocol.go):
//
//	go run ./internal/protogen -c ../pybind/gobatch_protocol.h -py ../python/gobatch/_protocol.py
//
// The test of this package fails when the committed files differ from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	cPath := flag.String("c", "", "write the C header here")
	pyPath := flag.String("py", "", "write the Python module here")
	flag.Parse()
	if *cPath == "" && *pyPath == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: protogen [-c FILE.h] [-py FILE.py]")
		os.Exit(2)
	}
	p := collect()
	for _, out := range []struct {
		path   string
		render func(protocol) []byte
	}{{*cPath, renderC}, {*pyPath, renderPython}} {
		if out.path == "" {
			continue
		}
		if err := writeIfChanged(out.path, out.render(p)); err != nil {
			fmt.Fprintf(os.Stderr, "protogen: %v\n", err)
			os.Exit(1)
		}
	}
}

// writeIfChanged leaves an up-to-date file alone, so that make does not rebuild for nothing.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
