package ring

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

// DefaultAttachTimeout bounds Open's wait for a ring that is still initialising.
const DefaultAttachTimeout = 10 * time.Second

// Ring is one process's view of a ring segment. It does not own the memory: the caller maps
// it (package shm) and unmaps it after the last use of the Ring and everything made from it.
type Ring struct {
	mem    []byte
	layout Layout
	g      geometry
	slots  uint64
	named  bool
	nonce  uint64

	counterFirst []int // index of each counter's first value (PROTOCOL.md 2.8)

	// creatorEntry is the registry entry Create registered (-1 for an attached ring);
	// the first NewProducer takes it over.
	creatorEntry int
	creatorGen   uint32 // its generation (0: a new ring's entries are all FREE)
	creatorTaken atomic.Bool

	lost atomic.Pointer[LostError] // the segment was cut short under the mapping (lost.go)

	// Spin is the number of state loads a waiter makes before it sleeps in FUTEX_WAIT
	// (0, the default, sleeps at once). Set it before making producers and consumers.
	Spin int
}

func (r *Ring) u16(off uint64) *uint16 { return (*uint16)(unsafe.Pointer(&r.mem[off])) }
func (r *Ring) u32(off uint64) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }
func (r *Ring) u64(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

func (r *Ring) slotHeader(i uint64) uint64 { return slotHeadersOffset + i*SlotHeaderBytes }
func (r *Ring) slotState(i uint64) *uint32 { return r.u32(r.slotHeader(i) + shState) }
func (r *Ring) slotWaiters(i uint64) *uint32 {
	return r.u32(r.slotHeader(i) + shWaiters)
}
func entryOff(j int) uint64 { return offRegistry + uint64(j)*registryStride }

// Layout returns the ring's layout (a copy).
func (r *Ring) Layout() Layout { return r.layout.clone() }

// Tensor returns the byte offset of tensor i inside a slot's payload and its size.
func (r *Ring) Tensor(i int) (offset, nbytes int64) {
	return int64(r.g.offsets[i]), int64(r.g.nbytes[i])
}

// SlotBytes returns the payload bytes of one batch.
func (r *Ring) SlotBytes() int64 { return int64(r.g.slotBytes) }

// SegmentBytes returns the size of the ring's segment.
func (r *Ring) SegmentBytes() int64 { return int64(r.g.segmentBytes) }

// Named reports whether the creator marked the segment as named (creator_flags bit 0).
func (r *Ring) Named() bool { return r.named }

// Nonce returns the random identity of this ring instance.
func (r *Ring) Nonce() uint64 { return r.nonce }

// Creator returns the creating process's pid and whether it is alive.
func (r *Ring) Creator() (pid uint32, alive bool) {
	pid = atomic.LoadUint32(r.u32(offCreatorPID))
	return pid, Alive(pid, atomic.LoadUint64(r.u64(offCreatorStarttime)))
}

// slotPayload returns the payload bytes of slot i.
func (r *Ring) slotPayload(i uint64) []byte {
	base := r.g.payloadOffset + i*r.g.slotStride
	return r.mem[base : base+r.g.slotBytes : base+r.g.slotBytes]
}

func (r *Ring) tensorIn(i uint64, t int) []byte {
	base := r.g.payloadOffset + i*r.g.slotStride + r.g.offsets[t]
	end := base + r.g.nbytes[t]
	return r.mem[base:end:end]
}

// Create writes a new ring into mem, a zero-filled shared mapping of at least
// l.SegmentBytes() bytes (shm.Create or shm.CreateMemfd), following PROTOCOL.md 3.6: it writes
// the header and tensor table with state INITIALISING, registers this process as producer
// entry 0, then stores state READY. named sets creator_flags bit 0.
func Create(mem []byte, l Layout, named bool) (*Ring, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	g := l.geometry()
	if uint64(len(mem)) < g.segmentBytes {
		return nil, fmt.Errorf("gobatch ring: create: mapping of %d bytes is smaller than segment_bytes %d", len(mem), g.segmentBytes)
	}
	pid, starttime, err := selfIdentity()
	if err != nil {
		return nil, fmt.Errorf("gobatch ring: create: own process identity: %w", err)
	}
	r := &Ring{mem: mem, layout: l.clone(), g: g, slots: uint64(l.Slots), named: named, creatorEntry: -1,
		counterFirst: counterFirsts(l.Counters)}
	// The header and slot headers must read as zero (all slots FREE(lap 0)); the payload is
	// left alone (a fresh tmpfs file is zero-filled and the producers overwrite it anyway).
	clear(mem[:g.payloadOffset])

	r.nonce = rand.Uint64()
	atomic.StoreUint32(r.u32(offCreatorPID), uint32(pid))
	atomic.StoreUint64(r.u64(offCreatorStarttime), starttime)
	var flags uint32
	if named {
		flags = creatorNamed
	}
	*r.u32(offCreatorFlags) = flags
	*r.u32(offLayoutVersion) = LayoutVersion
	*r.u32(offHeaderBytes) = HeaderBytes
	*r.u32(offSlotHeaderBytes) = SlotHeaderBytes
	*r.u32(offEndianCheck) = EndianCheck
	*r.u32(offWordBytes) = uint32(unsafe.Sizeof(uintptr(0)))
	*r.u64(offSegmentBytes) = g.segmentBytes
	*r.u32(offSlotCount) = uint32(l.Slots)
	*r.u32(offTensorCount) = uint32(len(l.Tensors))
	*r.u64(offSlotStride) = g.slotStride
	*r.u64(offSlotBytes) = g.slotBytes
	*r.u64(offPayloadOffset) = g.payloadOffset
	*r.u64(offSlotHeadersOffset) = slotHeadersOffset
	*r.u64(offStartBatch) = l.StartBatch
	*r.u64(offTotalBatches) = l.TotalBatches
	*r.u32(offBatchSize) = uint32(l.BatchSize)
	*r.u32(offPayloadAlign) = uint32(g.payloadAlign)
	*r.u64(offNonce) = r.nonce
	for t, ten := range l.Tensors {
		d := uint64(offTensorTable + t*tensorStride)
		copy(mem[d+tdName:d+tdName+TensorNameBytes], ten.Name)
		*r.u32(d + tdDType) = uint32(ten.DType)
		*r.u32(d + tdNdim) = uint32(len(ten.Shape))
		for k, s := range ten.Shape {
			*r.u64(d + tdShape + uint64(8*k)) = uint64(s)
		}
		*r.u64(d + tdOffset) = g.offsets[t]
		*r.u64(d + tdNbytes) = g.nbytes[t]
	}
	r.writeCounterTable(l.Counters)
	*r.u32(offDescriptionLen) = uint32(len(l.Description))
	copy(r.mem[offDescription:offDescription+MaxDescription], l.Description)
	r.initGrants()
	// magic last (atomically), so that a reader that sees it also sees the creator identity.
	atomic.StoreUint64(r.u64(offMagic), Magic)
	j, gen, err := r.register(0)
	if err != nil {
		return nil, err
	}
	r.creatorEntry, r.creatorGen = j, gen
	atomic.StoreUint32(r.u32(offState), stateReady)
	futexWake(r.u32(offState))
	return r, nil
}

// Open attaches to an existing ring in mem (the whole file mapped, so len(mem) is the file
// size), waiting up to DefaultAttachTimeout for a ring whose header is not yet written
// (magic 0) or that is still initialising. It runs the
// checks of PROTOCOL.md 3.6 before it uses any offset from the segment.
func Open(mem []byte) (*Ring, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAttachTimeout)
	defer cancel()
	return OpenContext(ctx, mem)
}

// OpenContext is Open with the wait for READY bounded by ctx.
func OpenContext(ctx context.Context, mem []byte) (*Ring, error) {
	if len(mem) < HeaderBytes {
		return nil, headerErr("file size", "not a gobatch segment: too small (%d bytes, a ring is at least %d)", len(mem), HeaderBytes)
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("gobatch ring: mapping is not 8-byte aligned")
	}
	r := &Ring{mem: mem, creatorEntry: -1}
	if err := r.waitMagic(ctx); err != nil {
		return nil, err
	}
	if m := atomic.LoadUint64(r.u64(offMagic)); m != Magic {
		return nil, headerErr("magic", "not a gobatch segment: magic %#016x, want %#016x (\"GOBATCH1\")", m, Magic)
	}
	for _, f := range []struct {
		name      string
		off       uint64
		want      uint32
		thisBuild string
	}{
		{"layout_version", offLayoutVersion, LayoutVersion, "this build reads"},
		{"header_bytes", offHeaderBytes, HeaderBytes, "this build reads"},
		{"slot_header_bytes", offSlotHeaderBytes, SlotHeaderBytes, "this build reads"},
		{"endian_check", offEndianCheck, EndianCheck, "this machine writes"},
		{"word_bytes", offWordBytes, uint32(unsafe.Sizeof(uintptr(0))), "this build has"},
	} {
		if v := atomic.LoadUint32(r.u32(f.off)); v != f.want {
			return nil, &HeaderError{Field: f.name, Detail: fmt.Sprintf("incompatible gobatch ring: %s %d (%#x), %s %d (%#x)", f.name, v, v, f.thisBuild, f.want, f.want)}
		}
	}
	if err := r.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := r.readGeometry(); err != nil {
		return nil, err
	}
	return r, nil
}

// waitMagic waits while magic is 0: the creator has reserved the file but not yet written
// the header (PROTOCOL.md 3.6 step 2). A creator pid that is set and dead ends the wait.
func (r *Ring) waitMagic(ctx context.Context) error {
	for atomic.LoadUint64(r.u64(offMagic)) == 0 {
		pid := atomic.LoadUint32(r.u32(offCreatorPID))
		if pid != 0 && !Alive(pid, atomic.LoadUint64(r.u64(offCreatorStarttime))) && atomic.LoadUint64(r.u64(offMagic)) == 0 {
			return headerErr("magic", "0: the header was never written and creator pid %d is dead (crashed during creation; `shmloader gc` removes it)", pid)
		}
		if ctx.Err() != nil {
			return headerErr("magic", "0: the header was not written in time (not a gobatch segment, or its creator is stuck): %v", context.DeadlineExceeded)
		}
		futexWait(r.u32(offState), 0, 5*time.Millisecond) // a plain sleep: nobody wakes this
	}
	return nil
}

func (r *Ring) waitReady(ctx context.Context) error {
	state := r.u32(offState)
	for {
		v := atomic.LoadUint32(state)
		if v == stateReady {
			return nil
		}
		if v != stateInitialising {
			return headerErr("state", "%d, want 0 (INITIALISING) or 1 (READY)", v)
		}
		pid := atomic.LoadUint32(r.u32(offCreatorPID))
		if pid != 0 && !Alive(pid, atomic.LoadUint64(r.u64(offCreatorStarttime))) {
			// Re-check: the creator may have finished and exited in between.
			if atomic.LoadUint32(state) == stateReady {
				return nil
			}
			return headerErr("state", "ring is INITIALISING and its creator pid %d is dead (crashed during creation; `shmloader gc` removes it)", pid)
		}
		d := waitSlice
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		if err := ctx.Err(); err != nil || d <= 0 {
			return fmt.Errorf("gobatch ring: ring still INITIALISING (creator pid %d): %w", pid, context.DeadlineExceeded)
		}
		futexWait(state, v, min(d, 10*time.Millisecond))
	}
}

// readGeometry runs step 4 of PROTOCOL.md 3.6 and fills r. The header's geometry is
// checked whole before the tensor table is read, and the table before r takes any of
// it, so that no offset from the segment is used unchecked.
func (r *Ring) readGeometry() error {
	h := r.headerGeometry()
	if err := h.checkRanges(); err != nil {
		return err
	}
	if err := h.checkPlacement(); err != nil {
		return err
	}
	if err := h.checkSize(uint64(len(r.mem))); err != nil {
		return err
	}
	l, g, err := r.readTensorTable(h)
	if err != nil {
		return err
	}
	if l.Counters, err = r.readCounterTable(); err != nil {
		return err
	}
	if l.Description, err = r.readDescription(); err != nil {
		return err
	}
	r.layout, r.g, r.slots, r.counterFirst = l, g, h.slotCount, counterFirsts(l.Counters)
	r.named = *r.u32(offCreatorFlags)&creatorNamed != 0
	r.nonce = *r.u64(offNonce)
	return nil
}

// readDescription reads the batch description of an attached ring (PROTOCOL.md 2.9, 3.6 step
// 4): at most MaxDescription bytes of UTF-8. Its meaning (JSON) is the consumer's to check.
func (r *Ring) readDescription() ([]byte, error) {
	n := *r.u32(offDescriptionLen)
	if n > MaxDescription {
		return nil, headerErr("description_len", "%d, want at most %d", n, MaxDescription)
	}
	d := append([]byte(nil), r.mem[offDescription:offDescription+n]...)
	if !utf8.Valid(d) {
		return nil, headerErr("description", "not UTF-8")
	}
	return d, nil
}

// headerGeometry holds the header's geometry fields as read from the segment, not yet
// trusted.
type headerGeometry struct {
	slotCount, tensorCount uint64
	align                  uint64 // payload_align
	payloadOff, shOff      uint64 // payload_offset, slot_headers_offset
	stride, slotBytes      uint64 // slot_stride, slot_bytes
	segBytes               uint64 // segment_bytes
}

func (r *Ring) headerGeometry() headerGeometry {
	return headerGeometry{
		slotCount:   uint64(*r.u32(offSlotCount)),
		tensorCount: uint64(*r.u32(offTensorCount)),
		align:       uint64(*r.u32(offPayloadAlign)),
		payloadOff:  *r.u64(offPayloadOffset),
		stride:      *r.u64(offSlotStride),
		slotBytes:   *r.u64(offSlotBytes),
		segBytes:    *r.u64(offSegmentBytes),
		shOff:       *r.u64(offSlotHeadersOffset),
	}
}

// checkRanges checks the fields that are valid or not on their own: the counts within
// the protocol's limits, one of the two alignments, the fixed slot header offset.
func (h headerGeometry) checkRanges() error {
	if h.slotCount < 1 || h.slotCount > MaxSlots {
		return headerErr("slot_count", "%d, want 1 to %d", h.slotCount, MaxSlots)
	}
	if h.tensorCount < 1 || h.tensorCount > MaxTensors {
		return headerErr("tensor_count", "%d, want 1 to %d", h.tensorCount, MaxTensors)
	}
	if h.align != SmallAlign && h.align != HugeAlign {
		return headerErr("payload_align", "%d, want %d or %d", h.align, SmallAlign, HugeAlign)
	}
	if h.shOff != slotHeadersOffset {
		return headerErr("slot_headers_offset", "%d, want %d", h.shOff, slotHeadersOffset)
	}
	return nil
}

// checkPlacement checks how the areas sit: payload and slots aligned, the payload after
// the slot headers, each slot's payload within its stride. The counts are in range
// (checkRanges), so the slot header end cannot overflow.
func (h headerGeometry) checkPlacement() error {
	if h.payloadOff%h.align != 0 {
		return headerErr("payload_offset", "%d is not a multiple of payload_align %d", h.payloadOff, h.align)
	}
	if h.stride%h.align != 0 {
		return headerErr("slot_stride", "%d is not a multiple of payload_align %d", h.stride, h.align)
	}
	if h.payloadOff < h.shOff+h.slotCount*SlotHeaderBytes {
		return headerErr("payload_offset", "%d overlaps the %d slot headers ending at %d", h.payloadOff, h.slotCount, h.shOff+h.slotCount*SlotHeaderBytes)
	}
	if h.stride < h.slotBytes {
		return headerErr("slot_stride", "%d is smaller than slot_bytes %d", h.stride, h.slotBytes)
	}
	return nil
}

// checkSize checks that segment_bytes is exactly the payload offset plus the slots
// (computed without overflow) and that the file of fileSize bytes holds it.
func (h headerGeometry) checkSize(fileSize uint64) error {
	hi, prod := bits.Mul64(h.slotCount, h.stride)
	sum, carry := bits.Add64(h.payloadOff, prod, 0)
	if hi != 0 || carry != 0 || sum != h.segBytes {
		return headerErr("segment_bytes", "%d, but payload_offset %d + slot_count %d x slot_stride %d = %d", h.segBytes, h.payloadOff, h.slotCount, h.stride, sum)
	}
	if fileSize < h.segBytes {
		return headerErr("segment_bytes", "%d, but the file is only %d bytes (truncated?)", h.segBytes, fileSize)
	}
	if h.segBytes > maxSegment {
		return headerErr("segment_bytes", "%d is too large", h.segBytes)
	}
	return nil
}

// readTensorTable reads the layout and the per-tensor geometry from a header whose
// geometry checked out, checking each tensor before it is taken.
func (r *Ring) readTensorTable(h headerGeometry) (Layout, geometry, error) {
	l := Layout{
		Slots:        int(h.slotCount),
		StartBatch:   *r.u64(offStartBatch),
		TotalBatches: *r.u64(offTotalBatches),
		BatchSize:    int(*r.u32(offBatchSize)),
		Tensors:      make([]Tensor, h.tensorCount),
	}
	g := geometry{
		offsets: make([]uint64, h.tensorCount), nbytes: make([]uint64, h.tensorCount),
		slotBytes: h.slotBytes, payloadAlign: h.align, slotStride: h.stride, payloadOffset: h.payloadOff, segmentBytes: h.segBytes,
	}
	names := make(map[string]bool, h.tensorCount)
	for t := uint64(0); t < h.tensorCount; t++ {
		ten, nb, err := r.readTensor(t, names)
		if err != nil {
			return Layout{}, geometry{}, err
		}
		off := *r.u64(tensorEntry(t) + tdOffset)
		if err := checkTensorPlace(t, ten.Name, off, nb, l.Tensors[:t], g); err != nil {
			return Layout{}, geometry{}, err
		}
		l.Tensors[t] = ten
		g.offsets[t], g.nbytes[t] = off, nb
	}
	return l, g, nil
}

// tensorEntry is the segment offset of tensor t's entry in the tensor table.
func tensorEntry(t uint64) uint64 { return offTensorTable + t*tensorStride }

// tensorField names field f of tensor t in a HeaderError.
func tensorField(t uint64, f string) string { return fmt.Sprintf("tensor[%d].%s", t, f) }

// readTensor reads tensor t's name, dtype and shape and returns it with its nbytes.
// names holds the names of the tensors before it, and takes t's.
func (r *Ring) readTensor(t uint64, names map[string]bool) (Tensor, uint64, error) {
	name, err := r.readTensorName(t, names)
	if err != nil {
		return Tensor{}, 0, err
	}
	dt := DType(*r.u32(tensorEntry(t) + tdDType))
	if !dt.Valid() {
		return Tensor{}, 0, headerErr(tensorField(t, "dtype"), "invalid code %d (tensor %q)", uint32(dt), name)
	}
	shape, nb, err := r.readTensorShape(t, dt, name)
	if err != nil {
		return Tensor{}, 0, err
	}
	return Tensor{Name: name, DType: dt, Shape: shape}, nb, nil
}

// readTensorName reads tensor t's NUL-padded name (PROTOCOL.md: 1 to 31 bytes, unique).
// Padding that is not all zero is refused: the field would then hold more than a name.
func (r *Ring) readTensorName(t uint64, names map[string]bool) (string, error) {
	d := tensorEntry(t)
	raw := r.mem[d+tdName : d+tdName+TensorNameBytes]
	n := bytes.IndexByte(raw, 0)
	if n < 0 {
		return "", headerErr(tensorField(t, "name"), "not NUL-terminated within %d bytes", TensorNameBytes)
	}
	if bytes.IndexFunc(raw[n:], func(c rune) bool { return c != 0 }) >= 0 {
		return "", headerErr(tensorField(t, "name"), "bytes after the NUL are not zero")
	}
	name := string(raw[:n])
	if err := ValidateTensorName(name); err != nil {
		return "", headerErr(tensorField(t, "name"), "%v", err)
	}
	if names[name] {
		return "", headerErr(tensorField(t, "name"), "%q used twice", name)
	}
	names[name] = true
	return name, nil
}

// readTensorShape reads tensor t's ndim and shape and holds its nbytes to their product.
// A product that overflows 64 bits, or a dimension beyond any segment, fails even when
// the low bits match, so a crafted shape cannot wrap round to a small nbytes.
func (r *Ring) readTensorShape(t uint64, dt DType, name string) ([]int, uint64, error) {
	d := tensorEntry(t)
	ndim := *r.u32(d + tdNdim)
	if ndim < 1 || ndim > MaxDims {
		return nil, 0, headerErr(tensorField(t, "ndim"), "%d, want 1 to %d (tensor %q)", ndim, MaxDims, name)
	}
	shape := make([]int, ndim)
	prod := uint64(dt.Size())
	over := false
	for k := range shape {
		s := *r.u64(d + tdShape + uint64(8*k))
		var h uint64
		h, prod = bits.Mul64(prod, s)
		if h != 0 || s > maxSegment {
			over = true
		}
		shape[k] = int(min(s, maxSegment))
	}
	nb := *r.u64(d + tdNbytes)
	if over || nb != prod {
		return nil, 0, headerErr(tensorField(t, "nbytes"), "%d, but shape %v x itemsize %d = %d (tensor %q)", nb, shape, dt.Size(), prod, name)
	}
	return shape, nb, nil
}

// checkTensorPlace checks tensor t's bytes [off, off+nb) in a slot's payload: aligned,
// inside slot_bytes, and clear of every earlier tensor (prev, placed in g). Empty
// tensors overlap nothing.
func checkTensorPlace(t uint64, name string, off, nb uint64, prev []Tensor, g geometry) error {
	if off%TensorAlign != 0 {
		return headerErr(tensorField(t, "offset"), "%d is not a multiple of %d (tensor %q)", off, TensorAlign, name)
	}
	if end, c := bits.Add64(off, nb, 0); c != 0 || end > g.slotBytes {
		return headerErr(tensorField(t, "offset"), "%d + nbytes %d exceeds slot_bytes %d (tensor %q)", off, nb, g.slotBytes, name)
	}
	for u := range prev {
		if nb != 0 && g.nbytes[u] != 0 && off < g.offsets[u]+g.nbytes[u] && g.offsets[u] < off+nb {
			return headerErr(tensorField(t, "offset"), "tensor %q [%d, %d) overlaps tensor %q [%d, %d)", name, off, off+nb, prev[u].Name, g.offsets[u], g.offsets[u]+g.nbytes[u])
		}
	}
	return nil
}

// Compatible reports whether the ring's tensor table and geometry are what layout l would
// produce (PROTOCOL.md 3.6: a joining producer refuses a mismatch).
func (r *Ring) Compatible(l Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	mine := r.layout
	if len(l.Tensors) != len(mine.Tensors) {
		return fmt.Errorf("gobatch ring: tensor_count %d, this configuration has %d tensors", len(mine.Tensors), len(l.Tensors))
	}
	g := l.geometry()
	for i, t := range l.Tensors {
		m := mine.Tensors[i]
		if t.Name != m.Name || t.DType != m.DType || fmt.Sprint(t.Shape) != fmt.Sprint(m.Shape) || g.offsets[i] != r.g.offsets[i] {
			return fmt.Errorf("gobatch ring: tensor %d is %s %s%v at offset %d, this configuration has %s %s%v at offset %d",
				i, m.Name, m.DType, m.Shape, r.g.offsets[i], t.Name, t.DType, t.Shape, g.offsets[i])
		}
	}
	if !bytes.Equal(l.Description, mine.Description) {
		return fmt.Errorf("gobatch ring: its batch description is %q, this configuration's %q", mine.Description, l.Description)
	}
	return nil
}

// WakeAll wakes every waiter on every slot word and grant word (used after an error record, a close or a
// watchdog stop, so that sleepers run their checks at once). Every sleeper counts itself in
// the word's waiters before it sleeps (PROTOCOL.md 3.4) and the caller's store of what they are
// to notice precedes these loads (sequentially consistent), so a word nobody waits on costs no
// system call.
func (r *Ring) WakeAll() {
	for i := uint64(0); i < r.slots; i++ {
		wake(r.slotState(i), r.slotWaiters(i))
		wake(r.grantLow(i), r.grantWaiters(i))
	}
}

// errorRecord returns the error record if error_state is SET.
func (r *Ring) errorRecord() *ProducerError {
	if atomic.LoadUint32(r.u32(offErrorState)) != errSet {
		return nil
	}
	n := min(atomic.LoadUint32(r.u32(offErrorLen)), MaxErrorText)
	return &ProducerError{
		Producer: int(atomic.LoadUint32(r.u32(offErrorProducer))),
		Text:     string(r.mem[offErrorText : offErrorText+uint64(n)]),
	}
}

// consumerStatus returns ErrConsumerClosed, ErrConsumerGone or nil (PROTOCOL.md 3.5, producer side).
func (r *Ring) consumerStatus() error {
	st, pid := r.consumerClaim()
	switch st {
	case ConsumerClosed:
		return ErrConsumerClosed
	case ConsumerAttached:
		if r.claimDead(st, pid) {
			// It may have closed and exited in between: CLOSED wins.
			if s, _ := r.consumerClaim(); s == ConsumerClosed {
				return ErrConsumerClosed
			}
			return fmt.Errorf("%w (pid %d)", ErrConsumerGone, pid)
		}
	}
	// NONE, or CLAIMING (alive, or dead and reclaimable by the next consumer): wait for one.
	return nil
}
