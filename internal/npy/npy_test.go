package npy

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestNpyHeader(t *testing.T) {
	for _, c := range []struct {
		descr string
		shape []int
		dict  string
	}{
		{"<i2", []int{3, 4}, "{'descr': '<i2', 'fortran_order': False, 'shape': (3, 4), }"},
		{"|b1", []int{7}, "{'descr': '|b1', 'fortran_order': False, 'shape': (7,), }"},
		{"<M8[ns]", nil, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (), }"},
	} {
		h, err := Header(c.descr, c.shape)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(h, []byte("\x93NUMPY\x01\x00")) || len(h)%64 != 0 || h[len(h)-1] != '\n' {
			t.Fatalf("%q: bad preamble %q", c.descr, h)
		}
		if n := int(binary.LittleEndian.Uint16(h[8:10])); n != len(h)-10 {
			t.Fatalf("%q: header length %d, want %d", c.descr, n, len(h)-10)
		}
		if got := strings.TrimRight(string(h[10:]), " \n"); got != c.dict {
			t.Fatalf("dict %q, want %q", got, c.dict)
		}
	}
	if _, err := Header("<i2'", []int{1}); err == nil {
		t.Fatal("a quote in descr was accepted")
	}
}
