package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
)

// shuffleRef is the forward byte shuffle, written the obvious way.
func shuffleRef(src []byte, typesize int) []byte {
	out := make([]byte, len(src))
	n := len(src) / typesize
	for i := 0; i < n; i++ {
		for j := 0; j < typesize; j++ {
			out[j*n+i] = src[i*typesize+j]
		}
	}
	copy(out[n*typesize:], src[n*typesize:])
	return out
}

// bitshuffleRef is the forward bit shuffle of the first n elements (n%8 == 0),
// bit by bit, following the layout documented in shuffle.go.
func bitshuffleRef(src []byte, typesize, n int) []byte {
	out := make([]byte, len(src))
	nb := n / 8
	for i := 0; i < n; i++ {
		for j := 0; j < typesize; j++ {
			b := src[i*typesize+j]
			for k := 0; k < 8; k++ {
				if b>>k&1 != 0 {
					out[(8*j+k)*nb+i/8] |= 1 << (i % 8)
				}
			}
		}
	}
	copy(out[n*typesize:], src[n*typesize:])
	return out
}

func TestUnshuffleAllTypesizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for ts := 1; ts <= 40; ts++ {
		for _, size := range []int{0, 1, ts - 1, ts, 7 * ts, 8*ts + 3, 64*ts + ts/2, 1000, 4099} {
			if size < 0 {
				continue
			}
			src := make([]byte, size)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			got := make([]byte, size)
			unshuffle(got, shuffleRef(src, ts), ts)
			if !bytes.Equal(got, src) {
				t.Fatalf("typesize %d size %d: unshuffle(shuffle(x)) != x (first diff %d)", ts, size, firstDiff(got, src))
			}
		}
	}
}

func TestBitunshuffle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ts := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 255} {
		for _, nelem := range []int{0, 1, 7, 8, 9, 16, 63, 64, 65, 1000, 1003} {
			for _, tail := range []int{0, ts / 2} {
				size := nelem*ts + tail
				src := make([]byte, size)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				for _, v2 := range []bool{false, true} {
					n := nelem
					var shuffled []byte
					switch {
					case n%8 == 0:
						shuffled = bitshuffleRef(src, ts, n)
					case v2:
						shuffled = bitshuffleRef(src, ts, n-n%8)
					default:
						shuffled = append([]byte(nil), src...) // Blosc1 leaves the block as it is
					}
					got := make([]byte, size)
					bitunshuffle(got, shuffled, make([]byte, size), ts, v2)
					if !bytes.Equal(got, src) {
						t.Fatalf("typesize %d, %d elements + %d, blosc2=%v: first diff at %d", ts, nelem, tail, v2, firstDiff(got, src))
					}
				}
			}
		}
	}
}

func TestTranspose8x8(t *testing.T) {
	var x [8]uint64
	for r := range x {
		for c := 0; c < 8; c++ {
			x[r] |= uint64(r*8+c) << (8 * c)
		}
	}
	transpose8x8(&x)
	for r := range x {
		for c := 0; c < 8; c++ {
			if got := byte(x[r] >> (8 * c)); got != byte(c*8+r) {
				t.Fatalf("x[%d] byte %d = %d, want %d", r, c, got, c*8+r)
			}
		}
	}
}

// blosc1Chunk builds a Blosc1 chunk by hand: one stream per block, no split.
func blosc1Chunk(flags byte, typesize int, nbytes, blocksize int, streams [][]byte) []byte {
	nblocks := len(streams)
	hdr := make([]byte, 16+4*nblocks)
	hdr[0], hdr[1], hdr[2], hdr[3] = 2, 1, flags|flagDontSplit, byte(typesize)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(blocksize))
	out := hdr
	for i, s := range streams {
		binary.LittleEndian.PutUint32(out[16+4*i:], uint32(len(out)))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
	return out
}

// numcodecs no longer builds c-blosc with Snappy, so its path is checked on a
// chunk made here with s2's Snappy encoder.
func TestSnappyChunk(t *testing.T) {
	want := pattern("ramp", 5000, 4, 9)
	shuffled := shuffleRef(want[:4096], 4)
	tail := shuffleRef(want[4096:], 4)
	chunk := blosc1Chunk(flagShuffle|formatSnappy<<5, 4, len(want), 4096,
		[][]byte{s2.EncodeSnappy(nil, shuffled), s2.EncodeSnappy(nil, tail)})
	got := make([]byte, len(want))
	n, err := Decompress(got, chunk)
	if err != nil || n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("Decompress = %d, %v; equal %v", n, err, bytes.Equal(got, want))
	}
}

func TestErrors(t *testing.T) {
	good := blosc1Chunk(formatLZ4<<5, 1, 4, 4, [][]byte{{1, 2, 3, 4}})
	if n, err := Decompress(make([]byte, 4), good); err != nil || n != 4 {
		t.Fatalf("hand-made chunk: %d, %v", n, err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		src  []byte
		want string
		v2   bool
	}{
		{"empty", nil, "shorter than the 16-byte header", false},
		{"short", good[:10], "shorter than the 16-byte header", false},
		{"version0", mod(func(b []byte) []byte { b[0] = 0; return b }), "format version 0", false},
		{"blosc2 via v1", mod(func(b []byte) []byte { b[0] = 5; return b }), "use Decompress2", false},
		{"future version", mod(func(b []byte) []byte { b[0] = 9; return b }), "format version 9", true},
		{"typesize0", mod(func(b []byte) []byte { b[3] = 0; return b }), "typesize 0", false},
		{"cbytes too big", mod(func(b []byte) []byte { b[12] = 200; return b }), "exceeds the", false},
		{"cbytes too small", mod(func(b []byte) []byte { b[12] = 3; return b }), "smaller than the 16-byte header", false},
		{"nbytes huge", mod(func(b []byte) []byte { b[7] = 0x80; return b }), "out of range", false},
		{"blocksize 0", mod(func(b []byte) []byte { b[8] = 0; return b }), "block size 0", false},
		{"bad bstart", mod(func(b []byte) []byte { b[16] = 99; return b }), "block 0 starts at offset 99", false},
		{"stream too long", mod(func(b []byte) []byte { b[20] = 50; return b }), "runs past", false},
		{"negative stream v1", mod(func(b []byte) []byte { b[23] = 0x80; return b }), "has size", false},
		{"codec 5", mod(func(b []byte) []byte { b[2] = 5<<5 | flagDontSplit; return b }), "codec format 5 not supported", false},
		{"both shuffles v1", mod(func(b []byte) []byte { b[2] |= flagShuffle | flagBitshuffle; return b }), "both shuffle", false},
		{"frame", []byte("\x9e\xa8b2frame\x00\xd2\x00\x00\x00a\xcf"), "contiguous frame", true},
	}
	for _, c := range cases {
		var err error
		if c.v2 {
			_, err = Decompress2(make([]byte, 1<<10), c.src)
		} else {
			_, err = Decompress(make([]byte, 1<<10), c.src)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	// Unsupported features wrap ErrUnsupported, corrupt input ErrCorrupt.
	_, err := Decompress(make([]byte, 8), mod(func(b []byte) []byte { b[2] = 5<<5 | flagDontSplit; return b }))
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("codec 5: %v does not wrap ErrUnsupported", err)
	}
	_, err = Decompress(make([]byte, 8), good[:20])
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: %v does not wrap ErrCorrupt", err)
	}
}

// Every fixture, truncated or with bytes flipped, must give an error or some
// output, never a panic. (Fuzzing explores further; this runs in every go test.)
func TestCorruptedFixtures(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var d Decoder
	dst := make([]byte, 2<<20)
	for _, file := range []string{"blosc1.json.gz", "blosc2.json.gz"} {
		for _, c := range loadFixtures(t, file) {
			src := c.src
			for _, cut := range []int{1, 15, 16, 17, 31, 32, 33, len(src) / 2, len(src) - 1} {
				if cut > 0 && cut < len(src) {
					d.Decompress(dst, src[:cut])
					d.Decompress2(dst, src[:cut])
				}
			}
			for k := 0; k < 8; k++ {
				m := append([]byte(nil), src...)
				for f := 0; f < 1+k%3; f++ {
					m[rng.IntN(len(m))] ^= byte(1 << rng.IntN(8))
				}
				d.Decompress(dst, m)
				d.Decompress2(dst, m)
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	cases := loadFixtures(t, "blosc1.json.gz")
	cases = append(cases, loadFixtures(t, "blosc2.json.gz")...)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := g; i < len(cases); i += 4 {
				c := cases[i]
				if c.Error != "" || c.ContentUndefined {
					continue
				}
				dst := make([]byte, len(c.want))
				if _, err := Decompress2(dst, c.src); err != nil || !bytes.Equal(dst, c.want) {
					t.Errorf("%s: concurrent decode failed: %v", c.Name, err)
				}
			}
		})
	}
	wg.Wait()
}

// raceEnabled is set by race_test.go under -race.
var raceEnabled bool

// Decoding allocates nothing once the Decoder's scratch has grown.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocations are not representative")
	}
	byName := map[string]*fixture{}
	for _, file := range []string{"blosc1.json.gz", "blosc2.json.gz"} {
		for _, c := range loadFixtures(t, file) {
			byName[c.Name] = c
		}
	}
	for _, name := range []string{
		"lz4-c5-ts2-auto", "blosclz-c5-ts4-auto", "zstd-c5-ts4-auto", "zlib-c5-ts2-auto", "lz4-bitshuffle-ts2-auto",
		"ocf-zstd-c5-f2-large", "blosclz-delta-shuffle-ts4-always_split", "zstd-shuffle-bitshuffle-ts4-never_split",
	} {
		c := byName[name]
		if c == nil {
			t.Fatalf("fixture %s missing", name)
		}
		dst := make([]byte, len(c.want))
		var d Decoder
		dec := d.Decompress2
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := dec(dst, c.src); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per decode with a reused Decoder", name, allocs)
		}
		allocs = testing.AllocsPerRun(20, func() {
			if _, err := Decompress2(dst, c.src); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 0.5 {
			t.Errorf("%s: %.1f allocations per package-level decode", name, allocs)
		}
	}
}

// blosc2Chunk builds a Blosc2 chunk by hand: extended header, the given filter
// pipeline, one block, no split, the filtered block stored raw (csize == bsize).
func blosc2Chunk(data []byte, typesize int, filters, meta [6]byte) []byte {
	block := append([]byte(nil), data...)
	for i, f := range filters { // forward pipeline, slot order
		ts := typesize
		if meta[i] != 0 {
			ts = int(meta[i])
		}
		switch f {
		case filterShuffle:
			block = shuffleRef(block, ts)
		case filterBitshuffle:
			n := len(block) / typesize
			block = bitshuffleRef(block, typesize, n-n%8)
		}
	}
	out := make([]byte, 32, 32+4+4+len(block))
	out[0], out[1], out[2], out[3] = 5, 1, flagShuffle|flagBitshuffle|flagDontSplit|formatZstd<<5, byte(typesize)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(data)))
	binary.LittleEndian.PutUint32(out[8:], uint32(len(data)))
	copy(out[16:22], filters[:])
	copy(out[24:30], meta[:])
	out = binary.LittleEndian.AppendUint32(out, 36)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(block)))
	out = append(out, block...)
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
	return out
}

// c-blosc2 3.3.5 does not round-trip pipelines of three data-moving filters, so
// there is no fixture from it; this checks the buffer cycling on a hand-made chunk.
func TestThreeStepPipeline(t *testing.T) {
	want := pattern("ramp", 4003, 4, 3)
	for _, filters := range [][6]byte{
		{filterShuffle, filterBitshuffle, filterShuffle},
		{filterBitshuffle, filterShuffle, filterBitshuffle, filterShuffle},
		{0, 0, 0, 0, 0, filterShuffle},
	} {
		chunk := blosc2Chunk(want, 4, filters, [6]byte{})
		got := make([]byte, len(want))
		if n, err := Decompress2(got, chunk); err != nil || n != len(want) || !bytes.Equal(got, want) {
			t.Errorf("filters %v: %d, %v, first diff %d", filters, n, err, firstDiff(got, want))
		}
	}
	// An unknown filter is named in the error.
	chunk := blosc2Chunk(want, 4, [6]byte{0, 0, 0, 0, 0, 35}, [6]byte{})
	if _, err := Decompress2(make([]byte, len(want)), chunk); err == nil || !strings.Contains(err.Error(), "filter 35") {
		t.Errorf("filter 35: %v", err)
	}
}

// Format version 1 (written by early c-blosc releases; numcodecs no longer can) has the
// same layout as version 2 without bitshuffle: a version-2 chunk relabelled as
// version 1 must decode the same.
func TestFormatVersion1(t *testing.T) {
	tried := 0
	for _, c := range loadFixtures(t, "blosc1.json.gz") {
		if c.Name != "lz4-s1-ts4" && c.Name != "blosclz-s0-ts2" && c.Name != "zlib-c5-ts2-auto" {
			continue
		}
		tried++
		src := append([]byte(nil), c.src...)
		src[0] = 1
		got := make([]byte, len(c.want))
		if n, err := Decompress(got, src); err != nil || n != len(c.want) || !bytes.Equal(got, c.want) {
			t.Errorf("%s as version 1: %d, %v", c.Name, n, err)
		}
	}
	if tried != 3 {
		t.Fatalf("found %d of the 3 fixtures", tried)
	}
}
