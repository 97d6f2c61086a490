package ring

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docMeanings returns the last column ("value / meaning") of every field row of
// docs/PROTOCOL.md, keyed by section and field, and the whole document on one line.
func docMeanings(t *testing.T) (map[string]map[string]string, string) {
	t.Helper()
	b, err := os.ReadFile("../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, r := range protocolRows(t) {
		if out[r.section] == nil {
			out[r.section] = map[string]string{}
		}
		out[r.section][r.name] = r.meaning
	}
	return out, strings.Join(strings.Fields(string(b)), " ")
}

func groupOf(t *testing.T, prefix string) ConstGroup {
	for _, g := range Spec().Groups {
		if g.Enum && g.Prefix == prefix {
			return g
		}
	}
	t.Fatalf("no enum group %s in Spec", prefix)
	return ConstGroup{}
}

// TestConstantsMatchProtocol holds the values that the generated C header and Python module
// carry (identity words, limits, alignments, state numbers and names) to docs/PROTOCOL.md, as
// TestOffsetsMatchProtocol does for the offsets.
func TestConstantsMatchProtocol(t *testing.T) {
	doc, flat := docMeanings(t)
	want := func(sec, field, text string) {
		t.Helper()
		if got := doc[sec][field]; !strings.Contains(got, text) {
			t.Errorf("PROTOCOL.md %s %s says %q; the code has %q", sec, field, got, text)
		}
	}
	want("2", "magic", fmt.Sprintf("`0x%016X`", Magic))
	want("2", "layout_version", strconv.Itoa(int(LayoutVersion)))
	want("2", "header_bytes", strconv.Itoa(HeaderBytes))
	want("2", "slot_header_bytes", strconv.Itoa(SlotHeaderBytes))
	want("2", "endian_check", fmt.Sprintf("`0x%08X`", EndianCheck))
	want("2", "word_bytes", strconv.Itoa(int(WordBytes)))
	want("2", "slot_count", fmt.Sprintf("1 .. %d", MaxSlots))
	want("2", "tensor_count", fmt.Sprintf("1 .. %d", MaxTensors))
	want("2", "payload_align", fmt.Sprintf("%d or %d", SmallAlign, HugeAlign))
	want("2", "slot_headers_offset", strconv.Itoa(slotHeadersOffset))
	want("2", "creator_flags", fmt.Sprintf("bit 0: named segment (%d)", creatorNamed))
	want("2", "error_len", fmt.Sprintf("at most %d", MaxErrorText))
	want("2.7", "ndim", fmt.Sprintf("1 .. %d", MaxDims))
	want("2.7", "name", fmt.Sprintf("1 to %d bytes, `[A-Za-z0-9_]`", MaxTensorName))
	want("2.7", "offset", fmt.Sprintf("a multiple of %d", TensorAlign))
	want("2", "counter_count", fmt.Sprintf("0 .. %d", MaxCounters))
	want("2.8", "name", fmt.Sprintf("1 to %d bytes, `[A-Za-z0-9_]`", MaxCounterName))
	want("2.8", "kind", fmt.Sprintf("%d counter (a count: producers add), %d gauge", CounterSum, CounterGauge))
	want("2.8", "scope", fmt.Sprintf("%d the job (one value), %d per source", ScopeJob, ScopeSource))
	want("2.8", "width", fmt.Sprintf("1 for scope %d, %d for scope %d", ScopeJob, MaxCounterSources, ScopeSource))
	want("2.8", "first", fmt.Sprintf("`first + width <= %d`", MaxCounterValues))
	for _, s := range []string{
		fmt.Sprintf("### 2.6 Producer registry (%d .. %d): %d entries of %d bytes", offRegistry, offRegistry+MaxProducers*registryStride-1, MaxProducers, registryStride),
		fmt.Sprintf("### 2.7 Tensor table (%d .. %d): %d descriptors of %d bytes", offTensorTable, offTensorTable+MaxTensors*tensorStride-1, MaxTensors, tensorStride),
		fmt.Sprintf("### 2.8 Counter table (%d .. %d) and counter values (%d .. %d)", offCounterTable, offCounterTable+MaxCounters*counterStride-1, offCounterValues, offCounterValues+8*MaxCounterValues-1),
		fmt.Sprintf("%d descriptors of %d bytes; descriptor `k` at `%d + %d * k`", MaxCounters, counterStride, offCounterTable, counterStride),
		fmt.Sprintf("value array: %d u64 at `%d + 8 * v`", MaxCounterValues, offCounterValues),
		fmt.Sprintf("`(lap << %d) | st`, lap %d bits", slotStateBits, lapBits),
		fmt.Sprintf("`payload_align`: 2 MiB (%d) when `slot_bytes` >= 2 MiB, else %d", HugeAlign, SmallAlign),
		fmt.Sprintf("| header | 0 | %d (`header_bytes`) |", HeaderBytes),
		fmt.Sprintf("at least every %d ms", waitSlice.Milliseconds()),
	} {
		if !strings.Contains(flat, s) {
			t.Errorf("PROTOCOL.md does not say %q", s)
		}
	}

	// State words: "0 NONE, 1 CLAIMING, ..." in the document, the enum groups in the code.
	states := map[string]string{
		"RING_":     doc["2"]["state"],
		"CONSUMER_": doc["2"]["consumer_state"],
		"ERROR_":    doc["2"]["error_state"],
		"ENTRY_":    doc["2.6"]["state"],
	}
	states["SLOT_"] = ""
	if m := regexp.MustCompile("`st`: ([^.]*)\\.").FindStringSubmatch(flat); m != nil {
		states["SLOT_"] = m[1]
	}
	pair := regexp.MustCompile(`(\d+) ([A-Za-z]+)`)
	for prefix, text := range states {
		if text == "" {
			t.Errorf("%s states: not found in PROTOCOL.md", prefix)
		}
		g := groupOf(t, prefix)
		var got []string
		for _, m := range pair.FindAllStringSubmatch(text, -1) {
			got = append(got, m[1]+" "+strings.ToUpper(m[2]))
		}
		var code []string
		for _, c := range g.Consts {
			code = append(code, fmt.Sprintf("%d %s", c.Value, strings.TrimPrefix(c.Name, prefix)))
		}
		if strings.Join(got, ", ") != strings.Join(code, ", ") {
			t.Errorf("%s states: PROTOCOL.md says %q, the code has %q", prefix, strings.Join(got, ", "), strings.Join(code, ", "))
		}
	}
}

// TestTensorNameRule holds ValidateTensorName to its stated rule (the one config prints) byte
// for byte and at the length limits.
func TestTensorNameRule(t *testing.T) {
	if TensorNameRule != fmt.Sprintf("1 to %d characters of [A-Za-z0-9_]", MaxTensorName) {
		t.Errorf("TensorNameRule %q does not state MaxTensorName %d", TensorNameRule, MaxTensorName)
	}
	class := regexp.MustCompile(`^[A-Za-z0-9_]$`)
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if (ValidateTensorName(s) == nil) != class.MatchString(s) {
			t.Errorf("byte %#x: ValidateTensorName disagrees with [A-Za-z0-9_]", c)
		}
	}
	if ValidateTensorName(strings.Repeat("a", MaxTensorName)) != nil || ValidateTensorName(strings.Repeat("a", MaxTensorName+1)) == nil || ValidateTensorName("") == nil {
		t.Error("ValidateTensorName does not accept exactly 1 to MaxTensorName bytes")
	}
	if TensorNameBytes != MaxTensorName+1 {
		t.Error("the name field does not hold the longest name and its NUL")
	}
}
