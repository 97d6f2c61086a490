package rowconv

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobatch/gobatch/readers/zarr"
)

// The reference is today's scalar path: zarr.Float32Decoder.Decode, then the sampler's
// chunked.postprocess (sampler/chunked.go; unexported, so its two loops are written
// out here as it applies them to a chunk with one mean and std).
func reference(t *testing.T, p Params, raw []byte, n int) []float32 {
	t.Helper()
	dec, err := zarr.NewFloat32Decoder(p.Src, p.CF)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	dec.Decode(out, raw)
	if p.Norm {
		m, s := p.Mean, p.Std
		for i, v := range out {
			x := float64(v)
			if p.Clip && !math.IsNaN(x) {
				x = math.Min(math.Max(x, p.ClipMin), p.ClipMax)
			}
			out[i] = float32((x - m) / s)
		}
	}
	if p.NaNFill {
		for i, v := range out {
			if v != v {
				out[i] = p.Fill
			}
		}
	}
	return out
}

var storedTypes = []zarr.Elem{zarr.Int8, zarr.Uint8, zarr.Int16, zarr.Uint16, zarr.Float16, zarr.Float32}

// fuzzCase is one fuzz input turned into parameters and data.
type fuzzCase struct {
	p              Params
	n              int // values
	srcOff, dstOff int // misalignment: bytes into src, values into dst
	rowM, rowGap   int // Rows: row length, extra values between rows
	nt             bool
	raw            []byte // n values (after srcOff bytes)
}

// makeCase builds a case from the fuzzer's numbers. Masks are taken from the data (so
// that they hit) or are NaN; scale and offset are 1 and 0 or the fuzzer's values.
func makeCase(dt, sel uint8, scale, offset, mean, std float64, n uint8, offs uint16, data []byte) fuzzCase {
	src := storedTypes[int(dt)%len(storedTypes)]
	size := src.Size()
	c := fuzzCase{n: int(n) % 201, srcOff: int(offs) % 8, dstOff: int(offs>>3) % 8, nt: offs&(1<<6) != 0}
	c.rowM = 1 + int(offs>>7)%40
	c.rowGap = int(offs>>13) % 5
	raw := make([]byte, c.srcOff+c.n*size)
	seed := uint64(len(data))
	for _, b := range data {
		seed = seed*31 + uint64(b)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(sel)))
	for i := c.srcOff; i < len(raw); i++ {
		if k := i - c.srcOff; k < len(data) {
			raw[i] = data[k]
		} else {
			raw[i] = byte(rng.Uint32())
		}
	}
	c.raw = raw[c.srcOff:]
	p := Params{Src: src, CF: zarr.CFParams{Scale: 1}}
	if sel&1 != 0 {
		p.CF.Scale, p.CF.Offset = scale, offset
	}
	for k := 0; k < [...]int{0, 1, 3, 1}[sel>>1&3]; k++ {
		if sel&(1<<3) != 0 && k == 0 || c.n == 0 {
			p.CF.Masks = append(p.CF.Masks, math.NaN())
			continue
		}
		p.CF.Masks = append(p.CF.Masks, storedValue(src, c.raw[rng.IntN(c.n)*size:]))
	}
	p.Norm = sel&(1<<4) != 0
	p.Mean, p.Std = mean, std
	p.NaNFill = sel&(1<<5) != 0
	if sel&(1<<6) != 0 { // ocf-data-sampler's clip, and a dropout_value as the NaN fill
		p.Clip, p.ClipMin, p.ClipMax = true, mean-std, mean+2*std
		p.Fill = -1.5
	}
	c.p = p
	return c
}

// storedValue reads one stored value as float64, as CF masks are given.
func storedValue(src zarr.Elem, b []byte) float64 {
	switch src {
	case zarr.Int8:
		return float64(int8(b[0]))
	case zarr.Uint8:
		return float64(b[0])
	case zarr.Int16:
		return float64(int16(binary.NativeEndian.Uint16(b)))
	case zarr.Uint16:
		return float64(binary.NativeEndian.Uint16(b))
	case zarr.Float16:
		var v [1]float32
		dec, _ := zarr.NewFloat32Decoder(zarr.Float16, zarr.CFParams{Scale: 1})
		dec.Decode(v[:], b[:2])
		return float64(v[0])
	}
	return float64(math.Float32frombits(binary.NativeEndian.Uint32(b)))
}

const sentinel = 0x7fa5a5a5 // a signalling NaN no kernel writes

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d of %d: got %#08x (%g), want %#08x (%g)", what, i, len(want),
				math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
		}
	}
}

// guarded returns a slice of n values at off values into a buffer whose other values
// are the sentinel, and a check that they still are.
func guarded(n, off int) ([]float32, func(t *testing.T, what string)) {
	buf := make([]float32, off+n+9)
	for i := range buf {
		buf[i] = math.Float32frombits(sentinel)
	}
	return buf[off : off+n], func(t *testing.T, what string) {
		t.Helper()
		for i, v := range buf {
			if (i < off || i >= off+n) && math.Float32bits(v) != sentinel {
				t.Fatalf("%s: wrote value %d outside dst [%d, %d)", what, i, off, off+n)
			}
		}
	}
}

func (c *fuzzCase) check(t *testing.T) {
	conv, err := New(c.p)
	if err != nil {
		t.Fatalf("New(%+v): %v", c.p, err)
	}
	want := reference(t, c.p, c.raw, c.n)
	// The same converter without its arithmetic kernel: the table kernels again.
	lookup := *conv
	setKernels(&lookup, Params{}) // (no Src: newArith does nothing)
	for _, k := range availablePaths() {
		c.checkConv(t, k, conv, k.String()+" "+c.p.Src.String(), want)
		c.checkConv(t, k, &lookup, k.String()+" lookup "+c.p.Src.String(), want)
	}
}

// checkConv checks Row (or RowNT), Value and Rows of conv on path k against want.
func (c *fuzzCase) checkConv(t *testing.T, k kernelPath, conv *Conv, what string, want []float32) {
	defer setPath(setPath(k))
	size := c.p.Src.Size()
	dst, guard := guarded(c.n, c.dstOff)
	if c.nt {
		conv.RowNT(dst, c.raw)
	} else {
		conv.Row(dst, c.raw)
	}
	Fence()
	guard(t, what+" Row")
	sameBits(t, what+" Row", dst, want)
	for i := 0; i < c.n; i++ {
		if v := conv.Value(c.raw[i*size:]); math.Float32bits(v) != math.Float32bits(want[i]) {
			t.Fatalf("%s Value %d: got %#08x, want %#08x", what, i, math.Float32bits(v), math.Float32bits(want[i]))
		}
	}
	c.checkRows(t, what, conv, want)
}

// checkRows converts the values as rows of rowM, written rowGap values apart in dst
// and read rowGap/2 values apart in src (the rows of want, gathered again).
func (c *fuzzCase) checkRows(t *testing.T, what string, conv *Conv, want []float32) {
	m, rows := c.rowM, c.n/c.rowM
	if rows == 0 {
		return
	}
	srcStride := m + c.rowGap/2
	size := c.p.Src.Size()
	src := make([]byte, ((rows-1)*srcStride+m)*size)
	wantRows := make([]float32, 0, rows*m)
	for r := 0; r < rows; r++ {
		copy(src[r*srcStride*size:], c.raw[r*m*size:(r+1)*m*size])
		wantRows = append(wantRows, want[r*m:(r+1)*m]...)
	}
	dstStride := m + c.rowGap
	dst, guard := guarded((rows-1)*dstStride+m, c.dstOff)
	gaps := make([]float32, len(dst)) // what Rows must leave alone between rows
	copy(gaps, dst)
	var next []byte // the rows to prefetch meanwhile (a hint: no effect on dst)
	if c.dstOff%2 == 1 {
		next = src
	}
	conv.RowsThen(dst, dstStride, src, srcStride, rows, m, c.nt, next)
	Fence()
	guard(t, what+" Rows")
	got := make([]float32, 0, rows*m)
	for r := 0; r < rows; r++ {
		got = append(got, dst[r*dstStride:r*dstStride+m]...)
		if r+1 < rows {
			sameBits(t, what+" Rows gap", dst[r*dstStride+m:(r+1)*dstStride], gaps[r*dstStride+m:(r+1)*dstStride])
		}
	}
	sameBits(t, what+" Rows", got, wantRows)
}

// seeds cover every stored type with each parameter switch, lengths around the vector
// widths, misalignments and NT.
func addSeeds(f *testing.F) {
	lengths := []uint8{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 200}
	params := [][4]float64{{1, 0, 0, 1}, {0.001, 0, 273.15, 17.5}, {0.01, -5, -1e-3, 3}, {2.5e-5, 1e4, 0, 0}}
	i := 0
	for dt := range storedTypes {
		for sel := 0; sel < 64; sel += 3 {
			pr := params[i%len(params)]
			n := lengths[i%len(lengths)]
			offs := uint16(i*37) ^ uint16(i<<7) ^ uint16(i<<13)
			f.Add(uint8(dt), uint8(sel), pr[0], pr[1], pr[2], pr[3], n, offs, []byte(nil))
			i++
		}
	}
	// Every float16 NaN, infinity and subnormal class, both signs.
	f16 := []uint16{0x7c00, 0xfc00, 0x7c01, 0x7dff, 0x7e00, 0xfe01, 0x7fff, 0x0001, 0x03ff, 0x8001, 0x0000, 0x8000, 0x3c00}
	b := make([]byte, 0, 2*len(f16))
	for _, h := range f16 {
		b = binary.NativeEndian.AppendUint16(b, h)
	}
	for sel := uint8(0); sel < 64; sel += 5 {
		f.Add(uint8(4), sel, 0.5, 1.0, 0.25, 2.0, uint8(len(f16)), uint16(sel)*41, b)
	}
	// float32 NaNs (signalling and quiet), infinities, -0, subnormals.
	f32 := []uint32{0x7f800001, 0x7fc00000, 0xffbfffff, 0x7f800000, 0x80000000, 0x00000001, 0x3f800000}
	b = nil
	for _, v := range f32 {
		b = binary.NativeEndian.AppendUint32(b, v)
	}
	for sel := uint8(0); sel < 64; sel += 5 {
		f.Add(uint8(5), sel, 0.5, 1.0, 0.25, 2.0, uint8(len(f32)), uint16(sel)*43, b)
	}
}

func FuzzRow(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, dt, sel uint8, scale, offset, mean, std float64, n uint8, offs uint16, data []byte) {
		c := makeCase(dt, sel, scale, offset, mean, std, n, offs, data)
		c.check(t)
	})
}

// TestPaths says which kernel families the run covered (every test runs each).
func TestPaths(t *testing.T) {
	t.Logf("kernel paths on this CPU: %v (in use: %v)", availablePaths(), path)
	if availablePaths()[len(availablePaths())-1] != bestPath() {
		t.Fatalf("best path %v is not the last available %v", bestPath(), availablePaths())
	}
}

// TestAhead: the kernels are given the next call's rows only when all n of them lie in next.
func TestAhead(t *testing.T) {
	next := make([]byte, 2*(3*10+4)) // 4 rows of 4 uint16 values, 10 values apart
	for _, c := range []struct {
		next   []byte
		n      int
		wantOK bool
	}{{next, 4, true}, {next, 5, false}, {next[:len(next)-1], 4, false}, {nil, 1, false}, {next, 0, false}} {
		if got := ahead(c.next, 2, 10, c.n, 4); (got != nil) != c.wantOK || got != nil && got != &c.next[0] {
			t.Errorf("ahead(%d bytes, n %d) = %v, want a pointer: %v", len(c.next), c.n, got, c.wantOK)
		}
	}
}

func TestCopyRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range availablePaths() {
		old := setPath(k)
		for _, m := range []int{1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 64, 100} {
			for _, off := range []int{0, 1, 2, 3, 5, 7} {
				for _, nt := range []bool{false, true} {
					rows, srcStride, dstStride := 5, m+rng.IntN(3), m+rng.IntN(4)
					src := make([]float32, off+(rows-1)*srcStride+m)
					for i := range src {
						src[i] = math.Float32frombits(rng.Uint32()) // NaN payloads too
					}
					src = src[off:]
					dst, guard := guarded((rows-1)*dstStride+m, (off+3)%8)
					gaps := append([]float32(nil), dst...)
					var next []float32 // prefetched meanwhile: a hint only
					if off%2 == 1 {
						next = src[1:]
					}
					CopyRowsThen(dst, dstStride, src, srcStride, rows, m, nt, next)
					Fence()
					what := k.String() + " CopyRows"
					guard(t, what)
					for r := 0; r < rows; r++ {
						sameBits(t, what, dst[r*dstStride:r*dstStride+m], src[r*srcStride:r*srcStride+m])
						if r+1 < rows {
							sameBits(t, what+" gap", dst[r*dstStride+m:(r+1)*dstStride], gaps[r*dstStride+m:(r+1)*dstStride])
						}
					}
					one, guard1 := guarded(m, off)
					CopyNT(one, src[:m])
					Fence()
					guard1(t, "CopyNT")
					sameBits(t, k.String()+" CopyNT", one, src[:m])
				}
			}
		}
		setPath(old)
	}
}

func TestNewErrors(t *testing.T) {
	for _, e := range []zarr.Elem{zarr.Bool, zarr.Int32, zarr.Float64, zarr.ElemNone} {
		if _, err := New(Params{Src: e, CF: zarr.CFParams{Scale: 1}}); err == nil {
			t.Errorf("New(%s): no error", e)
		}
	}
}

func TestShortSlicesPanic(t *testing.T) {
	conv, err := New(Params{Src: zarr.Int16, CF: zarr.CFParams{Scale: 0.001, Masks: []float64{-1}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"short src":       func() { conv.Row(make([]float32, 32), make([]byte, 63)) },
		"short dst":       func() { conv.Rows(make([]float32, 64), 33, make([]byte, 256), 64, 2, 32) },
		"short copy":      func() { CopyRows(make([]float32, 64), 32, make([]float32, 60), 32, 2, 32) },
		"negative stride": func() { conv.Rows(make([]float32, 64), -32, make([]byte, 256), 64, 2, 32) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestEmpty: nothing to convert or copy is no error, whatever the slices.
func TestEmpty(t *testing.T) {
	for _, k := range availablePaths() {
		old := setPath(k)
		for _, src := range storedTypes {
			conv, err := New(Params{Src: src, CF: zarr.CFParams{Scale: 1}})
			if err != nil {
				t.Fatal(err)
			}
			conv.Row(nil, nil)
			conv.RowNT([]float32{}, nil)
			conv.Rows(nil, 32, nil, 32, 0, 32)
			conv.RowsNT(nil, 32, nil, 32, 3, 0)
		}
		CopyNT(nil, nil)
		CopyNT(make([]float32, 4), nil)
		CopyRows(nil, 0, nil, 0, 0, 0)
		CopyRowsNT(nil, 32, nil, 32, 2, 0)
		setPath(old)
	}
}
