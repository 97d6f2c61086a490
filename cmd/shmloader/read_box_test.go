package main

import (
	"errors"
	"reflect"
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
