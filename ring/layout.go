package ring

import (
	"fmt"
	"math/bits"
	"strings"
)

// Protocol constants (PROTOCOL.md sections 1 to 3).
const (
	Magic             uint64 = 0x3148435441424F47 // "GOBATCH1" little-endian
	LayoutVersion     uint32 = 4
	HeaderBytes              = 32768
	SlotHeaderBytes          = 128
	EndianCheck       uint32 = 0x01020304
	WordBytes         uint32 = 8
	MaxSlots                 = 1024
	MaxTensors               = 32
	MaxDims                  = 8
	MaxTensorName            = 31 // bytes of a tensor name; the descriptor's name field is one more (NUL)
	TensorNameBytes          = MaxTensorName + 1
	MaxProducers             = 32
	MaxErrorText             = 1024
	TensorAlign              = 64
	SmallAlign               = 4096
	HugeAlign                = 2 << 20
	MaxCounters              = 64  // entries of the counter table (PROTOCOL.md 2.8)
	MaxCounterValues         = 768 // u64 values they share
	MaxCounterName           = 23  // bytes of a counter name; the descriptor's name field is one more (NUL)
	CounterNameBytes         = MaxCounterName + 1
	MaxCounterSources        = 32    // values of a per-source counter: one per source of a configuration
	MaxDescription           = 16384 // bytes of the batch description (PROTOCOL.md 2.9)
	lapBits                  = 30
	lapMask           uint32 = 1<<lapBits - 1
	slotStateBits            = 2 // a slot word is (lap << slotStateBits) | st
	slotStateMask     uint32 = 1<<slotStateBits - 1
	claimHolderBits          = 16 // a slot's batch claim is (j+1)<<claimHolderBits | holder
	claimEntryBits           = 8  // holder = (generation mod 2^8)<<claimEntryBits | (registry index + 1)
	entryStateBits           = 16 // a registry entry's low u32 is state | generation<<entryStateBits
	entryStateMask    uint32 = 1<<entryStateBits - 1
	grantSlotBits            = 10 // a grant's low u32 is tag<<grantSlotBits | slot (PROTOCOL.md 3.1)
	grantTagBits             = 22 // tag = (j div slot_count) mod 2^grantTagBits
	grantSlotMask     uint32 = 1<<grantSlotBits - 1
	grantTagMask      uint32 = 1<<grantTagBits - 1
)

// creator_flags bits (offset 116).
const creatorNamed uint32 = 1 // bit 0: a named segment (else a memfd)

// Header field offsets (PROTOCOL.md section 2).
const (
	offMagic             = 0
	offLayoutVersion     = 8
	offHeaderBytes       = 12
	offSlotHeaderBytes   = 16
	offEndianCheck       = 20
	offState             = 24
	offWordBytes         = 28
	offSegmentBytes      = 32
	offSlotCount         = 40
	offTensorCount       = 44
	offSlotStride        = 48
	offSlotBytes         = 56
	offPayloadOffset     = 64
	offSlotHeadersOffset = 72
	offStartBatch        = 80
	offTotalBatches      = 88
	offBatchSize         = 96
	offPayloadAlign      = 100
	offNonce             = 104
	offCreatorPID        = 112
	offCreatorFlags      = 116
	offCreatorStarttime  = 120

	offNextClaim = 128

	offBatchesWritten = 192
	offBytesWritten   = 200
	offProducerWaitNs = 208
	offProducerBusyNs = 216

	offConsumerState     = 256
	offConsumerPID       = 260
	offConsumerStarttime = 264
	offBatchesRead       = 272
	offConsumerWaitNs    = 280
	offBytesRead         = 288
	offConsumerHeartbeat = 296

	offErrorState    = 320
	offErrorLen      = 324
	offErrorProducer = 328
	offErrorText     = 384

	offCounterCount   = 1408 // u32: entries of the counter table (PROTOCOL.md 2.5a)
	offDescriptionLen = 1412 // u32: bytes of the batch description (PROTOCOL.md 2.9)

	offRegistry    = 2048
	registryStride = 64
	// fields inside a registry entry
	regState      = 0 // u16 state, then u16 generation: the low half of the entry word
	regGeneration = 2
	regPID        = 4
	regStarttime  = 8
	regHeartbeat  = 16
	regBatches    = 24
	regWriters    = 32

	offTensorTable = 4096
	tensorStride   = 128
	// fields inside a tensor descriptor
	tdName   = 0
	tdDType  = 32
	tdNdim   = 36
	tdShape  = 40
	tdOffset = 104
	tdNbytes = 112

	offCounterTable = 8192 // PROTOCOL.md 2.8
	counterStride   = 32
	// fields inside a counter descriptor
	cdName  = 0
	cdKind  = 24
	cdScope = 26
	cdWidth = 28
	cdFirst = 30

	offCounterValues = 10240 // u64[MaxCounterValues]

	offDescription = 16384 // bytes[MaxDescription] (PROTOCOL.md 2.9)

	slotHeadersOffset = HeaderBytes
	// fields inside a slot header
	shState     = 0
	shWaiters   = 4
	shSeq       = 8
	shOwner     = 16
	shFlags     = 20
	shNbytes    = 24
	shPublishNs = 32
	shClaim     = 40 // position's batch claim, (j+1)<<claimHolderBits | holder (PROTOCOL.md 3.2)
	shGrant     = 48 // position's grant, lap<<32 | tag<<grantSlotBits | slot (PROTOCOL.md 3.1)
	shGrantWait = 56 // waiters on the grant's low u32
)

// Ring state (header word at offset 24).
const (
	stateInitialising uint32 = 0
	stateReady        uint32 = 1
)

// Consumer states (offset 256).
const (
	ConsumerNone     uint32 = 0
	ConsumerClaiming uint32 = 1
	ConsumerAttached uint32 = 2
	ConsumerClosed   uint32 = 3
)

// Producer registry entry states.
const (
	EntryFree     uint32 = 0
	EntryClaiming uint32 = 1
	EntryActive   uint32 = 2
	EntryDone     uint32 = 3
	EntryFailed   uint32 = 4
	// EntryReclaimed: the producer died and a live one took its claims over (PROTOCOL.md 3.7).
	EntryReclaimed uint32 = 5
)

// Slot states (the low two bits of a slot's state word).
const (
	SlotFree    uint32 = 0
	SlotWriting uint32 = 1
	SlotReady   uint32 = 2
	SlotReading uint32 = 3
)

// Error record states.
const (
	errNone    uint32 = 0
	errWriting uint32 = 1
	errSet     uint32 = 2
)

func slotWord(lap, st uint32) uint32 { return (lap&lapMask)<<slotStateBits | st }

// DType is a tensor element type code of PROTOCOL.md section 2.7.
type DType uint32

// DType codes.
const (
	Bool    DType = 1
	Int8    DType = 2
	Uint8   DType = 3
	Int16   DType = 4
	Uint16  DType = 5
	Int32   DType = 6
	Uint32  DType = 7
	Int64   DType = 8
	Uint64  DType = 9
	Float16 DType = 10
	Float32 DType = 11
	Float64 DType = 12
)

var dtypeNames = [...]string{"", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"}
var dtypeSizes = [...]int{0, 1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8}

// Valid reports whether d is one of the protocol's codes.
func (d DType) Valid() bool { return d >= Bool && d <= Float64 }

// Size returns the item size in bytes (0 for an invalid code).
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeSizes[d]
}

func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint32(d))
	}
	return dtypeNames[d]
}

// ParseDType maps a NumPy-style name ("float32", "uint8", "bool", ...) to its code.
func ParseDType(s string) (DType, error) {
	for i := Bool; i <= Float64; i++ {
		if dtypeNames[i] == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of %s)", s, strings.Join(dtypeNames[1:], ", "))
}

// Tensor describes one tensor of a batch. Shape includes the batch dimension (dimension 0).
type Tensor struct {
	Name  string
	DType DType
	Shape []int
}

// Nbytes returns product(Shape) x itemsize (no overflow checks; see Layout.Validate).
func (t Tensor) Nbytes() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Layout is what a ring is made from: the tensors of one batch and the ring geometry.
type Layout struct {
	Tensors      []Tensor
	Slots        int
	StartBatch   uint64 // absolute stream index of the ring's first batch
	TotalBatches uint64 // batches in the ring's stream; 0 = unbounded
	BatchSize    int    // examples per batch (informational)
	// Counters is the job's counter table (PROTOCOL.md 2.5a, 2.8): written by the creator,
	// read back by an attacher. It is not part of what a joiner must match (Compatible).
	Counters []CounterDef
	// Description is what the consumer needs to know about the batch besides its tensors
	// (PROTOCOL.md 2.9: a JSON document of at most MaxDescription bytes, or none): written by
	// the creator, read back by an attacher; a joiner's must be the same bytes.
	Description []byte
}

// maxSegment bounds every size computed from a layout so that sums and products of a few of
// them cannot overflow int64 (2^52 bytes = 4 PiB, far beyond any machine's shared memory).
const maxSegment = 1 << 52

// TensorNameRule says in words what ValidateTensorName accepts (PROTOCOL.md 2.7), for
// messages of callers that validate names before a layout exists (config).
const TensorNameRule = "1 to 31 characters of [A-Za-z0-9_]"

// ValidateTensorName checks a tensor name against PROTOCOL.md 2.7: 1 to MaxTensorName bytes of
// [A-Za-z0-9_]. It is the only implementation of the rule; config and the generated C and
// Python tables (ring/internal/protogen) derive theirs from it.
func ValidateTensorName(s string) error {
	if len(s) < 1 || len(s) > MaxTensorName {
		return fmt.Errorf("name %q: length %d, want 1 to %d bytes", s, len(s), MaxTensorName)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("name %q: byte %d (%q) is not one of [A-Za-z0-9_]", s, i, c)
		}
	}
	return nil
}

// Validate checks the layout against the protocol's limits, naming the field at fault.
func (l Layout) Validate() error {
	if l.Slots < 1 || l.Slots > MaxSlots {
		return fmt.Errorf("ring layout: slots %d, want 1 to %d", l.Slots, MaxSlots)
	}
	if len(l.Tensors) < 1 || len(l.Tensors) > MaxTensors {
		return fmt.Errorf("ring layout: %d tensors, want 1 to %d", len(l.Tensors), MaxTensors)
	}
	if l.BatchSize < 0 || uint64(l.BatchSize) > 1<<32-1 {
		return fmt.Errorf("ring layout: batch size %d, want 0 to 2^32-1", l.BatchSize)
	}
	seen := make(map[string]bool, len(l.Tensors))
	var total uint64
	for i, t := range l.Tensors {
		if err := ValidateTensorName(t.Name); err != nil {
			return fmt.Errorf("ring layout: tensor %d: %w", i, err)
		}
		if seen[t.Name] {
			return fmt.Errorf("ring layout: tensor %d: name %q used twice", i, t.Name)
		}
		seen[t.Name] = true
		if !t.DType.Valid() {
			return fmt.Errorf("ring layout: tensor %q: invalid dtype code %d", t.Name, uint32(t.DType))
		}
		if len(t.Shape) < 1 || len(t.Shape) > MaxDims {
			return fmt.Errorf("ring layout: tensor %q: %d dimensions, want 1 to %d", t.Name, len(t.Shape), MaxDims)
		}
		n := uint64(t.DType.Size())
		for k, d := range t.Shape {
			if d < 1 {
				return fmt.Errorf("ring layout: tensor %q: shape[%d] = %d, want >= 1", t.Name, k, d)
			}
			hi, lo := bits.Mul64(n, uint64(d))
			if hi != 0 || lo > maxSegment {
				return fmt.Errorf("ring layout: tensor %q: shape %v is too large", t.Name, t.Shape)
			}
			n = lo
		}
		total = alignUp(total, TensorAlign) + n
		if total > maxSegment {
			return fmt.Errorf("ring layout: a batch of the tensors up to %q is too large (%d bytes)", t.Name, total)
		}
	}
	if err := validateCounters(l.Counters); err != nil {
		return fmt.Errorf("ring layout: %w", err)
	}
	if len(l.Description) > MaxDescription {
		return fmt.Errorf("ring layout: a batch description of %d bytes, want at most %d", len(l.Description), MaxDescription)
	}
	g := l.geometry()
	if g.segmentBytes > maxSegment {
		return fmt.Errorf("ring layout: segment of %d bytes is too large", g.segmentBytes)
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// geometry holds the computed offsets of a layout (PROTOCOL.md section 1).
type geometry struct {
	offsets, nbytes []uint64
	slotBytes       uint64
	payloadAlign    uint64
	slotStride      uint64
	payloadOffset   uint64
	segmentBytes    uint64
}

// geometry assumes a valid layout.
func (l Layout) geometry() geometry {
	g := geometry{offsets: make([]uint64, len(l.Tensors)), nbytes: make([]uint64, len(l.Tensors))}
	var end uint64
	for i, t := range l.Tensors {
		off := alignUp(end, TensorAlign)
		g.offsets[i] = off
		g.nbytes[i] = uint64(t.Nbytes())
		end = off + g.nbytes[i]
	}
	g.slotBytes = end
	g.payloadAlign = SmallAlign
	if g.slotBytes >= HugeAlign {
		g.payloadAlign = HugeAlign
	}
	g.slotStride = alignUp(g.slotBytes, g.payloadAlign)
	g.payloadOffset = alignUp(slotHeadersOffset+uint64(l.Slots)*SlotHeaderBytes, g.payloadAlign)
	g.segmentBytes = g.payloadOffset + uint64(l.Slots)*g.slotStride
	return g
}

// SegmentBytes returns the size of the segment the layout needs (0 for an invalid layout).
func (l Layout) SegmentBytes() int64 {
	if l.Validate() != nil {
		return 0
	}
	return int64(l.geometry().segmentBytes)
}

// SlotBytes returns the payload bytes of one batch (0 for an invalid layout).
func (l Layout) SlotBytes() int64 {
	if l.Validate() != nil {
		return 0
	}
	return int64(l.geometry().slotBytes)
}

// clone returns a deep copy.
func (l Layout) clone() Layout {
	c := l
	c.Tensors = make([]Tensor, len(l.Tensors))
	for i, t := range l.Tensors {
		c.Tensors[i] = Tensor{Name: t.Name, DType: t.DType, Shape: append([]int(nil), t.Shape...)}
	}
	c.Counters = append([]CounterDef(nil), l.Counters...)
	c.Description = append([]byte(nil), l.Description...)
	return c
}
