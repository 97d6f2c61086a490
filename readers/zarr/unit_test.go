package zarr

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestFloat16(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, float32(math.Ldexp(1, -24))},
		{0x0400, float32(math.Ldexp(1, -14))}, {0x7c00, float32(math.Inf(1))}, {0x8000, float32(math.Copysign(0, -1))},
		{0x3555, 0.333251953125},
	} {
		if got := f16ToF32(c.h); got != c.f || math.Signbit(float64(got)) != math.Signbit(float64(c.f)) {
			t.Errorf("f16ToF32(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := f32ToF16(c.f); got != c.h {
			t.Errorf("f32ToF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	// Every half converts to float32 and back unchanged (NaNs stay NaN).
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		back := f32ToF16(f)
		if f != f {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
	// Round to nearest even at the halfway point.
	if got := f32ToF16(1 + float32(math.Ldexp(1, -11))); got != 0x3c00 {
		t.Errorf("1+2^-11 -> %#04x, want 0x3c00", got)
	}
	if got := f32ToF16(1 + 3*float32(math.Ldexp(1, -11))); got != 0x3c02 {
		t.Errorf("1+3*2^-11 -> %#04x, want 0x3c02", got)
	}
	if got := f32ToF16(70000); got != 0x7c00 {
		t.Errorf("overflow -> %#04x, want inf", got)
	}
}

func TestParseFill(t *testing.T) {
	f32 := func(e []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(e)) }
	mustType := func(s string) DType {
		d, err := parseTypestr(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		raw  string
		dt   string
		want func([]byte) bool
	}{
		{`"NaN"`, "<f4", func(e []byte) bool { return math.IsNaN(float64(f32(e))) }},
		{`"Infinity"`, "<f4", func(e []byte) bool { return math.IsInf(float64(f32(e)), 1) }},
		{`"-Infinity"`, "<f4", func(e []byte) bool { return math.IsInf(float64(f32(e)), -1) }},
		{`"0x7fc00000"`, "<f4", func(e []byte) bool { return binary.LittleEndian.Uint32(e) == 0x7fc00000 }},
		{`"0x3c00"`, "<f2", func(e []byte) bool { return binary.LittleEndian.Uint16(e) == 0x3c00 }},
		{`1.5`, "<f2", func(e []byte) bool { return binary.LittleEndian.Uint16(e) == 0x3e00 }},
		{`-1`, "<i2", func(e []byte) bool { return binary.LittleEndian.Uint16(e) == 0xffff }},
		{`18446744073709551615`, "<u8", func(e []byte) bool { return binary.LittleEndian.Uint64(e) == math.MaxUint64 }},
		{`-9223372036854775808`, "<M8[ns]", func(e []byte) bool { return int64(binary.LittleEndian.Uint64(e)) == math.MinInt64 }},
		{`"NaT"`, "<m8[s]", func(e []byte) bool { return int64(binary.LittleEndian.Uint64(e)) == math.MinInt64 }},
		{`true`, "|b1", func(e []byte) bool { return e[0] == 1 }},
		{`"YWI="`, "|S3", func(e []byte) bool { return string(e) == "ab\x00" }},
		{`"ab"`, "<U3", func(e []byte) bool {
			return binary.LittleEndian.Uint32(e) == 'a' && binary.LittleEndian.Uint32(e[4:]) == 'b'
		}},
		{`[1.0, "NaN"]`, "<c8", func(e []byte) bool { return f32(e) == 1 && math.IsNaN(float64(f32(e[4:]))) }},
		{`null`, "<f8", func(e []byte) bool { return binary.LittleEndian.Uint64(e) == 0 }},
	} {
		e, _, _, err := parseFill([]byte(c.raw), mustType(c.dt))
		if err != nil || !c.want(e) {
			t.Errorf("fill %s as %s: %x, %v", c.raw, c.dt, e, err)
		}
	}
	for _, c := range []struct{ raw, dt string }{
		{`256`, "|u1"}, {`-1`, "<u2"}, {`"maybe"`, "<f4"}, {`1.5`, "<i4"}, {`"0xzz"`, "<f4"}, {`"YWJjZA=="`, "|S3"}, {`"abcd"`, "<U3"},
	} {
		if _, _, _, err := parseFill([]byte(c.raw), mustType(c.dt)); err == nil {
			t.Errorf("fill %s as %s accepted", c.raw, c.dt)
		}
	}
}

func TestTimeUnits(t *testing.T) {
	utc := func(y, mo, d, h, mi, s, ns int) time.Time {
		return time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC)
	}
	for _, c := range []struct {
		units string
		unit  time.Duration
		epoch *time.Time
	}{
		{"minutes since 2021-01-01 00:00:00", time.Minute, ptr(utc(2021, 1, 1, 0, 0, 0, 0))},
		{"minutes since 2021-01-01", time.Minute, ptr(utc(2021, 1, 1, 0, 0, 0, 0))},
		{"hours since 2020-04-01T06:00:00", time.Hour, ptr(utc(2020, 4, 1, 6, 0, 0, 0))},
		{"milliseconds since 2020-01-04T06:37:59.134000", time.Millisecond, ptr(utc(2020, 1, 4, 6, 37, 59, 134000000))},
		{"nanoseconds since 1970-01-01", time.Nanosecond, ptr(utc(1970, 1, 1, 0, 0, 0, 0))},
		{"seconds since 1970-01-01 00:00:00 UTC", time.Second, ptr(utc(1970, 1, 1, 0, 0, 0, 0))},
		{"days since 2000-01-01 12:00:00+01:00", 24 * time.Hour, ptr(utc(2000, 1, 1, 11, 0, 0, 0))},
		{"days since 2000-1-1", 24 * time.Hour, ptr(utc(2000, 1, 1, 0, 0, 0, 0))},
		{"hours", time.Hour, nil},
	} {
		u, e, ok, err := parseTimeUnits(c.units)
		if !ok || err != nil || u != c.unit || (e == nil) != (c.epoch == nil) || (e != nil && !e.Equal(*c.epoch)) {
			t.Errorf("%q: unit %v epoch %v ok %v err %v", c.units, u, e, ok, err)
		}
	}
	for _, s := range []string{"K", "m s-1", "degrees_north", "1"} {
		if _, _, ok, _ := parseTimeUnits(s); ok {
			t.Errorf("%q read as time units", s)
		}
	}
	if _, _, ok, err := parseTimeUnits("hours since yesterday"); !ok || err == nil {
		t.Errorf("a bad reference time was accepted")
	}
}

func ptr[T any](v T) *T { return &v }

func TestQuoteNonFinite(t *testing.T) {
	var v map[string]any
	if err := decodeJSON([]byte(`{"a": NaN, "b": [Infinity, -Infinity], "c": "NaN inside", "d": "x\"NaN"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v["a"] != "NaN" || v["c"] != "NaN inside" || v["d"] != `x"NaN` {
		t.Fatalf("decoded %v", v)
	}
}

func TestByteSwapAndGather(t *testing.T) {
	b := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	byteSwap(b, 4)
	if string(b) != string([]byte{4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9}) {
		t.Fatalf("swap4 %v", b)
	}
	byteSwap(b[:12], 12)
	if b[0] != 9 || b[11] != 4 {
		t.Fatalf("swap12 %v", b)
	}
	// A 2x3 array stored in F order: src holds column-major values.
	src := []byte{0, 3, 1, 4, 2, 5}
	dst := make([]byte, 6)
	gatherStrided(dst, src, []int{2, 3}, []int{1, 2}, 1)
	if string(dst) != string([]byte{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("gather %v", dst)
	}
}

// Hand-written v3 metadata: the "endian" alias of bytes and the old "F" string form of
// transpose, read from a MemStore.
func TestV3Aliases(t *testing.T) {
	s := NewMemStore("mem")
	s.Data["a/zarr.json"] = []byte(`{"zarr_format": 3, "node_type": "array", "shape": [2, 3], "data_type": "int16",
		"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
		"chunk_key_encoding": {"name": "default"}, "fill_value": 0,
		"codecs": [{"name": "transpose", "configuration": {"order": "F"}}, {"name": "endian", "configuration": {"endian": "big"}}]}`)
	// Stored transposed (3x2, C order) and big-endian: element (i, j) = 10*i + j.
	var raw []byte
	for j := 0; j < 3; j++ {
		for i := 0; i < 2; i++ {
			raw = append(raw, 0, byte(10*i+j))
		}
	}
	s.Data["a/c/0/0"] = raw
	a, err := OpenArray(s, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int64, 6)
	if err := a.ReadBox([]int{0, 0}, []int{2, 3}, int64Bytes(got), &ReadOptions{Out: Int64}); err != nil {
		t.Fatal(err)
	}
	for k, v := range got {
		if v != int64(10*(k/3)+k%3) {
			t.Fatalf("got %v", got)
		}
	}
	if string(s.Data["a/c/0/0"]) != string(raw) {
		t.Fatal("the stored chunk was modified")
	}
}

// Unusable CF attributes do not stop an array from opening; they fail CF reads.
func TestBadCFAttributes(t *testing.T) {
	s := NewMemStore("mem")
	s.Data["a/.zarray"] = []byte(`{"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<i2", "fill_value": 0, "order": "C", "compressor": null, "filters": null}`)
	s.Data["a/.zattrs"] = []byte(`{"scale_factor": "big", "units": "hours since yesterday"}`)
	s.Data["a/0"] = []byte{1, 0, 2, 0}
	a, err := OpenArray(s, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int16, 2)
	if err := a.ReadBox([]int{0}, []int{2}, unsafeInt16Bytes(got), nil); err != nil || got[0] != 1 || got[1] != 2 {
		t.Fatalf("plain read: %v %v", got, err)
	}
	f := make([]float32, 2)
	if err := a.ReadBoxFloat32([]int{0}, []int{2}, f, &ReadOptions{CF: true}); err == nil || !strings.Contains(err.Error(), "scale_factor") {
		t.Fatalf("CF read with a bad scale_factor: %v", err)
	}
	if _, err := a.ReadTimes(); err == nil {
		t.Fatal("ReadTimes with bad units succeeded")
	}
}

func unsafeInt16Bytes(s []int16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// _Unsigned, a list-valued missing_value and scale/offset, on a hand-made v2 array.
func TestCFUnsignedAndMissing(t *testing.T) {
	s := NewMemStore("mem")
	s.Data["a/.zarray"] = []byte(`{"zarr_format": 2, "shape": [5], "chunks": [5], "dtype": "|i1", "fill_value": null, "order": "C", "compressor": null, "filters": null}`)
	s.Data["a/.zattrs"] = []byte(`{"_Unsigned": "true", "_FillValue": -1, "missing_value": [3, 4], "scale_factor": 0.5, "add_offset": 1}`)
	s.Data["a/0"] = []byte{0xff, 0xfe, 3, 4, 10}
	a, err := OpenArray(s, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 5)
	if err := a.ReadBoxFloat32([]int{0}, []int{5}, got, &ReadOptions{CF: true}); err != nil {
		t.Fatal(err)
	}
	// 0xff is the fill (-1 read unsigned); 0xfe = 254 -> 254*0.5+1; 3 and 4 are missing.
	if !math.IsNaN(float64(got[0])) || got[1] != 128 || !math.IsNaN(float64(got[2])) || !math.IsNaN(float64(got[3])) || got[4] != 6 {
		t.Fatalf("CF values %v", got)
	}
	raw := make([]float32, 5)
	if err := a.ReadBoxFloat32([]int{0}, []int{5}, raw, nil); err != nil || raw[0] != -1 || raw[4] != 10 {
		t.Fatalf("raw values %v %v", raw, err)
	}
}

func TestAttrHelpers(t *testing.T) {
	a := openFixture(t, "cf2.zarr", "time")
	if u, ok := a.AttrString("units"); !ok || u != "minutes since 2021-01-01" {
		t.Fatalf("units %q %v", u, ok)
	}
	b := openFixture(t, "cf2.zarr", "temp")
	if f, ok := b.AttrFloat("scale_factor"); !ok || f != 0.01 {
		t.Fatalf("scale_factor %v %v", f, ok)
	}
	if _, ok := b.AttrString("scale_factor"); ok {
		t.Fatal("a number read as a string")
	}
	if _, ok := b.AttrFloat("nope"); ok {
		t.Fatal("missing attribute found")
	}
}

// v3 numcodecs.delta before bytes: values are the running sums of the stored
// deltas; a big-endian bytes codec after a multi-byte filter output is refused.
func TestV3DeltaFilter(t *testing.T) {
	z, err := parseZarrJSON([]byte(v3FilterDocs[1])) // int32, delta astype <i1, bytes big
	if err != nil {
		t.Fatal(err)
	}
	m, err := v3ArrayMeta(z)
	if err != nil {
		t.Fatal(err)
	}
	s := NewMemStore("mem")
	a, err := newArray(s, "", m)
	if err != nil {
		t.Fatal(err)
	}
	s.Data["c/0"] = []byte{5, 1, 0xFF, 3}
	s.Data["c/1"] = []byte{0x80, 0, 0, 1}
	got := make([]byte, 4*8)
	if err := a.ReadBox([]int{0}, []int{8}, got, nil); err != nil {
		t.Fatal(err)
	}
	want := []int32{5, 6, 5, 8, -128, -128, -128, -127}
	for i, w := range want {
		if v := int32(binary.NativeEndian.Uint32(got[4*i:])); v != w {
			t.Fatalf("element %d = %d, want %d (all %v)", i, v, w, got)
		}
	}
	doc := strings.Replace(v3FilterDocs[1], `"astype":"<i1"`, `"astype":"<i2"`, 1)
	z, _ = parseZarrJSON([]byte(doc))
	if m, err := v3ArrayMeta(z); err == nil {
		_, err = newArray(s, "", m)
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("big-endian bytes after delta to <i2: %v, want ErrUnsupported", err)
		}
	} else if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("big-endian bytes after delta to <i2: %v, want ErrUnsupported", err)
	}
}
