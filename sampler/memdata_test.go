package sampler

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/gobatch/gobatch/config"
)

// An in-memory dataset with the layout of the reference workload (smaller), so that the sampler
// can be tested without the Zarr reader. Values are formulas of the indices; a naive reference
// (refExample) recomputes examples from the whole arrays.

type memArray struct {
	shape, chunks []int
	dims          []string
	kind          byte
	size          int
	scale, offset float64
	fill          float64
	hasFill       bool
	raw           []float64 // C order, raw (stored) values
	ints          []int64
	strs          []string
	attrs         map[string]string
	decodes       *int // counts DecodeChunk calls
	failChunk     []int
	onDecode      func(idx []int) // called as DecodeChunk begins; nil: nothing
	onReadAhead   func(idx []int) // called by ReadAhead (readAheadArray); nil: nothing
}

// ReadAhead implements readAheadArray: a memory array has nothing to read ahead, but tests
// watch the calls.
func (a *memArray) ReadAhead(idx []int) {
	if a.onReadAhead != nil {
		a.onReadAhead(idx)
	}
}

func (a *memArray) Shape() []int        { return a.shape }
func (a *memArray) Chunks() []int       { return a.chunks }
func (a *memArray) Dims() []string      { return a.dims }
func (a *memArray) Native() (byte, int) { return a.kind, a.size }
func (a *memArray) TypeName() string    { return fmt.Sprintf("%c%d", a.kind, a.size) }
func (a *memArray) CF() (float64, float64, float64, bool) {
	return a.scale, a.offset, a.fill, a.hasFill
}
func (a *memArray) Attr(n string) string { return a.attrs[n] }
func (a *memArray) Int64s() ([]int64, error) {
	if a.ints == nil && a.strs != nil {
		return nil, fmt.Errorf("Int64s on a string array")
	}
	return a.ints, nil
}
func (a *memArray) Times() ([]int64, error)                 { return a.ints, nil }
func (a *memArray) Durations() ([]int64, error)             { return a.ints, nil }
func (a *memArray) Strings() ([]string, error)              { return a.strs, nil }
func (a *memArray) Float64s() ([]float64, error)            { return a.raw, nil }
func (a *memArray) DecodeChunk(idx []int, dst []byte) error { return a.decode(idx, dst) }

func (a *memArray) decode(idx []int, dst []byte) error {
	if a.decodes != nil {
		*a.decodes++
	}
	if a.onDecode != nil {
		a.onDecode(idx)
	}
	if a.failChunk != nil && fmt.Sprint(idx) == fmt.Sprint(a.failChunk) {
		return fmt.Errorf("injected failure")
	}
	n := len(a.shape)
	pos := make([]int, n)
	total := 1
	for _, c := range a.chunks {
		total *= c
	}
	for e := 0; e < total; e++ {
		r := e
		inside := true
		lin := 0
		for d := n - 1; d >= 0; d-- {
			pos[d] = r % a.chunks[d]
			r /= a.chunks[d]
		}
		for d := 0; d < n; d++ {
			g := idx[d]*a.chunks[d] + pos[d]
			if g >= a.shape[d] {
				inside = false
				break
			}
			lin = lin*a.shape[d] + g
		}
		v := a.fill
		if inside {
			v = a.raw[lin]
		}
		switch {
		case a.kind == 'i' && a.size == 1:
			dst[e] = byte(int8(v))
		case a.kind == 'u' && a.size == 1:
			dst[e] = byte(v)
		case a.kind == 'u' && a.size == 2:
			binary.LittleEndian.PutUint16(dst[2*e:], uint16(v))
		case a.kind == 'f' && a.size == 2:
			binary.LittleEndian.PutUint16(dst[2*e:], halfBits(v))
		case a.kind == 'i' && a.size == 2:
			binary.LittleEndian.PutUint16(dst[2*e:], uint16(int16(v)))
		case a.kind == 'f' && a.size == 4:
			binary.LittleEndian.PutUint32(dst[4*e:], math.Float32bits(float32(v)))
		default:
			return fmt.Errorf("memArray: unsupported native type")
		}
	}
	return nil
}

// halfBits is the float16 encoding of v: NaN, zero, or a normal value float16 holds exactly
// (the test data's).
func halfBits(v float64) uint16 {
	b := math.Float32bits(float32(v))
	sign := uint16(b>>16) & 0x8000
	switch {
	case v != v:
		return 0x7e00
	case v == 0:
		return sign
	}
	exp := int(b>>23&0xff) - 127 + 15
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3ff)
}

type memDataset struct {
	name   string
	arrays map[string]*memArray
}

func (d *memDataset) String() string { return d.name }
func (d *memDataset) Array(n string) (Array, error) {
	if a, ok := d.arrays[n]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("%s: no array %q", d.name, n)
}

// memParams sizes a synthetic nowcast dataset.
type memParams struct {
	T, P, S   int // satellite times, pixels, PV systems
	satChunkT int
	satChunkP int
}

func coords(n int, start, step float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start + step*float64(i)
	}
	return out
}

func newMemNowcast(p memParams) map[string]*memDataset {
	const epoch = 1609459200
	C, V := 4, 3
	// satellite: int16 raw, scale 0.001, fill -1
	sat := &memArray{shape: []int{p.T, C, p.P, p.P}, chunks: []int{p.satChunkT, C, p.satChunkP, p.satChunkP},
		dims: []string{"time", "channel", "y", "x"}, kind: 'i', size: 2, scale: 0.001, fill: -1, hasFill: true}
	sat.raw = make([]float64, p.T*C*p.P*p.P)
	for i := range sat.raw {
		v := float64((i*7919 + i/13) % 1000)
		if i%997 == 5 {
			v = -1
		}
		sat.raw[i] = v
	}
	times := make([]int64, p.T)
	for i := range times {
		times[i] = epoch + int64(i)*300
	}
	satDS := &memDataset{name: "satellite.zarr", arrays: map[string]*memArray{
		"data":    sat,
		"time":    {shape: []int{p.T}, ints: times},
		"channel": {shape: []int{C}, strs: []string{"A", "B", "C", "D"}},
		"x":       {shape: []int{p.P}, raw: coords(p.P, 200000, 2000)},
		"y":       {shape: []int{p.P}, raw: coords(p.P, 900000, -2000)},
	}}
	// nwp: runs every 180 min, 16 hourly steps, P/4 pixels, chunks (1, 16, V, 8, 8)
	Q := p.P / 4
	N := (p.T-1)*5/180 + 1
	nwp := &memArray{shape: []int{N, 16, V, Q, Q}, chunks: []int{1, 16, V, 8, 8},
		dims: []string{"init_time", "step", "variable", "y", "x"}, kind: 'f', size: 4, scale: 1, fill: math.NaN(), hasFill: true}
	nwp.raw = make([]float64, N*16*V*Q*Q)
	for i := range nwp.raw {
		nwp.raw[i] = float64(float32(float64(i)*0.25 + 0.125))
	}
	inits := make([]int64, N)
	for i := range inits {
		inits[i] = epoch + int64(i)*180*60
	}
	steps := make([]int64, 16)
	for i := range steps {
		steps[i] = int64(i) * 3600
	}
	nwpDS := &memDataset{name: "nwp.zarr", arrays: map[string]*memArray{
		"UKV":       nwp,
		"init_time": {shape: []int{N}, ints: inits},
		"step":      {shape: []int{16}, ints: steps},
		"variable":  {shape: []int{V}, strs: []string{"u", "v", "w"}},
		"x":         {shape: []int{Q}, raw: coords(Q, 200000, 8000)},
		"y":         {shape: []int{Q}, raw: coords(Q, 900000, -8000)},
	}}
	// pv: float32 (time, system), chunks (24, 7)
	pv := &memArray{shape: []int{p.T, p.S}, chunks: []int{24, 7}, dims: []string{"time", "system"},
		kind: 'f', size: 4, scale: 1, fill: math.NaN(), hasFill: true, attrs: map[string]string{"coordinates": "x y"}}
	pv.raw = make([]float64, p.T*p.S)
	for i := range pv.raw {
		pv.raw[i] = float64(i%5000) / 8
		if i%31 == 3 {
			pv.raw[i] = math.NaN()
		}
	}
	ids := make([]int64, p.S)
	px, py := make([]float64, p.S), make([]float64, p.S)
	for i := range ids {
		ids[i] = int64(1000 + 3*i)
		// deterministic scatter inside the satellite area
		px[i] = 200000 + float64((i*7333)%(2000*(p.P-1)))
		py[i] = 900000 - float64((i*4421)%(2000*(p.P-1)))
	}
	pvDS := &memDataset{name: "pv.zarr", arrays: map[string]*memArray{
		"power":  pv,
		"time":   {shape: []int{p.T}, ints: times},
		"system": {shape: []int{p.S}, ints: ids},
		"x":      {shape: []int{p.S}, raw: px},
		"y":      {shape: []int{p.S}, raw: py},
	}}
	return map[string]*memDataset{"satellite.zarr": satDS, "nwp.zarr": nwpDS, "pv.zarr": pvDS}
}

const memConfig = `
[batch]
size = 4
seed = 7

[[source]]
name = "satellite"
kind = "zarr"
store = "satellite.zarr"
variable = "data"
anchor = true
time_resolution_minutes = 5
interval_start_minutes = -30
interval_end_minutes = 60
image_size_pixels_height = 8
image_size_pixels_width = 8
channels = ["A", "B", "C", "D"]
cache_mb = 64
%s

[[source]]
name = "nwp"
kind = "zarr"
store = "nwp.zarr"
variable = "UKV"
role = "nwp"
min_staleness_minutes = 60
time_resolution_minutes = 60
interval_start_minutes = -60
interval_end_minutes = 120
image_size_pixels_height = 4
image_size_pixels_width = 4
channels = ["u", "v", "w"]

[[source]]
name = "pv"
kind = "zarr"
store = "pv.zarr"
variable = "power"
role = "points"
nearest_k = 5
time_resolution_minutes = 5
interval_start_minutes = -30
interval_end_minutes = 60
`

func memOpen(ds map[string]*memDataset) func(string) (Dataset, error) {
	return func(path string) (Dataset, error) {
		if d, ok := ds[filepath.Base(path)]; ok {
			return d, nil
		}
		return nil, fmt.Errorf("no store %s", path)
	}
}

func parseCfg(t testing.TB, text string) (*config.Config, error) {
	t.Helper()
	return config.Parse("/data/test.toml", []byte(text), config.TOML)
}

func newMemJob(t testing.TB, p memParams, extra string, opt Options) (*Job, map[string]*memDataset) {
	t.Helper()
	cfg, err := parseCfg(t, fmt.Sprintf(memConfig, extra))
	if err != nil {
		t.Fatal(err)
	}
	ds := newMemNowcast(p)
	opt.Open = memOpen(ds)
	j, err := NewJob(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j, ds
}

var smallMem = memParams{T: 150, P: 40, S: 23, satChunkT: 12, satChunkP: 16}

// batchBuf allocates the tensors of one batch.
func batchBuf(j *Job) [][]byte {
	out := make([][]byte, len(j.Tensors()))
	for i, t := range j.Tensors() {
		out[i] = make([]byte, t.NBytes())
	}
	return out
}
