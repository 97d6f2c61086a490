package zarr

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// MaxDims is the largest number of dimensions an array may have.
const MaxDims = 32

// CodecInfo describes one codec of an array as its metadata spells it: the v3 codec
// name or the v2 numcodecs id, and its configuration as JSON.
type CodecInfo struct {
	Name   string
	Config json.RawMessage
	// Inner holds the nested codecs of sharding_indexed (chunk codecs, then index codecs
	// under IndexCodecs).
	Inner       []CodecInfo
	IndexCodecs []CodecInfo
}

// Settings is the codec's configuration object without a v2 "id" (which is the name): {} when
// it has none.
func (c CodecInfo) Settings() json.RawMessage {
	if len(c.Config) == 0 {
		return json.RawMessage("{}")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c.Config, &m); err != nil {
		return c.Config
	}
	if _, ok := m["id"]; !ok {
		return c.Config
	}
	delete(m, "id")
	b, err := json.Marshal(m)
	if err != nil {
		return c.Config
	}
	return b
}

func (c CodecInfo) String() string {
	if len(c.Config) == 0 {
		return c.Name
	}
	return c.Name + string(compactJSON(c.Config))
}

func compactJSON(b []byte) []byte {
	var out strings.Builder
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out.WriteByte(c)
			if c == '\\' && i+1 < len(b) {
				i++
				out.WriteByte(b[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\n', '\t', '\r':
			continue
		case '"':
			inStr = true
		}
		out.WriteByte(c)
	}
	return []byte(out.String())
}

// keyEncoding builds chunk keys.
type keyEncoding struct {
	prefix string // "c" for the v3 default encoding, "" otherwise
	sep    byte
	// probeSlash: a v2 array without dimension_separator; older "nested" stores use
	// "/" there, so a missing "." key is retried with "/".
	probeSlash bool
}

// arrayMeta is the format-independent metadata of one array.
type arrayMeta struct {
	format   int
	shape    []int
	chunks   []int // the chunk grid (shards, for a sharded v3 array)
	dtype    DType
	fillRaw  json.RawMessage
	fill     []byte // one element, host order
	fillStr  string // KindString fill
	fillNull bool
	order    byte // 'C' or 'F' (v2)
	keys     keyEncoding
	codecs   []CodecInfo // v3 codecs, or v2 filters then compressor
	attrs    map[string]json.RawMessage
	dimNames []string
}

type zarrayJSON struct {
	ZarrFormat         int             `json:"zarr_format"`
	Shape              []int64         `json:"shape"`
	Chunks             []int64         `json:"chunks"`
	Dtype              json.RawMessage `json:"dtype"`
	Compressor         json.RawMessage `json:"compressor"`
	FillValue          json.RawMessage `json:"fill_value"`
	Order              string          `json:"order"`
	Filters            json.RawMessage `json:"filters"`
	DimensionSeparator *string         `json:"dimension_separator"`
}

// checkShape validates shape and chunk shape and returns them as ints.
func checkShape(shape, chunks []int64) ([]int, []int, error) {
	if len(shape) != len(chunks) {
		return nil, nil, fmt.Errorf("shape has %d dimensions but chunks has %d", len(shape), len(chunks))
	}
	if len(shape) > MaxDims {
		return nil, nil, fmt.Errorf("%d dimensions: %w (at most %d)", len(shape), ErrUnsupported, MaxDims)
	}
	s := make([]int, len(shape))
	c := make([]int, len(shape))
	chunkElems := int64(1)
	for i := range shape {
		if shape[i] < 0 || shape[i] > math.MaxInt32*int64(1<<20) {
			return nil, nil, fmt.Errorf("bad shape %v", shape)
		}
		if chunks[i] <= 0 || chunks[i] > math.MaxInt32 {
			return nil, nil, fmt.Errorf("bad chunk shape %v", chunks)
		}
		chunkElems *= chunks[i]
		if chunkElems > 1<<40 {
			return nil, nil, fmt.Errorf("chunk shape %v is too large", chunks)
		}
		s[i], c[i] = int(shape[i]), int(chunks[i])
	}
	return s, c, nil
}

// parseZarray parses a v2 .zarray document. attrs is the .zattrs document (nil if
// absent).
func parseZarray(doc, attrs []byte) (*arrayMeta, error) {
	var z zarrayJSON
	if err := decodeJSON(doc, &z); err != nil {
		return nil, fmt.Errorf("malformed .zarray: %w", err)
	}
	m, err := v2ArrayMeta(&z)
	if err != nil {
		return nil, fmt.Errorf(".zarray: %w", err)
	}
	if m.attrs, err = parseAttrs(attrs); err != nil {
		return nil, fmt.Errorf(".zattrs: %w", err)
	}
	if m.dimNames, err = attrDims(m.attrs, len(m.shape)); err != nil {
		return nil, fmt.Errorf(".zattrs: %w", err)
	}
	return m, nil
}

// v2ArrayMeta converts a parsed .zarray document, field by field in the order their
// errors are reported.
func v2ArrayMeta(z *zarrayJSON) (*arrayMeta, error) {
	if z.ZarrFormat != 2 {
		return nil, fmt.Errorf("zarr_format %d, want 2", z.ZarrFormat)
	}
	if z.Shape == nil || z.Chunks == nil {
		return nil, fmt.Errorf("missing shape or chunks")
	}
	m := &arrayMeta{format: 2}
	var err error
	if m.shape, m.chunks, err = checkShape(z.Shape, z.Chunks); err != nil {
		return nil, err
	}
	if len(z.Dtype) == 0 {
		return nil, fmt.Errorf("missing dtype")
	}
	if m.dtype, err = parseV2DType(z.Dtype); err != nil {
		return nil, err
	}
	if m.order, err = v2Order(z.Order); err != nil {
		return nil, err
	}
	if m.keys, err = v2KeyEncoding(z.DimensionSeparator); err != nil {
		return nil, err
	}
	if m.codecs, err = v2Codecs(z); err != nil {
		return nil, err
	}
	if m.dtype.Kind == KindString && hasCodec(m.codecs, "vlen-bytes") {
		m.dtype.Kind = KindVarBytes // object array of bytes
	}
	m.fillRaw = z.FillValue
	if m.fill, m.fillStr, m.fillNull, err = parseFill(z.FillValue, m.dtype); err != nil {
		return nil, err
	}
	return m, nil
}

// v2Order reads order: C (the default when absent) or F.
func v2Order(s string) (byte, error) {
	switch s {
	case "C", "":
		return 'C', nil
	case "F":
		return 'F', nil
	}
	return 0, fmt.Errorf("bad order %q", s)
}

// v2KeyEncoding reads dimension_separator. Without one the keys are 0.1, but older
// "nested" stores used 0/1 there, so the reader probes "/" too.
func v2KeyEncoding(sep *string) (keyEncoding, error) {
	k := keyEncoding{sep: '.'}
	if sep == nil {
		k.probeSlash = true
		return k, nil
	}
	b, ok := keySeparator(*sep)
	if !ok {
		return keyEncoding{}, fmt.Errorf("bad dimension_separator %q", *sep)
	}
	k.sep = b
	return k, nil
}

// v2Codecs reads the filters and then the compressor, the order in which they are
// listed in arrayMeta.codecs.
func v2Codecs(z *zarrayJSON) ([]CodecInfo, error) {
	var codecs []CodecInfo
	if !isJSONNull(z.Filters) {
		var fs []json.RawMessage
		if err := json.Unmarshal(z.Filters, &fs); err != nil {
			return nil, fmt.Errorf("filters: %w", err)
		}
		for _, f := range fs {
			c, err := parseV2Codec(f)
			if err != nil {
				return nil, fmt.Errorf("filters: %w", err)
			}
			codecs = append(codecs, c)
		}
	}
	if !isJSONNull(z.Compressor) {
		c, err := parseV2Codec(z.Compressor)
		if err != nil {
			return nil, fmt.Errorf("compressor: %w", err)
		}
		codecs = append(codecs, c)
	}
	return codecs, nil
}

// hasCodec reports whether a codec of that name is in the list.
func hasCodec(codecs []CodecInfo, name string) bool {
	for _, c := range codecs {
		if c.Name == name {
			return true
		}
	}
	return false
}

func parseV2Codec(raw json.RawMessage) (CodecInfo, error) {
	var c struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.ID == nil {
		return CodecInfo{}, fmt.Errorf("codec config without an id: %.80s", string(raw))
	}
	return CodecInfo{Name: *c.ID, Config: raw}, nil
}

func parseAttrs(doc []byte) (map[string]json.RawMessage, error) {
	attrs := map[string]json.RawMessage{}
	if len(doc) == 0 {
		return attrs, nil
	}
	if err := decodeJSON(doc, &attrs); err != nil {
		return nil, fmt.Errorf("malformed attributes: %w", err)
	}
	if attrs == nil {
		attrs = map[string]json.RawMessage{}
	}
	return attrs, nil
}

// attrDims reads xarray's _ARRAY_DIMENSIONS attribute.
func attrDims(attrs map[string]json.RawMessage, ndim int) ([]string, error) {
	raw, ok := attrs["_ARRAY_DIMENSIONS"]
	if !ok {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		return nil, fmt.Errorf("_ARRAY_DIMENSIONS: %w", err)
	}
	if len(names) != ndim {
		return nil, fmt.Errorf("_ARRAY_DIMENSIONS has %d names for %d dimensions", len(names), ndim)
	}
	return names, nil
}

// v3 metadata.

var v3ArrayKeys = map[string]bool{"zarr_format": true, "node_type": true, "shape": true, "data_type": true,
	"chunk_grid": true, "chunk_key_encoding": true, "fill_value": true, "codecs": true, "attributes": true,
	"dimension_names": true, "storage_transformers": true}

var v3GroupKeys = map[string]bool{"zarr_format": true, "node_type": true, "attributes": true, "consolidated_metadata": true}

type zarrJSON struct {
	ZarrFormat           int                        `json:"zarr_format"`
	NodeType             string                     `json:"node_type"`
	Shape                []int64                    `json:"shape"`
	DataType             json.RawMessage            `json:"data_type"`
	ChunkGrid            json.RawMessage            `json:"chunk_grid"`
	ChunkKeyEncoding     json.RawMessage            `json:"chunk_key_encoding"`
	FillValue            json.RawMessage            `json:"fill_value"`
	Codecs               []json.RawMessage          `json:"codecs"`
	Attributes           map[string]json.RawMessage `json:"attributes"`
	DimensionNames       []*string                  `json:"dimension_names"`
	StorageTransformers  []json.RawMessage          `json:"storage_transformers"`
	ConsolidatedMetadata json.RawMessage            `json:"consolidated_metadata"`
}

// parseZarrJSON parses a v3 zarr.json document and checks for fields it must
// understand. It returns the node type ("array" or "group").
func parseZarrJSON(doc []byte) (*zarrJSON, error) {
	var z zarrJSON
	if err := decodeJSON(doc, &z); err != nil {
		return nil, fmt.Errorf("malformed zarr.json: %w", err)
	}
	if z.ZarrFormat != 3 {
		return nil, fmt.Errorf("zarr.json: zarr_format %d, want 3", z.ZarrFormat)
	}
	var all map[string]json.RawMessage
	if err := decodeJSON(doc, &all); err != nil {
		return nil, fmt.Errorf("malformed zarr.json: %w", err)
	}
	known := v3ArrayKeys
	switch z.NodeType {
	case "array":
	case "group":
		known = v3GroupKeys
	default:
		return nil, fmt.Errorf("zarr.json: bad node_type %q", z.NodeType)
	}
	for k, v := range all {
		if !known[k] && mustUnderstand(v) {
			return nil, fmt.Errorf("zarr.json: field %q: %w extension", k, ErrUnsupported)
		}
	}
	if z.Attributes == nil {
		z.Attributes = map[string]json.RawMessage{}
	}
	return &z, nil
}

// v3ArrayMeta converts a parsed v3 array document. The steps run in the order the
// fields' errors are reported: shape and chunk grid, data type, chunk keys, codecs,
// fill value, dimension names.
func v3ArrayMeta(z *zarrJSON) (*arrayMeta, error) {
	m := &arrayMeta{format: 3, order: 'C', attrs: z.Attributes}
	if z.Shape == nil {
		return nil, fmt.Errorf("zarr.json: missing shape")
	}
	chunks, err := v3ChunkShape(z.ChunkGrid)
	if err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	if m.shape, m.chunks, err = checkShape(z.Shape, chunks); err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	if len(z.DataType) == 0 {
		return nil, fmt.Errorf("zarr.json: missing data_type")
	}
	if m.dtype, err = parseV3DType(z.DataType); err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	if m.keys, err = v3KeyEncoding(z.ChunkKeyEncoding); err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	if m.codecs, err = v3Codecs(z); err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	m.fillRaw = z.FillValue
	if m.fill, m.fillStr, m.fillNull, err = parseFill(z.FillValue, m.dtype); err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	if m.dimNames, err = v3DimNames(z, len(m.shape)); err != nil {
		return nil, fmt.Errorf("zarr.json: %w", err)
	}
	return m, nil
}

// v3ChunkShape reads chunk_grid. Only the regular grid is implemented: every chunk
// (or shard) has chunk_shape, the last ones along each dimension overhanging.
func v3ChunkShape(raw json.RawMessage) ([]int64, error) {
	gname, gcfg, err := parseNamed(raw)
	if err != nil {
		return nil, fmt.Errorf("chunk_grid: %w", err)
	}
	if gname != "regular" {
		return nil, fmt.Errorf("chunk_grid %q: %w", gname, ErrUnsupported)
	}
	var g struct {
		ChunkShape []int64 `json:"chunk_shape"`
	}
	if err := json.Unmarshal(gcfg, &g); err != nil || g.ChunkShape == nil {
		return nil, fmt.Errorf("chunk_grid: missing chunk_shape")
	}
	return g.ChunkShape, nil
}

// v3KeyEncoding reads chunk_key_encoding: "default" keys are c/0/1, "v2" keys 0.1,
// and either may name the other separator.
func v3KeyEncoding(raw json.RawMessage) (keyEncoding, error) {
	kname, kcfg, err := parseNamed(raw)
	if err != nil {
		return keyEncoding{}, fmt.Errorf("chunk_key_encoding: %w", err)
	}
	var kc struct {
		Separator *string `json:"separator"`
	}
	if len(kcfg) > 0 {
		if err := json.Unmarshal(kcfg, &kc); err != nil {
			return keyEncoding{}, fmt.Errorf("chunk_key_encoding: %w", err)
		}
	}
	var k keyEncoding
	switch kname {
	case "default":
		k = keyEncoding{prefix: "c", sep: '/'}
	case "v2":
		k = keyEncoding{sep: '.'}
	default:
		return keyEncoding{}, fmt.Errorf("chunk_key_encoding %q: %w", kname, ErrUnsupported)
	}
	if kc.Separator != nil {
		sep, ok := keySeparator(*kc.Separator)
		if !ok {
			return keyEncoding{}, fmt.Errorf("bad chunk key separator %q", *kc.Separator)
		}
		k.sep = sep
	}
	return k, nil
}

// keySeparator reads the separator of chunk key parts, "." or "/" in both formats.
func keySeparator(s string) (byte, bool) {
	switch s {
	case ".":
		return '.', true
	case "/":
		return '/', true
	}
	return 0, false
}

// v3Codecs reads the codec chain. A storage transformer would change how keys map to
// stored bytes; none is implemented, so any one refuses the array.
func v3Codecs(z *zarrJSON) ([]CodecInfo, error) {
	if len(z.Codecs) == 0 {
		return nil, fmt.Errorf("no codecs")
	}
	codecs, err := parseV3Codecs(z.Codecs)
	if err != nil {
		return nil, err
	}
	for _, st := range z.StorageTransformers {
		name, _, err := parseNamed(st)
		if err != nil {
			return nil, fmt.Errorf("storage_transformers: %w", err)
		}
		return nil, fmt.Errorf("storage transformer %q: %w", name, ErrUnsupported)
	}
	return codecs, nil
}

// v3DimNames reads dimension_names (a null entry is an unnamed dimension) or, when the
// document has none, the _ARRAY_DIMENSIONS attribute that xarray writes.
func v3DimNames(z *zarrJSON, ndim int) ([]string, error) {
	if z.DimensionNames == nil {
		names, err := attrDims(z.Attributes, ndim)
		if err != nil {
			return nil, fmt.Errorf("attributes: %w", err)
		}
		return names, nil
	}
	if len(z.DimensionNames) != ndim {
		return nil, fmt.Errorf("%d dimension_names for %d dimensions", len(z.DimensionNames), ndim)
	}
	names := make([]string, ndim)
	for i, n := range z.DimensionNames {
		if n != nil {
			names[i] = *n
		}
	}
	return names, nil
}

func parseV3Codecs(list []json.RawMessage) ([]CodecInfo, error) {
	out := make([]CodecInfo, 0, len(list))
	for _, raw := range list {
		name, cfg, err := parseNamed(raw)
		if err != nil {
			return nil, fmt.Errorf("codecs: %w", err)
		}
		c := CodecInfo{Name: name, Config: cfg}
		if name == "sharding_indexed" {
			var sc struct {
				Codecs      []json.RawMessage `json:"codecs"`
				IndexCodecs []json.RawMessage `json:"index_codecs"`
			}
			if err := json.Unmarshal(cfg, &sc); err != nil {
				return nil, fmt.Errorf("codec sharding_indexed: %w", err)
			}
			if c.Inner, err = parseV3Codecs(sc.Codecs); err != nil {
				return nil, fmt.Errorf("sharding_indexed: %w", err)
			}
			if c.IndexCodecs, err = parseV3Codecs(sc.IndexCodecs); err != nil {
				return nil, fmt.Errorf("sharding_indexed index: %w", err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}
