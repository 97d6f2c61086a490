package sampler

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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
