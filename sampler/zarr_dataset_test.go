package sampler

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gobatch/gobatch/readers/zarr"
)

// Opening a store is bounded: an open that does not return (a hung mount) fails naming the
// store once the deadline passes, and one that returns in time gives its own result.
func TestOpenUnderADeadline(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	_, err := withDeadline(10*time.Millisecond, func() (Dataset, error) { <-hang; return nil, nil },
		func() error { return fmt.Errorf("open zarr store /mnt/hung/sat.zarr: no answer") })
	if err == nil || !strings.Contains(err.Error(), "/mnt/hung/sat.zarr") {
		t.Fatalf("a hung open: %v", err)
	}
	d, err := withDeadline(time.Minute, func() (int, error) { return 7, nil }, func() error { return errors.New("late") })
	if d != 7 || err != nil {
		t.Fatalf("an open in time: %v, %v", d, err)
	}
}

// hangingStore never answers a read of chunk x/0 (a hung mount); other reads pass.
type hangingStore struct {
	zarr.Store
	hang chan struct{}
}

func (h hangingStore) Get(key string) ([]byte, error) {
	if key == "x/0" {
		<-h.hang
	}
	return h.Store.Get(key)
}

func (h hangingStore) GetRange(key string, off, n int64) ([]byte, error) {
	if key == "x/0" {
		<-h.hang
	}
	return h.Store.GetRange(key, off, n)
}

// A coordinate read that does not return fails naming the store and the array once
// OpenDeadline passes (each of the whole-array reads the sampler makes while opening).
func TestCoordinateReadUnderADeadline(t *testing.T) {
	mem := zarr.NewMemStore("mem")
	mem.Data["x/.zarray"] = []byte(`{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f8", "compressor": null,
		"fill_value": null, "order": "C", "filters": null}`)
	mem.Data["x/0"] = make([]byte, 32)
	hang := make(chan struct{})
	defer close(hang)
	a, err := zarr.OpenArray(hangingStore{mem, hang}, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { OpenDeadline = d }(OpenDeadline)
	OpenDeadline = 20 * time.Millisecond
	z := &zarrArray{a: a, store: "/mnt/hung/sat.zarr"}
	reads := map[string]func() error{
		"Float64s": func() error { _, err := z.Float64s(); return err },
		"Int64s":   func() error { _, err := z.Int64s(); return err },
	}
	for name, read := range reads {
		if err := read(); err == nil || !strings.Contains(err.Error(), "/mnt/hung/sat.zarr/x: no answer within 20ms") {
			t.Errorf("%s of a hung store: %v, want the store and array named", name, err)
		}
	}
}
