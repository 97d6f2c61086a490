package ring

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docField is one row of a field table in docs/PROTOCOL.md.
type docField struct {
	off int
	typ string
}

// docRow is one row of a field table of docs/PROTOCOL.md, with its section ("2" for the header,
// "2.6" registry entry, "2.7" tensor descriptor, "3" slot header).
type docRow struct {
	section, name, meaning string
	field                  docField
}

// protocolRows parses the field tables of docs/PROTOCOL.md.
func protocolRows(t *testing.T) []docRow {
	t.Helper()
	f, err := os.Open("../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| (\\d+) \\| ([a-z0-9\\[\\]]+) \\| `([a-z_0-9]+)`[^|]*\\|(?: ([^|]*) \\|)?")
	var out []docRow
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "### 2.6"):
			section = "2.6"
		case strings.HasPrefix(line, "### 2.7"):
			section = "2.7"
		case strings.HasPrefix(line, "### 2.8"):
			section = "2.8"
		case strings.HasPrefix(line, "### 2."):
			section = "2"
		case strings.HasPrefix(line, "## 3."):
			section = "3"
		case strings.HasPrefix(line, "### 3.1"):
			section = "" // after the slot header table
		}
		m := row.FindStringSubmatch(line)
		if m == nil || section == "" {
			continue
		}
		off, _ := strconv.Atoi(m[1])
		out = append(out, docRow{section: section, name: m[3], meaning: strings.TrimSpace(m[4]), field: docField{off, m[2]}})
	}
	return out
}

// readProtocolTables returns the field tables of docs/PROTOCOL.md keyed by section and field.
func readProtocolTables(t *testing.T) map[string]map[string]docField {
	t.Helper()
	out := map[string]map[string]docField{}
	for _, r := range protocolRows(t) {
		if out[r.section] == nil {
			out[r.section] = map[string]docField{}
		}
		out[r.section][r.name] = r.field
	}
	return out
}

// TestOffsetsMatchProtocol holds every field offset of the code (Spec) to docs/PROTOCOL.md, in both
// directions: a field added, moved or retyped on either side fails here.
func TestOffsetsMatchProtocol(t *testing.T) {
	// The code's side is Spec, the same table the C header and the Python module are
	// generated from (ring/internal/protogen).
	code := map[string]map[string]docField{}
	for _, r := range Spec().Regions {
		code[r.Section] = map[string]docField{}
		for _, f := range r.Fields {
			code[r.Section][f.Name] = docField{f.Offset, f.Type}
		}
	}
	doc := readProtocolTables(t)
	for sec, fields := range code {
		if len(doc[sec]) == 0 {
			t.Errorf("section %s: no field table found in PROTOCOL.md", sec)
		}
		for name, want := range fields {
			got, ok := doc[sec][name]
			if !ok {
				t.Errorf("section %s: field %s (offset %d) is not in PROTOCOL.md", sec, name, want.off)
				continue
			}
			if got != want {
				t.Errorf("section %s: field %s: PROTOCOL.md says offset %d type %s, code has %d %s", sec, name, got.off, got.typ, want.off, want.typ)
			}
		}
		for name, d := range doc[sec] {
			if _, ok := fields[name]; !ok {
				t.Errorf("section %s: PROTOCOL.md field %s (offset %d) is unknown to the code", sec, name, d.off)
			}
		}
	}
	// Alignment rule of the document: every u64 8-aligned, every u32 4-aligned.
	for sec, fields := range code {
		for name, f := range fields {
			if f.typ == "u64" && f.off%8 != 0 || f.typ == "u32" && f.off%4 != 0 {
				t.Errorf("section %s: %s at %d is misaligned for %s", sec, name, f.off, f.typ)
			}
		}
	}
	// Producer-written and consumer-written header lines are distinct 64-byte lines.
	if offNextClaim/64 == offConsumerState/64 || offBatchesWritten/64 == offBatchesRead/64 || offErrorState/64 == offConsumerState/64 {
		t.Error("producer and consumer words share a cache line")
	}
	if offRegistry+MaxProducers*registryStride != offTensorTable || offTensorTable+MaxTensors*tensorStride != offCounterTable ||
		offCounterTable+MaxCounters*counterStride != offCounterValues || offCounterValues+8*MaxCounterValues != offDescription || offDescription+MaxDescription != HeaderBytes {
		t.Error("registry, tensor table, counter table, counter values or description do not fill their regions")
	}
}

// TestDTypesMatchProtocol checks the dtype codes and item sizes against the document's list.
func TestDTypesMatchProtocol(t *testing.T) {
	b, err := os.ReadFile("../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	m := regexp.MustCompile(`dtype codes: (.*?) \(itemsize ([0-9, ]+)\)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("dtype code list not found in PROTOCOL.md")
	}
	codes := strings.Split(m[1], ", ")
	sizes := strings.Split(m[2], ", ")
	if len(codes) != 12 || len(sizes) != 12 {
		t.Fatalf("PROTOCOL.md lists %d codes and %d sizes", len(codes), len(sizes))
	}
	for i, c := range codes {
		var code int
		var nm string
		if _, err := fmtSscan(c, &code, &nm); err != nil {
			t.Fatalf("cannot parse %q", c)
		}
		d, err := ParseDType(nm)
		if err != nil || int(d) != code {
			t.Errorf("%s: code %d in the document, %d (%v) in code", nm, code, d, err)
		}
		sz, _ := strconv.Atoi(sizes[i])
		if d.Size() != sz || d.String() != nm {
			t.Errorf("%s: size %d name %q, document says %d", nm, d.Size(), d.String(), sz)
		}
	}
	if _, err := ParseDType("float128"); err == nil {
		t.Error("ParseDType accepted float128")
	}
	if DType(0).Valid() || DType(13).Valid() || DType(13).Size() != 0 || DType(99).String() != "dtype(99)" {
		t.Error("invalid dtype codes are not refused")
	}
}

func TestLayoutGeometry(t *testing.T) {
	small := Layout{Slots: 3, BatchSize: 4, Tensors: []Tensor{
		{Name: "x", DType: Float32, Shape: []int{4, 3}}, // 48 bytes
		{Name: "y", DType: Uint8, Shape: []int{4}},      // at 64, 4 bytes
		{Name: "z", DType: Int64, Shape: []int{4, 2}},   // at 128, 64 bytes
	}}
	g := small.geometry()
	if got := g.offsets; got[0] != 0 || got[1] != 64 || got[2] != 128 {
		t.Errorf("offsets %v, want [0 64 128]", got)
	}
	if g.slotBytes != 192 || g.payloadAlign != 4096 || g.slotStride != 4096 || g.payloadOffset != 36864 {
		t.Errorf("small: slot_bytes %d align %d stride %d payload_offset %d", g.slotBytes, g.payloadAlign, g.slotStride, g.payloadOffset)
	}
	if small.SegmentBytes() != 36864+3*4096 || small.SlotBytes() != 192 {
		t.Errorf("SegmentBytes %d SlotBytes %d", small.SegmentBytes(), small.SlotBytes())
	}
	// 32 slots of headers: 32768 + 4096 = 36864 exactly.
	exact := Layout{Slots: 32, Tensors: []Tensor{{Name: "a", DType: Bool, Shape: []int{1}}}}
	if g := exact.geometry(); g.payloadOffset != 36864 {
		t.Errorf("32 slots: payload_offset %d, want 36864", g.payloadOffset)
	}
	// The reference workload: 32 x 19x12x32x32 float32 = 29,884,416 bytes -> 2 MiB alignment.
	big := Layout{Slots: 4, BatchSize: 32, Tensors: []Tensor{{Name: "x", DType: Float32, Shape: []int{32, 19, 12, 32, 32}}}}
	g = big.geometry()
	if g.slotBytes != 29884416 || g.payloadAlign != HugeAlign || g.slotStride != 15*HugeAlign || g.payloadOffset != HugeAlign {
		t.Errorf("big: slot_bytes %d align %d stride %d payload_offset %d", g.slotBytes, g.payloadAlign, g.slotStride, g.payloadOffset)
	}
	if big.SegmentBytes() != int64(HugeAlign+4*15*HugeAlign) {
		t.Errorf("big SegmentBytes %d", big.SegmentBytes())
	}
	edge := Layout{Slots: 1, Tensors: []Tensor{{Name: "e", DType: Uint8, Shape: []int{HugeAlign}}}}
	if g := edge.geometry(); g.payloadAlign != HugeAlign || g.slotStride != HugeAlign {
		t.Errorf("exactly 2 MiB: align %d stride %d", g.payloadAlign, g.slotStride)
	}
}

func TestLayoutValidate(t *testing.T) {
	ok := func() Layout {
		return Layout{Slots: 2, Tensors: []Tensor{{Name: "x", DType: Float32, Shape: []int{2, 3}}}}
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	many := make([]Tensor, 33)
	for i := range many {
		many[i] = Tensor{Name: "t" + strconv.Itoa(i), DType: Uint8, Shape: []int{1}}
	}
	cases := []struct {
		name string
		edit func(*Layout)
		want string
	}{
		{"no slots", func(l *Layout) { l.Slots = 0 }, "slots 0"},
		{"too many slots", func(l *Layout) { l.Slots = 1025 }, "slots 1025"},
		{"no tensors", func(l *Layout) { l.Tensors = nil }, "0 tensors"},
		{"33 tensors", func(l *Layout) { l.Tensors = many }, "33 tensors"},
		{"empty name", func(l *Layout) { l.Tensors[0].Name = "" }, "length 0"},
		{"long name", func(l *Layout) { l.Tensors[0].Name = strings.Repeat("a", 32) }, "length 32"},
		{"bad name", func(l *Layout) { l.Tensors[0].Name = "a-b" }, `'-'`},
		{"duplicate", func(l *Layout) { l.Tensors = append(l.Tensors, l.Tensors[0]) }, "used twice"},
		{"dtype", func(l *Layout) { l.Tensors[0].DType = 13 }, "invalid dtype code 13"},
		{"ndim 0", func(l *Layout) { l.Tensors[0].Shape = nil }, "0 dimensions"},
		{"ndim 9", func(l *Layout) { l.Tensors[0].Shape = []int{1, 1, 1, 1, 1, 1, 1, 1, 1} }, "9 dimensions"},
		{"zero dim", func(l *Layout) { l.Tensors[0].Shape = []int{2, 0} }, "shape[1] = 0"},
		{"negative dim", func(l *Layout) { l.Tensors[0].Shape = []int{-1} }, "shape[0] = -1"},
		{"huge", func(l *Layout) { l.Tensors[0].Shape = []int{1 << 30, 1 << 30, 1 << 30} }, "too large"},
		{"batch size", func(l *Layout) { l.BatchSize = -1 }, "batch size"},
	}
	for _, c := range cases {
		l := ok()
		c.edit(&l)
		err := l.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", c.name, err, c.want)
		}
		if l.SegmentBytes() != 0 {
			t.Errorf("%s: SegmentBytes of an invalid layout = %d", c.name, l.SegmentBytes())
		}
	}
}
