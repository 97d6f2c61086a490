package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/internal/s3test"
)

// TestInspectRemote inspects the reader's fixtures through a real S3 server and an HTTP
// server: the reports equal the one of the same store on disk, but for the store's name.
func TestInspectRemote(t *testing.T) {
	web := serveFixtures(t)
	for _, store := range []string{"v2.zarr", "v3.zarr/grp", "cf3.zarr"} {
		want, stderr, code := runBinary(t, "inspect", "--json", fixtures+"/"+store)
		if code != exitOK {
			t.Fatalf("inspect %s: exit %d: %s", store, code, stderr)
		}
		root := strings.SplitN(store, "/", 2)[0]
		for _, url := range []string{"s3://fixtures/" + store, "gs://fixtures/" + store, web + "/" + store} {
			got, stderr, code := runBinary(t, "inspect", "--json", url)
			if code != exitOK {
				t.Fatalf("inspect %s: exit %d: %s", url, code, stderr)
			}
			got = strings.ReplaceAll(got, strings.TrimSuffix(url, strings.TrimPrefix(store, root)), fixtures+"/"+root)
			want := want
			if strings.HasPrefix(url, "http") { // HTTP cannot list: the stored chunks are not counted
				want, got = withoutCounts(want), withoutCounts(got)
			}
			if got != want {
				t.Fatalf("inspect %s:\n%s\nwant (from disk):\n%s", url, got, want)
			}
		}
	}
	_, stderr, code := runBinary(t, "inspect", "s3://no-bucket/v3.zarr")
	if code != exitFailure || !strings.Contains(stderr, `bucket "no-bucket" does not exist`) {
		t.Fatalf("inspect of a missing bucket: exit %d, stderr %q", code, stderr)
	}
}

var countLines = regexp.MustCompile(`(?m)^\s*"(stored_bytes|ratio|chunks_stored)": .*\n`)

// withoutCounts drops the fields that need a listing from an inspect report.
func withoutCounts(report string) string { return countLines.ReplaceAllString(report, "") }

// fixtures are the reader's Zarr fixtures (written by zarr-python, readers/zarr/testdata).
const fixtures = "../../readers/zarr/testdata"

// serveFixtures serves the fixtures as bucket "fixtures" of a real S3 server (the environment
// points s3:// and gs:// at it for the test) and over HTTP, whose URL it returns.
func serveFixtures(t *testing.T) string {
	s := s3test.Serve(t, map[string]string{"fixtures": fixtures})
	s3test.SetEnv(t, s.URL)
	return s3test.StartHTTP(t, fixtures)
}
