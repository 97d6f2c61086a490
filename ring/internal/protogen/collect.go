package main

import (
	"strings"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// protocol is everything the generated files hold.
type protocol struct {
	ring.ProtocolSpec
	tensorNameChars  []byteRange // bytes ring.ValidateTensorName accepts
	segmentNameChars []byteRange // bytes shm.ValidateName accepts
	segmentPrefix    string
	segmentNameMax   int
	shmDir           string // where named segments live by default
}

// byteRange is the bytes lo..hi, inclusive.
type byteRange struct{ lo, hi byte }

func collect() protocol {
	return protocol{
		ProtocolSpec:     ring.Spec(),
		tensorNameChars:  accepted(func(c byte) bool { return ring.ValidateTensorName(string([]byte{c})) == nil }),
		segmentNameChars: accepted(func(c byte) bool { return shm.ValidateName("a"+string([]byte{c})) == nil }),
		segmentPrefix:    shm.Prefix,
		segmentNameMax:   shm.MaxNameLen,
		shmDir:           shm.Dir,
	}
}

// accepted asks the Go rule about every byte and returns the accepted ones as ranges: the
// character sets are derived from the one implementation, not written down again.
func accepted(ok func(c byte) bool) []byteRange {
	var out []byteRange
	for c := 0; c < 256; c++ {
		if !ok(byte(c)) {
			continue
		}
		if n := len(out); n > 0 && int(out[n-1].hi) == c-1 {
			out[n-1].hi = byte(c)
		} else {
			out = append(out, byteRange{byte(c), byte(c)})
		}
	}
	return out
}

// class writes ranges as the body of a regular-expression character class ("0-9A-Z_a-z").
func class(rs []byteRange) string {
	esc := func(c byte) string {
		if strings.IndexByte(`\]^-[`, c) >= 0 {
			return `\` + string(c)
		}
		return string(c)
	}
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(esc(r.lo))
		if r.hi > r.lo+1 {
			b.WriteString("-")
		}
		if r.hi != r.lo {
			b.WriteString(esc(r.hi))
		}
	}
	return b.String()
}
