package ring

import "fmt"

// The protocol as data: every offset, size, state, limit and dtype of docs/PROTOCOL.md that the
// Go constants of this package declare, listed once more by name (never by value) so that
//
//   - layout_test.go holds them to the document's tables, and
//   - ring/internal/protogen writes the C header (pybind/gobatch_protocol.h) and the Python
//     module (python/gobatch/_protocol.py) from them: the consumer side copies nothing by hand.
//
// Adding a field or a constant to the protocol means adding it here; the generated files and
// the document test then show what is missing.

//go:generate go run ./internal/protogen -c ../pybind/gobatch_protocol.h -py ../python/gobatch/_protocol.py

// Field is one row of a field table of PROTOCOL.md.
type Field struct {
	Name   string // as in the document, e.g. "slot_count"
	Offset int    // bytes from the start of the region (or of one entry of it)
	Type   string // "u32", "u64", "bytes[N]" or "u64[N]"
}

// Region is one field table: the header, or an array of equal entries.
type Region struct {
	Section string // the PROTOCOL.md section of its table: "2", "2.6", "2.7", "3"
	Name    string // short name used by generated code: "header", "registry", "tensor", "slot"
	Base    int    // offset of the region (its first entry) in the segment
	Stride  int    // bytes per entry (the header: its whole size)
	Fields  []Field
}

// Const is a named protocol number.
type Const struct {
	Name  string // UPPER_SNAKE, without a language prefix
	Value uint64
}

// ConstGroup is a set of related constants. An Enum group lists the values of one state word,
// in order from 0, and its names (Name without Prefix) are the states' names in messages.
type ConstGroup struct {
	Doc    string
	Enum   bool
	Prefix string
	Consts []Const
}

// DTypeInfo is one row of the dtype table (PROTOCOL.md 2.7).
type DTypeInfo struct {
	Code DType
	Name string
	Size int
}

// ProtocolSpec is what Spec returns.
type ProtocolSpec struct {
	Regions []Region
	Groups  []ConstGroup
	DTypes  []DTypeInfo
}

// Spec describes the protocol this package implements, for the generator and the tests.
func Spec() ProtocolSpec {
	return ProtocolSpec{Regions: specRegions(), Groups: specGroups(), DTypes: specDTypes()}
}

func specRegions() []Region {
	u32, u64 := "u32", "u64"
	return []Region{
		{Section: "2", Name: "header", Base: 0, Stride: HeaderBytes, Fields: []Field{
			{"magic", offMagic, u64}, {"layout_version", offLayoutVersion, u32}, {"header_bytes", offHeaderBytes, u32},
			{"slot_header_bytes", offSlotHeaderBytes, u32}, {"endian_check", offEndianCheck, u32}, {"state", offState, u32},
			{"word_bytes", offWordBytes, u32}, {"segment_bytes", offSegmentBytes, u64}, {"slot_count", offSlotCount, u32},
			{"tensor_count", offTensorCount, u32}, {"slot_stride", offSlotStride, u64}, {"slot_bytes", offSlotBytes, u64},
			{"payload_offset", offPayloadOffset, u64}, {"slot_headers_offset", offSlotHeadersOffset, u64},
			{"start_batch", offStartBatch, u64}, {"total_batches", offTotalBatches, u64}, {"batch_size", offBatchSize, u32},
			{"payload_align", offPayloadAlign, u32}, {"nonce", offNonce, u64}, {"creator_pid", offCreatorPID, u32},
			{"creator_flags", offCreatorFlags, u32}, {"creator_starttime", offCreatorStarttime, u64},
			{"next_claim", offNextClaim, u64},
			{"batches_written", offBatchesWritten, u64}, {"bytes_written", offBytesWritten, u64},
			{"producer_wait_ns", offProducerWaitNs, u64}, {"producer_busy_ns", offProducerBusyNs, u64},
			{"consumer_state", offConsumerState, u32}, {"consumer_pid", offConsumerPID, u32},
			{"consumer_starttime", offConsumerStarttime, u64}, {"batches_read", offBatchesRead, u64},
			{"consumer_wait_ns", offConsumerWaitNs, u64}, {"bytes_read", offBytesRead, u64},
			{"consumer_heartbeat", offConsumerHeartbeat, u64},
			{"error_state", offErrorState, u32}, {"error_len", offErrorLen, u32}, {"error_producer", offErrorProducer, u32},
			{"error_text", offErrorText, fmt.Sprintf("bytes[%d]", MaxErrorText)},
			{"counter_count", offCounterCount, u32}, {"description_len", offDescriptionLen, u32},
			{"description", offDescription, fmt.Sprintf("bytes[%d]", MaxDescription)},
		}},
		{Section: "2.6", Name: "registry", Base: offRegistry, Stride: registryStride, Fields: []Field{
			{"state", regState, "u16"}, {"generation", regGeneration, "u16"}, {"pid", regPID, u32}, {"starttime", regStarttime, u64},
			{"heartbeat", regHeartbeat, u64}, {"batches", regBatches, u64}, {"writers", regWriters, u32},
		}},
		{Section: "2.7", Name: "tensor", Base: offTensorTable, Stride: tensorStride, Fields: []Field{
			{"name", tdName, fmt.Sprintf("bytes[%d]", TensorNameBytes)}, {"dtype", tdDType, u32}, {"ndim", tdNdim, u32},
			{"shape", tdShape, fmt.Sprintf("u64[%d]", MaxDims)}, {"offset", tdOffset, u64}, {"nbytes", tdNbytes, u64},
		}},
		{Section: "2.8", Name: "counter", Base: offCounterTable, Stride: counterStride, Fields: []Field{
			{"name", cdName, fmt.Sprintf("bytes[%d]", CounterNameBytes)}, {"kind", cdKind, "u16"}, {"scope", cdScope, "u16"},
			{"width", cdWidth, "u16"}, {"first", cdFirst, "u16"},
		}},
		{Section: "3", Name: "slot", Base: slotHeadersOffset, Stride: SlotHeaderBytes, Fields: []Field{
			{"state", shState, u32}, {"waiters", shWaiters, u32}, {"seq", shSeq, u64}, {"owner", shOwner, u32},
			{"flags", shFlags, u32}, {"nbytes", shNbytes, u64}, {"publish_ns", shPublishNs, u64},
			{"claim", shClaim, u64}, {"grant", shGrant, u64}, {"grant_waiters", shGrantWait, u32},
		}},
	}
}

func specGroups() []ConstGroup {
	return []ConstGroup{
		{Doc: "Identity of a segment (PROTOCOL.md 2.1, 3.6 step 2)", Consts: []Const{
			{"MAGIC", Magic}, {"LAYOUT_VERSION", uint64(LayoutVersion)}, {"HEADER_BYTES", HeaderBytes},
			{"SLOT_HEADER_BYTES", SlotHeaderBytes}, {"ENDIAN_CHECK", uint64(EndianCheck)}, {"WORD_BYTES", uint64(WordBytes)},
		}},
		{Doc: "Limits and alignments (PROTOCOL.md 1, 2.5, 2.6, 2.7, 2.8, 3.6 step 4)", Consts: []Const{
			{"MAX_SLOTS", MaxSlots}, {"MAX_TENSORS", MaxTensors}, {"MAX_DIMS", MaxDims}, {"MAX_PRODUCERS", MaxProducers},
			{"MAX_ERROR_TEXT", MaxErrorText}, {"MAX_TENSOR_NAME", MaxTensorName}, {"TENSOR_NAME_BYTES", TensorNameBytes},
			{"MAX_COUNTERS", MaxCounters}, {"MAX_COUNTER_VALUES", MaxCounterValues}, {"COUNTER_VALUES_BASE", offCounterValues},
			{"MAX_COUNTER_NAME", MaxCounterName}, {"COUNTER_NAME_BYTES", CounterNameBytes}, {"MAX_COUNTER_SOURCES", MaxCounterSources},
			{"MAX_DESCRIPTION", MaxDescription},
			{"TENSOR_ALIGN", TensorAlign}, {"SMALL_ALIGN", SmallAlign}, {"HUGE_ALIGN", HugeAlign},
		}},
		{Doc: "A slot's state word is (lap << SLOT_STATE_BITS) | st (PROTOCOL.md 3, 3.1)", Consts: []Const{
			{"SLOT_STATE_BITS", slotStateBits}, {"SLOT_STATE_MASK", uint64(slotStateMask)},
			{"LAP_BITS", lapBits}, {"LAP_MASK", uint64(lapMask)},
		}},
		{Doc: "A position's grant is L << 32 | t << GRANT_SLOT_BITS | s: slot s, tag t = (j div slot_count) mod 2^GRANT_TAG_BITS, slot lap L (PROTOCOL.md 3, 3.1)", Consts: []Const{
			{"GRANT_SLOT_BITS", grantSlotBits}, {"GRANT_SLOT_MASK", uint64(grantSlotMask)},
			{"GRANT_TAG_BITS", grantTagBits}, {"GRANT_TAG_MASK", uint64(grantTagMask)},
		}},
		{Doc: "Bits of creator_flags (PROTOCOL.md 2.1)", Consts: []Const{{"CREATOR_NAMED", uint64(creatorNamed)}}},
		{Doc: "The longest sleep of a wait, in nanoseconds (PROTOCOL.md 3.4, 3.5)", Consts: []Const{
			{"WAIT_SLICE_NS", uint64(waitSlice.Nanoseconds())},
		}},
		{Doc: "A slot's batch claim is (j + 1) << CLAIM_HOLDER_BITS | holder, holder = (generation mod 2^CLAIM_ENTRY_BITS) << CLAIM_ENTRY_BITS | entry + 1; a registry entry's low u32 is state | generation << ENTRY_STATE_BITS; a dead producer's entry that is not RECLAIMED within TAKEOVER_GRACE_NS fails the consumer (PROTOCOL.md 2.6, 3.2, 3.5, 3.7)", Consts: []Const{
			{"CLAIM_HOLDER_BITS", claimHolderBits}, {"CLAIM_ENTRY_BITS", claimEntryBits}, {"ENTRY_STATE_BITS", entryStateBits}, {"TAKEOVER_GRACE_NS", uint64(takeoverGrace.Nanoseconds())},
		}},
		{Doc: "Ring state (header word state)", Enum: true, Prefix: "RING_", Consts: []Const{
			{"RING_INITIALISING", uint64(stateInitialising)}, {"RING_READY", uint64(stateReady)},
		}},
		{Doc: "consumer_state (PROTOCOL.md 2.4)", Enum: true, Prefix: "CONSUMER_", Consts: []Const{
			{"CONSUMER_NONE", uint64(ConsumerNone)}, {"CONSUMER_CLAIMING", uint64(ConsumerClaiming)},
			{"CONSUMER_ATTACHED", uint64(ConsumerAttached)}, {"CONSUMER_CLOSED", uint64(ConsumerClosed)},
		}},
		{Doc: "Producer registry entry state (PROTOCOL.md 2.6)", Enum: true, Prefix: "ENTRY_", Consts: []Const{
			{"ENTRY_FREE", uint64(EntryFree)}, {"ENTRY_CLAIMING", uint64(EntryClaiming)}, {"ENTRY_ACTIVE", uint64(EntryActive)},
			{"ENTRY_DONE", uint64(EntryDone)}, {"ENTRY_FAILED", uint64(EntryFailed)},
			{"ENTRY_RECLAIMED", uint64(EntryReclaimed)},
		}},
		{Doc: "Counter kind (PROTOCOL.md 2.8; 0 is no kind)", Enum: true, Prefix: "COUNTER_KIND_", Consts: []Const{
			{"COUNTER_KIND_NONE", 0}, {"COUNTER_KIND_COUNTER", uint64(CounterSum)}, {"COUNTER_KIND_GAUGE", uint64(CounterGauge)},
		}},
		{Doc: "Counter scope (PROTOCOL.md 2.8)", Enum: true, Prefix: "SCOPE_", Consts: []Const{
			{"SCOPE_JOB", uint64(ScopeJob)}, {"SCOPE_SOURCE", uint64(ScopeSource)},
		}},
		{Doc: "error_state (PROTOCOL.md 2.5)", Enum: true, Prefix: "ERROR_", Consts: []Const{
			{"ERROR_NONE", uint64(errNone)}, {"ERROR_WRITING", uint64(errWriting)}, {"ERROR_SET", uint64(errSet)},
		}},
		{Doc: "Slot state st, the low bits of a slot's state word (PROTOCOL.md 3)", Enum: true, Prefix: "SLOT_", Consts: []Const{
			{"SLOT_FREE", uint64(SlotFree)}, {"SLOT_WRITING", uint64(SlotWriting)}, {"SLOT_READY", uint64(SlotReady)},
			{"SLOT_READING", uint64(SlotReading)},
		}},
	}
}

func specDTypes() []DTypeInfo {
	out := make([]DTypeInfo, 0, len(dtypeNames)-1)
	for d := Bool; d.Valid(); d++ {
		out = append(out, DTypeInfo{Code: d, Name: d.String(), Size: d.Size()})
	}
	return out
}
