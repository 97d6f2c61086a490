// Package ring is the Go half of the gobatch shared-memory ring protocol (docs/PROTOCOL.md,
// layout version 2): layout computation and validation, the creator's initialisation, the
// attacher's checks, producers, a consumer, futex waits, liveness, the error record and the
// job's named counters (counters.go).
//
// The C consumer in pybind/ implements the same document; the two share no code, only the
// numbers: Spec lists this package's constants as data, its tests hold them to the document,
// and `go generate ./ring` (internal/protogen) writes pybind/gobatch_protocol.h and
// python/gobatch/_protocol.py from them. The limits and the tensor name rule (MaxSlots,
// MaxTensors, MaxDims, ValidateTensorName) are declared here only; config refers to them.
//
// A ring lives in memory mapped by package shm:
//
//	seg, _ := shm.Create(name, layout.SegmentBytes())   // or shm.CreateMemfd / shm.FromFD
//	r, _ := ring.Create(seg.Bytes(), layout, true)      // header, tensor table, READY
//	p, _ := r.NewProducer(writers)
//	go p.Watch(ctx, ring.WatchOptions{})                // consumer died / closed, heartbeat
//	for {                                               // in any number of goroutines
//		w, err := p.Claim(ctx)                          // io.EOF at the end of the stream
//		...                                             // fill w.Tensor(i)
//		w.Publish()
//	}
//
// An attacher maps the whole file and calls Open, which validates every field before it
// uses an offset. A joining producer asks JoinLayout (the whole --join decision: tensor
// table, slots, batch size, start, stream end) and calls NewProducer; a consumer
// calls NewConsumer, then Next / Release in a loop and Close.
//
// Claim takes a batch number (a CAS of its claim at the batch's position) and waits until the
// consumer has granted the batch a slot: any slot the consumer released, in release order, so a
// batch the trainer keeps holds its slot and stops nothing while another is free (grant.go). It
// holds no lock, so writer goroutines in one process and producer processes on one segment
// proceed in parallel and may publish out of order. The consumer still receives batches in
// stream order.
//
// Every wait sleeps in FUTEX_WAIT (shared, not private) for at most 100 ms and then checks
// the other side: a consumer learns that a producer died, failed (the error record) or that
// all producers finished early; a producer learns that the consumer died or closed. Liveness
// is pid plus /proc starttime plus a zombie check, so a reused pid never looks alive.
//
// Memory: sync/atomic operations are sequentially consistent, which is what the protocol
// asks of state words and waiter counts. The race detector does not see memory outside the
// Go heap, so tests also run the protocol over a heap slice, where it does.
package ring
