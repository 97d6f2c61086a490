package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadRemote reads arrays (plain, sharded, CF-decoded) through a real S3 server and an
// HTTP server into .npy files equal byte for byte to those read from disk.
func TestReadRemote(t *testing.T) {
	web := serveFixtures(t)
	dir := t.TempDir()
	read := func(src string, args ...string) []byte {
		t.Helper()
		out := filepath.Join(dir, "out.npy")
		if _, stderr, code := runBinary(t, append([]string{"read", src, "--out", out}, args...)...); code != exitOK {
			t.Fatalf("read %s: exit %d: %s", src, code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		array string
		args  []string
	}{
		{"v3.zarr/sharded_end", nil},
		{"v3.zarr/sharded_nested", []string{"--box", "2:7,1:"}},
		{"v2.zarr/f4_zstd_nested", nil},
		{"cf2.zarr/temp", []string{"--cf"}},
	} {
		want := read(fixtures+"/"+tc.array, tc.args...)
		for _, url := range []string{"s3://fixtures/" + tc.array, web + "/" + tc.array} {
			if got := read(url, tc.args...); !bytes.Equal(got, want) {
				t.Fatalf("read %s %v: %d bytes differ from the %d read from disk", url, tc.args, len(got), len(want))
			}
		}
	}
	_, stderr, code := runBinary(t, "read", "s3://fixtures/v3.zarr/nope", "--out", filepath.Join(dir, "x.npy"))
	if code != exitFailure || !strings.Contains(stderr, "nope") || !strings.Contains(stderr, "s3://fixtures/v3.zarr") {
		t.Fatalf("read of a missing array: exit %d, stderr %q", code, stderr)
	}
}
