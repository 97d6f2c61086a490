package blosc

import (
	"bytes"
	"testing"
)

// Seeds are every fixture chunk (valid and refused ones); regression inputs
// found by fuzzing live in testdata/fuzz/<FuzzName>/.

func addSeeds(f *testing.F) {
	for _, file := range []string{"blosc1.json.gz", "blosc2.json.gz"} {
		for _, c := range loadFixtures(f, file) {
			if len(c.src) <= 8<<10 { // small seeds keep minimisation fast
				f.Add(c.src)
			}
		}
	}
}

// fuzzDst bounds what a fuzz input may ask for, so that inputs claiming huge
// sizes are refused by the destination check instead of exhausting memory.
const fuzzDst = 4 << 20

func FuzzDecompress(f *testing.F) {
	addSeeds(f)
	dst := make([]byte, fuzzDst)
	var d Decoder
	f.Fuzz(func(t *testing.T, src []byte) {
		size, serr := DecompressedSize(src)
		n, err := d.Decompress(dst, src)
		checkFuzzResult(t, src, size, serr, n, err, dst)
		// The pooled entry point must agree with the Decoder.
		n2, err2 := Decompress(dst, src)
		if (err == nil) != (err2 == nil) || n2 != n {
			t.Fatalf("Decoder and package function disagree: (%d, %v) vs (%d, %v)", n, err, n2, err2)
		}
	})
}

func FuzzDecompress2(f *testing.F) {
	addSeeds(f)
	dst := make([]byte, fuzzDst)
	var d Decoder
	f.Fuzz(func(t *testing.T, src []byte) {
		size, serr := Decompressed2Size(src)
		n, err := d.Decompress2(dst, src)
		checkFuzzResult(t, src, size, serr, n, err, dst)
	})
}

func checkFuzzResult(t *testing.T, src []byte, size int, serr error, n int, err error, dst []byte) {
	if err != nil {
		if n != 0 {
			t.Fatalf("error %v with %d bytes reported", err, n)
		}
		return
	}
	if serr != nil {
		t.Fatalf("decoded %d bytes but the size check failed: %v", n, serr)
	}
	if n != size || n > len(dst) {
		t.Fatalf("decoded %d bytes, header size %d", n, size)
	}
	// Decoding is deterministic: a second decode into a dirty buffer agrees,
	// except for uninitialised special chunks, which are zero-filled anyway.
	again := bytes.Repeat([]byte{0x5A}, n)
	var d Decoder
	if m, err := d.Decompress2(again, src); err == nil && (m != n || !bytes.Equal(again, dst[:n])) {
		t.Fatalf("second decode differs")
	}
}

// FuzzUnshuffle checks unshuffle (the SSE2 kernels on amd64, with their Go tails)
// against the plain one-byte-at-a-time loop, for every typesize and length.
func FuzzUnshuffle(f *testing.F) {
	for _, ts := range []byte{2, 8, 4, 3} {
		for _, n := range []int{0, 1, 15, 16, 17, 33 * int(ts), 1000, 4099} {
			f.Add(ts, bytes.Repeat([]byte{1, 2, 3, 5, 8, 13, 21}, n/7+1)[:n])
		}
	}
	f.Fuzz(func(t *testing.T, tsb byte, src []byte) {
		ts := int(tsb%16) + 1
		got := make([]byte, len(src)+1)
		got[len(src)] = 0xA5 // sentinel: nothing past the block is written
		unshuffle(got[:len(src)], src, ts)
		want := make([]byte, len(src))
		n := len(src) / ts
		if ts == 1 || n == 0 {
			copy(want, src)
		} else {
			unshuffleGeneric(want, src, n, ts)
			copy(want[n*ts:], src[n*ts:])
		}
		if !bytes.Equal(got[:len(src)], want) || got[len(src)] != 0xA5 {
			t.Fatalf("typesize %d, %d bytes: unshuffle differs from the reference", ts, len(src))
		}
	})
}
