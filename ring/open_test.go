package ring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func testLayout() Layout {
	return Layout{Slots: 4, BatchSize: 2, StartBatch: 100, TotalBatches: 50, Tensors: []Tensor{
		{Name: "x", DType: Float32, Shape: []int{2, 3, 5}},
		{Name: "label", DType: Int64, Shape: []int{2}},
	}}
}

func TestCreateOpenRoundTrip(t *testing.T) {
	l := testLayout()
	mem := heapMem(l.SegmentBytes() + 4096) // a larger file is fine
	r, err := Create(mem, l, true)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	got := o.Layout()
	if got.Slots != 4 || got.BatchSize != 2 || got.StartBatch != 100 || got.TotalBatches != 50 || len(got.Tensors) != 2 ||
		got.Tensors[0].Name != "x" || got.Tensors[0].DType != Float32 || len(got.Tensors[0].Shape) != 3 || got.Tensors[0].Shape[2] != 5 ||
		got.Tensors[1].Name != "label" || got.Tensors[1].DType != Int64 {
		t.Fatalf("Open read layout %+v", got)
	}
	if err := o.Compatible(l); err != nil {
		t.Errorf("Compatible(own layout) = %v", err)
	}
	other := testLayout()
	other.Tensors[1].DType = Int32
	if err := o.Compatible(other); err == nil || !strings.Contains(err.Error(), "label") {
		t.Errorf("Compatible(different dtype) = %v", err)
	}
	if !o.Named() || o.Nonce() != r.Nonce() || o.Nonce() == 0 {
		t.Errorf("named %v nonce %x/%x", o.Named(), o.Nonce(), r.Nonce())
	}
	off, n := o.Tensor(1)
	if off != 128 || n != 16 {
		t.Errorf("Tensor(1) = %d, %d; want 128, 16", off, n)
	}
	if pid, alive := o.Creator(); int(pid) != os.Getpid() || !alive {
		t.Errorf("Creator = %d %v", pid, alive)
	}
	st := o.Stats()
	if len(st.Producers) != 1 || st.Producers[0].State != EntryActive || int(st.Producers[0].PID) != os.Getpid() || !st.Producers[0].Alive {
		t.Errorf("creator is not registered: %+v", st.Producers)
	}
	if *o.u32(offWordBytes) != 8 || *o.u32(offEndianCheck) != EndianCheck || *o.u32(offState) != stateReady {
		t.Error("identity fields not written")
	}
	if _, err := Create(mem[:l.SegmentBytes()-1], l, false); err == nil {
		t.Error("Create into a too-small mapping succeeded")
	}
}

// corrupt applies edit to a fresh valid ring image and returns Open's error.
func corrupt(t *testing.T, edit func(r *Ring, mem []byte) []byte) error {
	t.Helper()
	l := testLayout()
	l.Counters = testCounters
	mem := heapMem(l.SegmentBytes())
	r, err := Create(mem, l, false)
	if err != nil {
		t.Fatal(err)
	}
	mem = edit(r, mem)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	o, err := OpenContext(ctx, mem)
	if err == nil && o == nil {
		t.Fatal("nil ring without error")
	}
	return err
}

func TestOpenRefusesCorruptHeaders(t *testing.T) {
	p32 := func(off uint64, v uint32) func(*Ring, []byte) []byte {
		return func(r *Ring, m []byte) []byte { *r.u32(off) = v; return m }
	}
	p64 := func(off uint64, v uint64) func(*Ring, []byte) []byte {
		return func(r *Ring, m []byte) []byte { *r.u64(off) = v; return m }
	}
	td := func(t int, f uint64) uint64 { return uint64(offTensorTable+t*tensorStride) + f }
	cd := func(k int, f uint64) uint64 { return counterEntry(k) + f }
	p16 := func(off uint64, v uint16) func(*Ring, []byte) []byte {
		return func(r *Ring, m []byte) []byte { *r.u16(off) = v; return m }
	}
	cases := []struct {
		name string
		edit func(*Ring, []byte) []byte
		want string
	}{
		{"tiny file", func(r *Ring, m []byte) []byte { return m[:100] }, "too small"},
		{"bad magic", p64(offMagic, 0x1234), "magic"},
		{"layout version 1 (fixed job counters)", p32(offLayoutVersion, 1), "incompatible gobatch ring: layout_version 1 (0x1), this build reads 4 (0x4)"},
		{"layout version 2 (batch j in slot j mod slot_count)", p32(offLayoutVersion, 2), "incompatible gobatch ring: layout_version 2 (0x2), this build reads 4 (0x4)"},
		{"layout version 3 (no batch description)", p32(offLayoutVersion, 3), "incompatible gobatch ring: layout_version 3 (0x3), this build reads 4 (0x4)"},
		{"description_len too large", p32(offDescriptionLen, MaxDescription+1), "description_len: 16385, want at most 16384"},
		{"description not UTF-8", func(r *Ring, m []byte) []byte {
			*r.u32(offDescriptionLen) = 2
			m[offDescription], m[offDescription+1] = 0xff, 0xfe
			return m
		}, "description: not UTF-8"},
		{"header bytes", p32(offHeaderBytes, 4096), "header_bytes 4096"},
		{"slot header bytes", p32(offSlotHeaderBytes, 64), "slot_header_bytes 64"},
		{"big endian peer", p32(offEndianCheck, 0x04030201), "endian_check"},
		{"32-bit peer", p32(offWordBytes, 4), "word_bytes 4"},
		{"unknown state", p32(offState, 7), "state: 7"},
		{"slot count 0", p32(offSlotCount, 0), "slot_count: 0"},
		{"slot count 2000", p32(offSlotCount, 2000), "slot_count: 2000"},
		{"tensor count 0", p32(offTensorCount, 0), "tensor_count: 0"},
		{"tensor count 33", p32(offTensorCount, 33), "tensor_count: 33"},
		{"payload align", p32(offPayloadAlign, 8192), "payload_align: 8192"},
		{"payload offset misaligned", p64(offPayloadOffset, 36864+64), "payload_offset"},
		{"payload offset over slot headers", func(r *Ring, m []byte) []byte {
			*r.u32(offSlotCount) = 40 // 40 slot headers end at 37888 > 36864
			return m
		}, "overlaps the 40 slot headers"},
		{"slot stride misaligned", p64(offSlotStride, 4000), "slot_stride"},
		{"slot stride < slot bytes", p64(offSlotBytes, 8192), "smaller than slot_bytes"},
		{"slot headers offset", p64(offSlotHeadersOffset, 4096), "slot_headers_offset"},
		{"segment bytes", p64(offSegmentBytes, 1<<40), "segment_bytes"},
		{"file truncated", func(r *Ring, m []byte) []byte { return m[:len(m)-1] }, "truncated"},
		{"stride overflow", p64(offSlotStride, 1<<62), "segment_bytes"},
		{"tensor name empty", func(r *Ring, m []byte) []byte { m[td(0, tdName)] = 0; return m }, "tensor[0].name"},
		{"tensor name chars", func(r *Ring, m []byte) []byte { m[td(1, tdName)] = '-'; return m }, "tensor[1].name"},
		{"tensor name unterminated", func(r *Ring, m []byte) []byte {
			copy(m[td(0, tdName):], strings.Repeat("a", 32))
			return m
		}, "NUL"},
		{"tensor name junk after NUL", func(r *Ring, m []byte) []byte { m[td(0, tdName)+20] = 'q'; return m }, "after the NUL"},
		{"duplicate names", func(r *Ring, m []byte) []byte { copy(m[td(1, tdName):td(1, tdName)+32], m[td(0, tdName):]); return m }, "used twice"},
		{"dtype", p32(td(1, tdDType), 0), "tensor[1].dtype"},
		{"ndim 0", p32(td(0, tdNdim), 0), "tensor[0].ndim"},
		{"ndim 9", p32(td(0, tdNdim), 9), "tensor[0].ndim"},
		{"nbytes", p64(td(0, tdNbytes), 121), "tensor[0].nbytes"},
		{"shape overflow", p64(td(0, tdShape), 1<<63), "tensor[0].nbytes"},
		{"offset misaligned", p64(td(1, tdOffset), 130), "not a multiple of 64"},
		{"beyond slot", p64(td(1, tdOffset), 4096), "exceeds slot_bytes"},
		{"overlap", p64(td(1, tdOffset), 64), "overlaps tensor"},
		{"counter count", p32(offCounterCount, MaxCounters+1), "counter_count: 65"},
		{"counter kind", p16(cd(0, cdKind), 3), "counter[0]"},
		{"counter scope", p16(cd(1, cdScope), 2), "counter[1]"},
		{"counter name chars", func(r *Ring, m []byte) []byte { m[cd(1, cdName)] = '-'; return m }, "counter[1]"},
		{"counter name empty", func(r *Ring, m []byte) []byte { m[cd(0, cdName)] = 0; return m }, "counter[0]"},
		{"counter name junk after NUL", func(r *Ring, m []byte) []byte { m[cd(0, cdName)+20] = 'q'; return m }, "counter[0].name"},
		{"counter name repeated", func(r *Ring, m []byte) []byte {
			copy(m[cd(1, cdName):cd(1, cdName)+CounterNameBytes], m[cd(0, cdName):])
			return m
		}, "used twice"},
		{"counter width", p16(cd(1, cdWidth), 1), "width 1"},
		{"counter values shared", p16(cd(1, cdFirst), 0), "first 0"},
		{"counter values beyond the array", func(r *Ring, m []byte) []byte {
			*r.u32(offCounterCount) = MaxCounters // 64 entries of 32 values each would need 2048
			for k := 2; k < MaxCounters; k++ {
				copy(m[cd(k, cdName):], fmt.Sprintf("c%d", k))
				*r.u16(cd(k, cdKind)), *r.u16(cd(k, cdScope)), *r.u16(cd(k, cdWidth)) = 1, 1, MaxCounterSources
				*r.u16(cd(k, cdFirst)) = uint16(1 + (k-1)*MaxCounterSources)
			}
			return m
		}, "values"},
	}
	for _, c := range cases {
		err := corrupt(t, c.edit)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestDescriptionRoundTrip: the creator's batch description is what an attacher reads back
// (PROTOCOL.md 2.9), a joiner with another description is refused, and one too long is refused
// before a ring is made.
func TestDescriptionRoundTrip(t *testing.T) {
	l := testLayout()
	l.Description = []byte(`{"order":"epochs","epoch_batches":7,"view":[{"key":["a","b"],"tensor":"x"}]}`)
	mem := heapMem(l.SegmentBytes())
	if _, err := Create(mem, l, false); err != nil {
		t.Fatal(err)
	}
	r, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Layout().Description; string(got) != string(l.Description) {
		t.Errorf("attacher read description %q, want %q", got, l.Description)
	}
	if err := r.Compatible(l); err != nil {
		t.Errorf("Compatible(same description) = %v", err)
	}
	other := l.clone()
	other.Description = []byte(`{"order":"stream"}`)
	if err := r.Compatible(other); err == nil || !strings.Contains(err.Error(), "batch description") {
		t.Errorf("Compatible(other description) = %v, want a refusal naming the batch description", err)
	}
	long := testLayout()
	long.Description = make([]byte, MaxDescription+1)
	if err := long.Validate(); err == nil || !strings.Contains(err.Error(), "batch description of 16385 bytes") {
		t.Errorf("Validate(too long a description) = %v", err)
	}
}

func TestOpenWaitsForReady(t *testing.T) {
	l := testLayout()
	mem := heapMem(l.SegmentBytes())
	r, err := Create(mem, l, false)
	if err != nil {
		t.Fatal(err)
	}
	state := r.u32(offState)
	*state = stateInitialising
	// Live creator (this process): Open waits; it succeeds once READY is stored.
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := OpenContext(ctx, mem)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Open returned before READY: %v", err)
	default:
	}
	storeReady(state)
	if err := <-done; err != nil {
		t.Fatalf("Open after READY: %v", err)
	}
	// Live creator that never finishes: bounded by the context.
	*state = stateInitialising
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := OpenContext(ctx, mem); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open of a ring that stays INITIALISING = %v, want a deadline error", err)
	}
	// magic 0 (header not written yet, PROTOCOL.md 3.6 step 2): Open waits for it.
	storeReady(state)
	*r.u64(offMagic) = 0
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := OpenContext(ctx, mem)
		done <- err
	}()
	time.Sleep(30 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Open returned while magic was 0: %v", err)
	default:
	}
	atomicStore64(r.u64(offMagic), Magic)
	if err := <-done; err != nil {
		t.Fatalf("Open after magic was written: %v", err)
	}
	*state = stateInitialising
	// Dead creator: refused at once, with or without magic.
	pid, st := deadProcess(t)
	*r.u32(offCreatorPID), *r.u64(offCreatorStarttime) = pid, st
	if _, err := Open(mem); err == nil || !strings.Contains(err.Error(), "crashed during creation") {
		t.Errorf("Open with a dead creator = %v", err)
	}
	*r.u64(offMagic) = 0
	if _, err := Open(mem); err == nil || !strings.Contains(err.Error(), "never written and creator pid") {
		t.Errorf("Open with magic 0 and a dead creator = %v", err)
	}
}

// deadProcess returns the pid and starttime of a process that has exited and been reaped.
func deadProcess(t testing.TB) (uint32, uint64) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read x")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := Starttime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	cmd.Wait()
	return uint32(cmd.Process.Pid), st
}

func TestAlive(t *testing.T) {
	me, st, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(uint32(me), st) {
		t.Error("this process is not alive")
	}
	// pid reuse: a live pid whose starttime differs is another process.
	if Alive(uint32(me), st+1) {
		t.Error("a live pid with a different starttime looks alive")
	}
	if Alive(0, 0) {
		t.Error("pid 0 looks alive")
	}
	// Out of descriptors: /proc cannot be read, which proves nothing about the process.
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	var fds []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		fds = append(fds, fd)
		if len(fds) > 1<<20 {
			break
		}
	}
	aliveWithoutFds := Alive(uint32(me), st)
	for _, fd := range fds {
		unix.Close(fd)
	}
	if !aliveWithoutFds {
		t.Errorf("with no free descriptor (%d open, limit %d) this process looks dead", len(fds), lim.Cur)
	}
	pid, pst := deadProcess(t)
	if Alive(pid, pst) {
		t.Error("a reaped process looks alive")
	}
	// A zombie (exited, not yet reaped) is dead.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	zst, err := Starttime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _, err := procStat(itoa(cmd.Process.Pid))
		if err == nil && s == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child never became a zombie (state %c, %v)", s, err)
		}
		time.Sleep(time.Millisecond)
	}
	if Alive(uint32(cmd.Process.Pid), zst) {
		t.Error("a zombie looks alive")
	}
	cmd.Wait()
}

// TestProcStatParsing covers comm values with spaces and parentheses.
func TestProcStatParsing(t *testing.T) {
	dir := t.TempDir()
	exe := dir + "/odd ) name"
	if err := os.Symlink("/bin/sleep", exe); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	st, err := Starttime(cmd.Process.Pid)
	if err != nil || st == 0 {
		t.Fatalf("Starttime of %q = %d, %v", exe, st, err)
	}
	if !Alive(uint32(cmd.Process.Pid), st) {
		t.Error("child with an odd comm is not alive")
	}
}

// FuzzOpen feeds Open a valid ring image with one word overwritten, or raw bytes: it must
// return a ring or an error, never panic or hang, and a ring it accepts must lie inside mem.
func FuzzOpen(f *testing.F) {
	f.Add(uint16(offSlotCount), uint64(5), false, []byte{})
	f.Add(uint16(offTensorTable+tdNdim), uint64(0), false, []byte{})
	f.Add(uint16(offTensorTable+tdShape), uint64(1<<40), false, []byte{})
	f.Add(uint16(offSlotStride), uint64(1<<63), false, []byte{})
	f.Add(uint16(0), uint64(0), true, []byte("GOBATCH1"))
	l := testLayout()
	f.Fuzz(func(t *testing.T, off uint16, val uint64, raw bool, data []byte) {
		var mem []byte
		if raw {
			mem = heapMem(int64(len(data) + 8192))
			copy(mem, data)
			if len(data) >= 8 {
				*(*uint64)(unsafe.Pointer(&mem[0])) = Magic
			}
		} else {
			mem = heapMem(l.SegmentBytes())
			if _, err := Create(mem, l, false); err != nil {
				t.Fatal(err)
			}
			o := uint64(off) % HeaderBytes &^ 7
			*(*uint64)(unsafe.Pointer(&mem[o])) = val
			if len(data) > 0 {
				copy(mem[offTensorTable:offTensorTable+256], data)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		r, err := OpenContext(ctx, mem)
		if err != nil {
			return
		}
		if r.g.segmentBytes > uint64(len(mem)) {
			t.Fatalf("accepted segment_bytes %d > %d", r.g.segmentBytes, len(mem))
		}
		for i := 0; i < int(r.slots); i++ {
			for k := range r.layout.Tensors {
				_ = r.tensorIn(uint64(i), k) // must not panic
			}
		}
	})
}
