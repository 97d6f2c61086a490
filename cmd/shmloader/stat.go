package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

func init() {
	register("stat", "live view of a named ring: slots, rates, waits, producers, consumer", cmdStat)
}

// statView is one line of `shmloader stat`: the ring's state now and its rates over the last
// interval.
type statView struct {
	Ring       string  `json:"ring"`
	Time       string  `json:"time"`
	IntervalS  float64 `json:"interval_s"`
	SlotsFull  int     `json:"slots_full"`
	SlotsTotal int     `json:"slots_total"`
	SlotBytes  int64   `json:"slot_bytes"`

	BatchesWritten uint64 `json:"batches_written"`
	BatchesRead    uint64 `json:"batches_read"`
	TotalBatches   uint64 `json:"total_batches"` // 0 = unbounded
	StartBatch     uint64 `json:"start_batch"`

	WrittenPerS   float64 `json:"written_batches_per_s"`
	ReadPerS      float64 `json:"read_batches_per_s"`
	WrittenMBPerS float64 `json:"written_mb_per_s"` // 10^6 bytes
	ReadMBPerS    float64 `json:"read_mb_per_s"`

	// ProducerWait is the share of producer writer time spent waiting for a free slot
	// (wait / (wait + busy), summed over writers); ConsumerWait the share of wall time the
	// consumer spent waiting for a ready batch. Both over the interval; -1 when undefined.
	ProducerWait float64 `json:"producer_wait_fraction"`
	ConsumerWait float64 `json:"consumer_wait_fraction"`

	ProducersAlive int            `json:"producers_alive"`
	Producers      []statProducer `json:"producers"`
	CreatorPID     uint32         `json:"creator_pid"`
	CreatorAlive   bool           `json:"creator_alive"`
	ConsumerState  string         `json:"consumer_state"`
	ConsumerPID    uint32         `json:"consumer_pid,omitempty"`
	ConsumerAlive  bool           `json:"consumer_alive"`
	ConsumerStop   bool           `json:"consumer_stopped,omitempty"`
	Error          string         `json:"error,omitempty"`
}

type statProducer struct {
	Entry   int    `json:"entry"`
	State   string `json:"state"`
	PID     uint32 `json:"pid"`
	Alive   bool   `json:"alive"`
	Stopped bool   `json:"stopped,omitempty"` // alive but stopped (SIGSTOP): it makes no progress
	Writers uint32 `json:"writers"`
	Batches uint64 `json:"batches"`
}

// makeStatView compares two snapshots taken dt apart (ring.RatesBetween).
func makeStatView(name string, prev, cur ring.Stats, dt time.Duration, now time.Time) statView {
	r := ring.RatesBetween(prev, cur, dt)
	v := statView{
		Ring: name, Time: now.Format(time.RFC3339Nano), IntervalS: dt.Seconds(),
		SlotsFull: cur.Full, SlotsTotal: cur.Slots, SlotBytes: cur.SlotBytes,
		BatchesWritten: cur.BatchesWritten, BatchesRead: cur.BatchesRead,
		TotalBatches: cur.TotalBatches, StartBatch: cur.StartBatch,
		CreatorPID: cur.CreatorPID, CreatorAlive: cur.CreatorAlive,
		ConsumerState: ring.ConsumerStateName(cur.ConsumerState), ConsumerAlive: cur.ConsumerAlive, ConsumerStop: cur.ConsumerStopped,
		WrittenPerS: r.WrittenPerS, ReadPerS: r.ReadPerS, WrittenMBPerS: r.WrittenMBPerS, ReadMBPerS: r.ReadMBPerS,
		ProducerWait: r.ProducerWait, ConsumerWait: r.ConsumerWait, ProducersAlive: r.ProducersAlive,
	}
	if cur.ConsumerState != ring.ConsumerNone {
		v.ConsumerPID = cur.ConsumerPID
	}
	for _, p := range cur.Producers {
		v.Producers = append(v.Producers, statProducer{Entry: p.Entry, State: ring.EntryStateName(p.State),
			PID: p.PID, Alive: p.Alive, Stopped: p.Stopped, Writers: p.Writers, Batches: p.Batches})
	}
	if cur.Error != nil {
		v.Error = cur.Error.Text
	}
	return v
}

func fraction(f float64) string {
	if f < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// text renders the view for people.
func (v statView) text() string {
	var b strings.Builder
	total := "unbounded"
	if v.TotalBatches != 0 {
		total = fmt.Sprintf("of %d", v.TotalBatches)
	}
	fmt.Fprintf(&b, "ring %s  slots %d/%d full (%s each)  batches written %d, read %d %s\n",
		v.Ring, v.SlotsFull, v.SlotsTotal, mb(v.SlotBytes), v.BatchesWritten, v.BatchesRead, total)
	fmt.Fprintf(&b, "  write %.1f batches/s %.1f MB/s   read %.1f batches/s %.1f MB/s   wait: producers %s consumer %s\n",
		v.WrittenPerS, v.WrittenMBPerS, v.ReadPerS, v.ReadMBPerS, fraction(v.ProducerWait), fraction(v.ConsumerWait))
	consumer := v.ConsumerState
	if v.ConsumerPID != 0 {
		consumer += fmt.Sprintf(" pid %d", v.ConsumerPID)
		switch {
		case (v.ConsumerState == "ATTACHED" || v.ConsumerState == "CLAIMING") && !v.ConsumerAlive:
			consumer += " (dead)"
		case v.ConsumerStop:
			consumer += " (stopped)"
		}
	}
	var ps []string
	for _, p := range v.Producers {
		s := fmt.Sprintf("%d:%s pid %d", p.Entry, p.State, p.PID)
		if !p.Alive && (p.State == "ACTIVE" || p.State == "CLAIMING") {
			s += " (dead)"
		} else if p.Stopped {
			s += " (stopped)"
		}
		ps = append(ps, s)
	}
	fmt.Fprintf(&b, "  producers alive %d [%s]   consumer %s\n", v.ProducersAlive, strings.Join(ps, ", "), consumer)
	if v.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", v.Error)
	}
	return b.String()
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func cmdStat(args []string) int {
	fl := newFlagSet("stat", "NAME")
	once := fl.Bool("once", false, "print one snapshot (rates over one interval) and exit")
	asJSON := fl.Bool("json", false, "print JSON, one object per line")
	interval := fl.Duration("interval", time.Second, "refresh interval, and the window rates are measured over")
	allowUID := addAllowUIDFlag(fl)
	lf := addLogFlags(fl)
	pos, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError("stat", fmt.Errorf("want exactly one ring NAME, got %d arguments (see shmloader stat -h)", len(pos)))
	}
	if *interval < 10*time.Millisecond {
		return usageError("stat", fmt.Errorf("--interval %v: want at least 10ms", *interval))
	}
	if _, err := lf.logger("stat"); err != nil {
		return usageError("stat", err)
	}
	name := pos[0]
	if err := shm.ValidateName(name); err != nil {
		return usageError("stat", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	seg, r, err := ring.AttachNamedAllowing(ctx, name, false, *allowUID)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("no ring %q (%s)", name, shm.Path(name))
		}
		fmt.Fprintf(os.Stderr, "shmloader stat: %v\n", err)
		return exitFailure
	}
	defer seg.Close()
	var ino uint64
	if st, err := os.Stat(shm.Path(name)); err == nil {
		ino = inode(st)
	}
	need := r.Layout().SegmentBytes()
	return statLoop(ctx, os.Stdout, name, r, *interval, *once, *asJSON, func() (string, bool) {
		var fst syscall.Stat_t
		if syscall.Fstat(seg.Fd(), &fst) == nil && fst.Size < need {
			return fmt.Sprintf("ring %s was truncated: its file holds %d bytes, the ring needs %d (another process "+
				"cut it short; its batches are lost)", name, fst.Size, need), true
		}
		st, err := os.Stat(shm.Path(name))
		if err != nil || inode(st) != ino {
			return fmt.Sprintf("ring %s is gone (its creator removed it)", name), false
		}
		return "", false
	})
}

// statLoop prints a view every interval until ctx ends, the ring's file goes away or is cut
// short (gone says why, and whether that is a failure), or after one view with once.
func statLoop(ctx context.Context, w io.Writer, name string, r *ring.Ring, interval time.Duration, once, asJSON bool, gone func() (string, bool)) (code int) {
	// A truncation between two checks makes the next read of the header fault: with
	// SetPanicOnFault that is a panic here, reported as the truncation, not a crash (SIGBUS).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := recover(); e != nil {
			// A memory fault's panic carries its address (runtime.Error with Addr); any other
			// panic is a bug and stays one.
			if _, fault := e.(interface{ Addr() uintptr }); !fault {
				panic(e)
			}
			why, _ := gone()
			if why == "" {
				why = fmt.Sprintf("ring %s: a fault reading its header (its file was cut short and grown again?)", name)
			}
			fmt.Fprintf(os.Stderr, "shmloader stat: %s\n", why)
			code = exitFailure
		}
	}()
	prev, t0 := r.Stats(), time.Now()
	tty := false
	if f, ok := w.(*os.File); ok && !asJSON && !once {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-tk.C:
		}
		cur, now := r.Stats(), time.Now()
		v := makeStatView(name, prev, cur, now.Sub(t0), now)
		prev, t0 = cur, now
		switch {
		case asJSON:
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "%s\n", b)
		case tty:
			fmt.Fprint(w, "\x1b[H\x1b[2J"+v.text()) // redraw in place
		default:
			fmt.Fprint(w, v.text())
		}
		if once {
			return exitOK
		}
		if why, failed := gone(); why != "" {
			fmt.Fprintf(os.Stderr, "shmloader stat: %s\n", why)
			if failed {
				return exitFailure
			}
			return exitOK
		}
	}
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
