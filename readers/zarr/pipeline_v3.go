package zarr

import (
	"encoding/json"
	"fmt"
)

// A v3 codec list reads, in encode order: array->array codecs (transposes, or
// numcodecs' flat filters), exactly one array->bytes codec (the serializer: bytes,
// vlen-utf8/vlen-bytes or sharding_indexed), then bytes->bytes codecs (compressors,
// checksums). buildV3Pipeline takes the three parts in that order.

// buildV3Pipeline builds the pipeline for codecs decoding chunks of shape and dtype.
func buildV3Pipeline(codecs []CodecInfo, shape []int, dtype DType, fill []byte) (*pipeline, error) {
	p := &pipeline{dtype: dtype, shape: shape, nelem: prod(shape), fill: fill, encSize: -1}
	i, order, err := p.addArrayCodecs(codecs)
	if err != nil {
		return nil, err
	}
	if i == len(codecs) {
		return nil, fmt.Errorf("codecs: no array->bytes codec")
	}
	if err := p.setSerializer(codecs[i], order); err != nil {
		return nil, err
	}
	if err := p.addBytesCodecs(codecs[i+1:]); err != nil {
		return nil, err
	}
	p.setWants()
	if err := p.setTranspose(order); err != nil {
		return nil, err
	}
	return p, nil
}

// addArrayCodecs takes the leading array->array codecs: numcodecs' flat filters go to
// p.filters, transposes compose into order (nil: none). It returns the index of the
// first other codec.
func (p *pipeline) addArrayCodecs(codecs []CodecInfo) (int, []int, error) {
	var order []int // composite transpose
	i := 0
	for ; i < len(codecs); i++ {
		c := codecs[i]
		if isV3FlatFilter(c.Name) {
			// numcodecs' array->array codecs (numcodecs.zarr3) work on the chunk
			// flattened in C order, as the v2 filters do.
			if order != nil {
				return 0, nil, fmt.Errorf("codec %s after transpose: %w", c.Name, ErrUnsupported)
			}
			if err := p.addV3FlatFilter(c); err != nil {
				return 0, nil, err
			}
			continue
		}
		if c.Name != "transpose" {
			break
		}
		if len(p.filters) > 0 {
			return 0, nil, fmt.Errorf("codec transpose after %s: %w", p.filters[len(p.filters)-1].name(), ErrUnsupported)
		}
		o, err := transposeOrder(c.Config, len(p.shape))
		if err != nil {
			return 0, nil, fmt.Errorf("codec transpose: %w", err)
		}
		order = composeOrder(order, o)
	}
	return i, order, nil
}

// addV3FlatFilter appends a numcodecs array->array codec; it works in little-endian
// element types only.
func (p *pipeline) addV3FlatFilter(c CodecInfo) error {
	if len(c.Config) == 0 || isJSONNull(c.Config) {
		c.Config = json.RawMessage("{}")
	}
	f, err := newFlatFilter(c, p.dtype)
	if err != nil {
		return err
	}
	dec, enc := flatFilterTypes(f)
	for _, d := range []DType{dec, enc} {
		if d.BigEndian && d.swapUnit() > 0 {
			return fmt.Errorf("codec %s: big-endian dtype %s: %w", c.Name, d, ErrUnsupported)
		}
	}
	p.filters = append(p.filters, f)
	return nil
}

// composeOrder is the transpose by order followed by the transpose by o.
func composeOrder(order, o []int) []int {
	if order == nil {
		return o
	}
	comp := make([]int, len(o))
	for k := range o {
		comp[k] = order[o[k]]
	}
	return comp
}

// storedType is the element type the serializer c stores: the array's, or the one the
// last flat filter encodes to (which only bytes can serialize), after checking that
// the filters' element sizes chain.
func (p *pipeline) storedType(c CodecInfo) (DType, error) {
	if len(p.filters) == 0 {
		return p.dtype, nil
	}
	if c.Name != "bytes" && c.Name != "endian" {
		return DType{}, fmt.Errorf("codec %s after numcodecs array filters: %w", c.Name, ErrUnsupported)
	}
	if _, err := p.chainFilters("codec"); err != nil {
		return DType{}, err
	}
	_, stored := flatFilterTypes(p.filters[len(p.filters)-1])
	return stored, nil
}

// setSerializer installs the array->bytes codec c; order is the transpose before it
// (a shard's chunks are transposed as a whole).
func (p *pipeline) setSerializer(c CodecInfo, order []int) error {
	stored, err := p.storedType(c)
	if err != nil {
		return err
	}
	dtype := p.dtype
	switch c.Name {
	case "bytes", "endian":
		return p.setBytesSerializer(c, stored)
	case "vlen-utf8", "vlen-bytes":
		if (c.Name == "vlen-utf8") != (dtype.Kind == KindString) || !dtype.variable() {
			return fmt.Errorf("codec %s on data_type %s", c.Name, dtype)
		}
		p.ser = serVlen
	case "sharding_indexed":
		if dtype.variable() {
			return fmt.Errorf("sharding of variable-length strings: %w", ErrUnsupported)
		}
		sh, err := newShardCodec(c, permuteShape(p.shape, order), dtype, p.fill)
		if err != nil {
			return fmt.Errorf("codec sharding_indexed: %w", err)
		}
		p.ser, p.shard = serShard, sh
	default:
		if _, ok := newBytesCodec(c.Name, c.Config); ok {
			return fmt.Errorf("codec %s is bytes->bytes, but an array->bytes codec must come first", c.Name)
		}
		return fmt.Errorf("unsupported codec %s: %w", c.Name, ErrUnsupported)
	}
	return nil
}

// setBytesSerializer installs the bytes codec: fixed-size elements of type stored, in
// the byte order its endian names (required for multi-byte types).
func (p *pipeline) setBytesSerializer(c CodecInfo, stored DType) error {
	var cfg struct {
		Endian *string `json:"endian"`
	}
	if len(c.Config) > 0 {
		if err := json.Unmarshal(c.Config, &cfg); err != nil {
			return fmt.Errorf("codec bytes: %w", err)
		}
	}
	if cfg.Endian != nil {
		switch *cfg.Endian {
		case "little":
		case "big":
			if len(p.filters) == 0 {
				p.big = p.dtype.swapUnit() > 0
			} else if stored.swapUnit() > 0 {
				return fmt.Errorf("codec bytes: big endian after numcodecs array filters: %w", ErrUnsupported)
			}
		default:
			return fmt.Errorf("codec bytes: bad endian %q", *cfg.Endian)
		}
	} else if stored.Size > 1 && stored.swapUnit() > 0 {
		return fmt.Errorf("codec bytes: endian is required for %s", stored)
	}
	if p.dtype.variable() {
		return fmt.Errorf("codec bytes cannot encode %s", p.dtype)
	}
	p.encSize = p.nelem * stored.Size
	return nil
}

// addBytesCodecs appends the bytes->bytes codecs that follow the serializer.
func (p *pipeline) addBytesCodecs(codecs []CodecInfo) error {
	for _, c := range codecs {
		bc, ok := newBytesCodec(c.Name, c.Config)
		if !ok {
			return fmt.Errorf("unsupported codec %s (after the array->bytes codec): %w", c.Name, ErrUnsupported)
		}
		p.b2b = append(p.b2b, bc)
	}
	return nil
}

// setTranspose makes decode read the stored layout of a transpose by order.
func (p *pipeline) setTranspose(order []int) error {
	if order == nil || isIdentity(order) {
		return nil
	}
	if p.ser == serVlen {
		return fmt.Errorf("transpose of variable-length strings: %w", ErrUnsupported)
	}
	// Stored array B has shape B[k] = A[order[k]] in C order; decoded dim order[k]
	// has B's stride k.
	bshape := permuteShape(p.shape, order)
	bstr := cStrides(bshape)
	p.strides = make([]int, len(p.shape))
	for k, d := range order {
		p.strides[d] = bstr[k]
	}
	return nil
}

// isV3FlatFilter reports whether name is one of numcodecs' array->array codecs in
// their zarr v3 form, which decode like the v2 filters of the same id.
func isV3FlatFilter(name string) bool {
	switch name {
	case "numcodecs.delta", "numcodecs.fixedscaleoffset", "numcodecs.quantize", "numcodecs.bitround", "numcodecs.astype":
		return true
	}
	return false
}

// flatFilterTypes returns the element types a filter decodes to and from.
func flatFilterTypes(f flatFilter) (dec, enc DType) {
	switch f := f.(type) {
	case deltaFilter:
		return f.dtype, f.astype
	case fsoFilter:
		return f.dtype, f.astype
	case castFilter:
		return f.dtype, f.astype
	}
	panic(fmt.Sprintf("zarr: flatFilterTypes: filter %s", f.name()))
}

func transposeOrder(cfg json.RawMessage, ndim int) ([]int, error) {
	var c struct {
		Order json.RawMessage `json:"order"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, err
	}
	var s string
	if json.Unmarshal(c.Order, &s) == nil {
		o := make([]int, ndim)
		for k := range o {
			switch s {
			case "C":
				o[k] = k
			case "F":
				o[k] = ndim - 1 - k
			default:
				return nil, fmt.Errorf("bad order %q", s)
			}
		}
		return o, nil
	}
	var o []int
	if err := json.Unmarshal(c.Order, &o); err != nil {
		return nil, fmt.Errorf("bad order %s", string(c.Order))
	}
	if len(o) != ndim {
		return nil, fmt.Errorf("order %v for %d dimensions", o, ndim)
	}
	seen := make([]bool, ndim)
	for _, v := range o {
		if v < 0 || v >= ndim || seen[v] {
			return nil, fmt.Errorf("order %v is not a permutation", o)
		}
		seen[v] = true
	}
	return o, nil
}

func permuteShape(shape, order []int) []int {
	if order == nil {
		return shape
	}
	out := make([]int, len(shape))
	for k, d := range order {
		out[k] = shape[d]
	}
	return out
}

func isIdentity(o []int) bool {
	for k, v := range o {
		if k != v {
			return false
		}
	}
	return true
}
