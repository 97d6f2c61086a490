package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

// TestGeneratedFilesAreCurrent fails when a committed generated file differs from what the
// generator writes from package ring now.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	p := collect()
	for _, f := range []struct {
		path string
		want []byte
	}{
		{"../../../pybind/gobatch_protocol.h", renderC(p)},
		{"../../../python/gobatch/_protocol.py", renderPython(p)},
	} {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatalf("%v (run go generate ./ring)", err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is not what ring/internal/protogen writes from package ring now: run go generate ./ring",
				strings.TrimPrefix(f.path, "../../../"))
		}
	}
}

// TestCharacterClasses checks the sets probed from the Go rules against the rules' own words
// (ring.TensorNameRule, shm.ValidateName's doc): a regular expression built from the class
// accepts exactly what the Go function accepts.
func TestCharacterClasses(t *testing.T) {
	p := collect()
	if got := class(p.tensorNameChars); got != "0-9A-Z_a-z" {
		t.Errorf("tensor name class %q, want 0-9A-Z_a-z ([A-Za-z0-9_], ring.TensorNameRule %q)", got, ring.TensorNameRule)
	}
	if got := class(p.segmentNameChars); got != `\-.0-9A-Z_a-z` {
		t.Errorf("segment name class %q, want [A-Za-z0-9._-]", got)
	}
	tensor := regexp.MustCompile("^[" + class(p.tensorNameChars) + "]$")
	segment := regexp.MustCompile("^a[" + class(p.segmentNameChars) + "]$")
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if tensor.MatchString(s) != (ring.ValidateTensorName(s) == nil) {
			t.Errorf("byte %#x: the tensor name class and ring.ValidateTensorName disagree", c)
		}
		if segment.MatchString("a"+s) != (shm.ValidateName("a"+s) == nil) {
			t.Errorf("byte %#x: the segment name class and shm.ValidateName disagree", c)
		}
	}
	if class([]byteRange{{'a', 'a'}, {'x', 'y'}, {']', ']'}}) != `axy\]` {
		t.Error("class does not write single bytes, pairs and escapes")
	}
}

// TestRenderRefusesUnknownShapes: a protocol change the generator cannot express stops it
// instead of writing a wrong file.
func TestRenderRefusesUnknownShapes(t *testing.T) {
	for name, f := range map[string]func(){
		"field type": func() { pyFormat("i8") },
		"region":     func() { prefixOf(ring.Region{Name: "extra"}) },
		"enum order": func() {
			enumNames(ring.ConstGroup{Enum: true, Consts: []ring.Const{{Name: "A", Value: 1}}})
		},
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
