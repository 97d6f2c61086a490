package ring

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Failpoints stop this process at an exact protocol state, for the fault tests
// (PROTOCOL.md appendix A). GOBATCH_FAILPOINT=name[@batch][:count[:action]] is read once at
// start: the count-th time (default 1) the process passes the point called name (for that
// absolute batch index, when one is given) it sends itself SIGKILL (action "kill", the
// default) or SIGSTOP ("stop"). Unset, a failpoint costs one load of a nil pointer.

// FailpointEnv is the environment variable that arms a failpoint.
const FailpointEnv = "GOBATCH_FAILPOINT"

// The failpoints of the Go side (the C library has the consumer's own, of the same names).
const (
	FPConsumerClaiming    = "consumer-claiming"    // consumer_state = CLAIMING with our pid, starttime not written
	FPConsumerAttached    = "consumer-attached"    // consumer_state = ATTACHED
	FPConsumerReading     = "consumer-reading"     // a slot stored READING, not yet released
	FPConsumerReleased    = "consumer-released"    // a slot stored FREE(lap+1) by the consumer and granted to a later batch
	FPProducerRegistering = "producer-registering" // registry entry CLAIMING, pid not written
	FPProducerActive      = "producer-active"      // registry entry ACTIVE
	FPSlotGranted         = "slot-granted"         // the batch's grant seen (slot known), the slot still FREE
	FPSlotWriting         = "slot-writing"         // slot CAS to WRITING, payload not written
	FPSlotFilled          = "slot-filled"          // payload written, state still WRITING (before publish)
	FPSlotReady           = "slot-ready"           // slot stored READY, claim not yet released
	FPSlotClaimed         = "slot-claimed"         // batch claim recorded in the slot, next_claim not advanced, not WRITING
	FPSlotReclaimed       = "slot-reclaimed"       // a dead producer's claim taken over, the batch not yet produced
	FPProducerReclaimed   = "producer-reclaimed"   // a dead producer's entry marked RECLAIMED
)

// Failpoints lists every failpoint name (Go and C), for the document test.
var Failpoints = []string{FPConsumerClaiming, FPConsumerAttached, FPConsumerReading, FPConsumerReleased,
	FPProducerRegistering, FPProducerActive, FPSlotWriting, FPSlotFilled, FPSlotReady,
	FPSlotClaimed, FPSlotReclaimed, FPSlotGranted, FPProducerReclaimed}

// batchFailpoints are the points that take a batch, name@K (PROTOCOL.md appendix A).
var batchFailpoints = []string{FPSlotClaimed, FPSlotReclaimed, FPSlotGranted, FPSlotWriting, FPSlotFilled, FPSlotReady}

type failpointSpec struct {
	name  string
	batch int64 // -1: any batch; else the absolute stream index the point fires for
	count int64
	sig   syscall.Signal
	hits  atomic.Int64
}

var armed = mustParseFailpoint(os.Getenv(FailpointEnv))

func mustParseFailpoint(s string) *failpointSpec {
	fp, err := parseFailpoint(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gobatch: %s=%q: %v\n", FailpointEnv, s, err)
		os.Exit(2)
	}
	return fp
}

func parseFailpoint(s string) (*failpointSpec, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return nil, fmt.Errorf("want name[:count[:kill|stop]]")
	}
	fp := &failpointSpec{name: parts[0], batch: -1, count: 1, sig: syscall.SIGKILL}
	if name, k, ok := strings.Cut(fp.name, "@"); ok {
		b, err := strconv.ParseInt(k, 10, 64)
		if err != nil || b < 0 {
			return nil, fmt.Errorf("batch %q is not an integer >= 0", k)
		}
		if !slices.Contains(batchFailpoints, name) {
			return nil, fmt.Errorf("failpoint %q takes no batch (those that do: %s)", name, strings.Join(batchFailpoints, ", "))
		}
		fp.name, fp.batch = name, b
	}
	if !slices.Contains(Failpoints, fp.name) {
		return nil, fmt.Errorf("unknown failpoint %q (known: %s)", fp.name, strings.Join(Failpoints, ", "))
	}
	if len(parts) > 1 {
		n, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("count %q is not a positive integer", parts[1])
		}
		fp.count = n
	}
	if len(parts) > 2 {
		switch parts[2] {
		case "kill":
		case "stop":
			fp.sig = syscall.SIGSTOP
		default:
			return nil, fmt.Errorf("action %q is not kill or stop", parts[2])
		}
	}
	return fp, nil
}

// failpoint stops the process if the armed failpoint is name and this is its count-th pass.
func failpoint(name string) { failpointBatch(name, ^uint64(0)) }

// failpointBatch is failpoint at a point that handles batch seq (an absolute stream index): a
// failpoint armed for one batch (name@K) counts only the passes for that batch.
func failpointBatch(name string, seq uint64) {
	if armed == nil || armed.name != name || armed.batch >= 0 && uint64(armed.batch) != seq {
		return
	}
	if armed.hits.Add(1) == armed.count {
		// To this thread: a signal to the process may be taken by another thread first, and
		// this one (the goroutine at the point) would run on for microseconds, enough to
		// publish its batch and claim more before a stop reaches it.
		runtime.LockOSThread()
		syscall.Tgkill(os.Getpid(), syscall.Gettid(), armed.sig)
		runtime.UnlockOSThread()
	}
}
