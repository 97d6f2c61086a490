package config

import (
	"math"
	"time"
)

// Synthetic is a kind = "synthetic" source: every element of stream example e equals
// e mod 2^24, cast to DType (docs/ARCHITECTURE.md).
type Synthetic struct {
	Shape []int         // one example's shape; may be empty (one scalar per example)
	DType DType         // one of SyntheticDTypes
	Delay time.Duration // sleep per batch (delay_ms), emulating a slow reader
}

// SyntheticDTypes are the element types a synthetic source can produce.
var SyntheticDTypes = []DType{Float32, Float64, Int32, Int64, Uint8}

// MaxDelayMS bounds delay_ms (one hour).
const MaxDelayMS = 3_600_000

// Example implements Spec.
func (s *Synthetic) Example() ([]int, DType) { return s.Shape, s.DType }

func init() { RegisterKind("synthetic", decodeSynthetic) }

func decodeSynthetic(t *Table) Spec {
	s := &Synthetic{}
	ok := true
	if dims, good := t.MustInts("shape", 1, math.MaxInt32, MaxExampleD); good {
		s.Shape = make([]int, len(dims))
		for i, d := range dims {
			s.Shape[i] = int(d)
		}
	} else {
		ok = false
	}
	if name, good := t.MustString("dtype"); good {
		if d, known := ParseDType(name, SyntheticDTypes); known {
			s.DType = d
		} else {
			t.Errorf("dtype", "unknown dtype %q; expected one of %s", name, dtypeList(SyntheticDTypes))
			ok = false
		}
	} else {
		ok = false
	}
	s.Delay = time.Duration(t.Int("delay_ms", 0, 0, MaxDelayMS)) * time.Millisecond
	if !ok {
		return nil
	}
	return s
}
