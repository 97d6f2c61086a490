package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseBox(t *testing.T) {
	shape := []int{20, 30, 40}
	good := []struct {
		box         string
		start, stop []int
	}{
		{"", []int{0, 0, 0}, []int{20, 30, 40}},
		{"0:10,:,5:7", []int{0, 0, 5}, []int{10, 30, 7}},
		{":5, 10: ,:", []int{0, 10, 0}, []int{5, 30, 40}},
		{"3,4:4,39", []int{3, 4, 39}, []int{4, 4, 40}},
		{"20:,30:30,:40", []int{20, 30, 0}, []int{20, 30, 40}},
	}
	for _, c := range good {
		start, stop, err := parseBox(c.box, shape)
		if err != nil {
			t.Errorf("parseBox(%q): %v", c.box, err)
			continue
		}
		if !reflect.DeepEqual(start, c.start) || !reflect.DeepEqual(stop, c.stop) {
			t.Errorf("parseBox(%q) = %v %v, want %v %v", c.box, start, stop, c.start, c.stop)
		}
	}
	for _, box := range []string{"0:5", "1:2:3,:,:", "a:b,:,:", "-1:2,:,:", "0:21,:,:", "9:3,:,:", ",,", "20,:,:"} {
		if _, _, err := parseBox(box, shape); !errors.Is(err, errBox) {
			t.Errorf("parseBox(%q) = %v, want an errBox error", box, err)
		}
	}
}

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
		h, err := npyHeader(c.descr, c.shape)
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
	if _, err := npyHeader("<i2'", []int{1}); err == nil {
		t.Fatal("a quote in descr was accepted")
	}
}
