package main

import (
	"context"
	"testing"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// In-process Go benchmarks of the ring's control path (go test -bench . ./benchmarks/go).
// The cross-process figures come from `go run ./benchmarks/go`.

func benchRing(b *testing.B, slots int, t ring.Tensor) (*ring.Ring, *ring.Producer, *ring.Consumer) {
	l := ring.Layout{Slots: slots, Tensors: []ring.Tensor{t}}
	seg, err := shm.CreateMemfd(l.SegmentBytes())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { seg.Close() })
	r, err := ring.Create(seg.Bytes(), l, false)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := r.NewProducer(1)
	c, _ := r.NewConsumer()
	return r, p, c
}

// BenchmarkClaimPublishNext: one goroutine claims, publishes, reads and releases a batch:
// the protocol's cost per batch without any waiting.
func BenchmarkClaimPublishNext(b *testing.B) {
	_, p, c := benchRing(b, 4, empty())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		w, err := p.Claim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		w.Publish()
		s, err := c.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		c.Release(s)
	}
}

// BenchmarkPipelined: a producer goroutine and the consumer run concurrently on a 4-slot
// ring (waits and futex wake-ups included).
func BenchmarkPipelined(b *testing.B) {
	_, p, c := benchRing(b, 4, empty())
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	defer func() { cancel(); <-exited }() // before the cleanup unmaps the ring
	go func() {
		defer close(exited)
		for {
			w, err := p.Claim(ctx)
			if err != nil {
				return
			}
			w.Publish()
		}
	}()
	for b.Loop() {
		s, err := c.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		c.Release(s)
	}
}

// BenchmarkFill30MB: memcpy of the reference batch into a slot, claim to release.
func BenchmarkFill30MB(b *testing.B) {
	r, p, c := benchRing(b, 2, big())
	src := make([]byte, r.SlotBytes())
	for i := range src {
		src[i] = byte(i * 7) // real pages, not the shared zero page
	}
	ctx := context.Background()
	b.SetBytes(r.SlotBytes())
	for b.Loop() {
		w, _ := p.Claim(ctx)
		copy(w.Payload(), src)
		w.Publish()
		s, _ := c.Next(ctx)
		c.Release(s)
	}
}
