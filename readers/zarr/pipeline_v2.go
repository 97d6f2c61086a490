package zarr

import (
	"fmt"
	"strings"
)

// buildV2Pipeline builds the pipeline of a v2 array.
func buildV2Pipeline(m *arrayMeta) (*pipeline, error) {
	p := &pipeline{dtype: m.dtype, shape: m.chunks, fill: m.fill, big: m.dtype.BigEndian && m.dtype.swapUnit() > 0}
	p.nelem = prod(m.chunks)
	// The codecs are the filters then the compressor. Bytes-to-bytes codecs
	// (compressors, checksums) at the end of the list decode first.
	nb := len(m.codecs)
	for nb > 0 {
		if _, ok := newBytesCodec(m.codecs[nb-1].Name, m.codecs[nb-1].Config); !ok || strings.HasPrefix(m.codecs[nb-1].Name, "numcodecs.") {
			break
		}
		nb--
	}
	for _, c := range m.codecs[nb:] {
		bc, _ := newBytesCodec(c.Name, c.Config)
		p.b2b = append(p.b2b, bc)
	}
	for _, c := range m.codecs[:nb] {
		if _, ok := newBytesCodec(c.Name, c.Config); ok {
			return nil, fmt.Errorf("filter %s before an array filter: %w", c.Name, ErrUnsupported)
		}
		if c.Name == "vlen-utf8" || c.Name == "vlen-bytes" {
			if (c.Name == "vlen-utf8") != (m.dtype.Kind == KindString) || !m.dtype.variable() {
				return nil, fmt.Errorf("filter %s on dtype %s", c.Name, m.dtype)
			}
			if p.ser == serVlen || len(p.filters) > 0 {
				return nil, fmt.Errorf("filter %s must be the only filter: %w", c.Name, ErrUnsupported)
			}
			p.ser = serVlen
			continue
		}
		if m.dtype.variable() {
			return nil, fmt.Errorf("unsupported filter %s on an object array: %w", c.Name, ErrUnsupported)
		}
		f, err := newFlatFilter(c, m.dtype)
		if err != nil {
			return nil, err
		}
		p.filters = append(p.filters, f)
	}
	if m.dtype.variable() && p.ser != serVlen {
		return nil, fmt.Errorf("object dtype without a vlen-utf8 or vlen-bytes filter: %w", ErrUnsupported)
	}
	want, err := p.chainFilters("filter")
	if err != nil {
		return nil, err
	}
	p.encSize = p.nelem * want
	if p.ser == serVlen {
		p.encSize = -1
	}
	p.setWants()
	if m.order == 'F' && len(m.chunks) > 1 && p.ser == serBytes {
		p.strides = make([]int, len(m.chunks))
		s := 1
		for d := range m.chunks {
			p.strides[d] = s
			s *= m.chunks[d]
		}
	}
	return p, nil
}
