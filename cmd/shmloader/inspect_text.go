package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// text renders the report for people: an indented tree, each array with its dims,
// chunks, codecs, fill value, sizes and attributes.
func (r *storeReport) text() string {
	var b strings.Builder
	groups, arrays := 0, 0
	for _, n := range r.Nodes {
		if n.Kind == "array" {
			arrays++
		} else {
			groups++
		}
	}
	meta := "metadata read from each node"
	if r.Consolidated {
		meta = "consolidated metadata"
	}
	fmt.Fprintf(&b, "%s  (zarr v%d, %s; %s, %s)\n", r.Store, r.ZarrFormat, meta,
		plural(groups, "group"), plural(arrays, "array"))
	for _, n := range r.Nodes {
		depth := 0
		if n.Path != "" {
			depth = strings.Count(n.Path, "/") + 1
		}
		ind := strings.Repeat("  ", depth)
		name := n.Path
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		if n.Kind == "group" {
			if name == "" {
				name = "/"
			} else {
				name += "/"
			}
			fmt.Fprintf(&b, "%s%s  group\n", ind, name)
			if s := attrsBrief(n.Attrs); s != "" {
				fmt.Fprintf(&b, "%s    attrs   %s\n", ind, s)
			}
			continue
		}
		if name == "" {
			name = "/"
		}
		if n.Error != "" {
			fmt.Fprintf(&b, "%s%s  array  ERROR: %s\n", ind, name, n.Error)
			continue
		}
		fmt.Fprintf(&b, "%s%s  %s %s\n", ind, name, n.TypeName, dimsText(n.Shape, n.Dims))
		row := func(label, format string, args ...any) {
			fmt.Fprintf(&b, "%s    %-7s %s\n", ind, label, fmt.Sprintf(format, args...))
		}
		chunkWord := "chunks"
		if n.Shards != nil {
			chunkWord = "shards"
			row("shards", "%s, inner chunks %s", tupleText(n.Shards), tupleText(n.Chunks))
		} else {
			row("chunks", "%s", tupleText(n.Chunks))
		}
		row("stored", "%d/%d %s", n.ChunksStored, n.ChunksTotal, chunkWord)
		if n.DType != n.DataType {
			row("dtype", "%s (metadata: %s), order %s", n.DType, n.DataType, n.Order)
		} else {
			row("dtype", "%s, order %s", n.DType, n.Order)
		}
		row("codecs", "%s", codecsText(n, r.ZarrFormat))
		row("fill", "%s", fillText(n))
		size := fmt.Sprintf("%s decoded, %s stored", bytesText(n.DecodedBytes), bytesText(n.StoredBytes))
		if n.DecodedBytes == 0 && n.DType == "|O" {
			size = fmt.Sprintf("variable-length values, %s stored", bytesText(n.StoredBytes))
		} else if n.Ratio != nil {
			size += fmt.Sprintf(" (ratio %.2f)", *n.Ratio)
		}
		row("size", "%s", size)
		if s := attrsBrief(n.Attrs); s != "" {
			row("attrs", "%s", s)
		}
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// dimsText is "(time: 10, y: 40, x: 50)" with dimension names, "(10, 40, 50)" without.
func dimsText(shape []int, dims []string) string {
	parts := make([]string, len(shape))
	for i, s := range shape {
		if i < len(dims) && dims[i] != "" {
			parts[i] = fmt.Sprintf("%s: %d", dims[i], s)
		} else {
			parts[i] = fmt.Sprint(s)
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func tupleText(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// compressorIDs are the v2 numcodecs ids that are compressors (the rest are filters).
var compressorIDs = map[string]bool{"blosc": true, "blosc2": true, "zstd": true, "zlib": true, "gzip": true,
	"lz4": true, "bz2": true, "lzma": true, "zfpy": true, "pcodec": true}

// fillText shows the fill value; NaT for a datetime's minimum int64, "" quoted.
func fillText(n nodeReport) string {
	s := jsonBrief(n.FillValue, 40)
	switch {
	case s == "":
		return `""`
	case s == "-9223372036854775808" && (strings.HasPrefix(n.TypeName, "datetime64") || strings.HasPrefix(n.TypeName, "timedelta64")):
		return "NaT"
	}
	return s
}

// codecsText is the codec chain in metadata order; v2 arrays say which are filters.
func codecsText(n nodeReport, zarrFormat int) string {
	if len(n.Codecs) == 0 {
		return "none"
	}
	names := make([]string, len(n.Codecs))
	for i, c := range n.Codecs {
		names[i] = codecText(c.Name, c.Config)
	}
	chain := strings.Join(names, " -> ")
	if zarrFormat == 2 && len(names) > 1 && compressorIDs[n.Codecs[len(n.Codecs)-1].Name] {
		return "filters " + strings.Join(names[:len(names)-1], " -> ") + "; compressor " + names[len(names)-1]
	}
	return chain
}

// codecText is name(key=value, ...), nested codecs (sharding) as chains.
func codecText(name string, cfg json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(cfg, &m) != nil || len(m) == 0 {
		return name
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		if k == "codecs" || k == "index_codecs" {
			parts = append(parts, k+"=["+nestedCodecs(v)+"]")
			continue
		}
		parts = append(parts, k+"="+jsonBrief(v, 40))
	}
	return name + "(" + strings.Join(parts, ", ") + ")"
}

func nestedCodecs(raw json.RawMessage) string {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return jsonBrief(raw, 60)
	}
	out := make([]string, 0, len(list))
	for _, c := range list {
		var named struct {
			Name   string          `json:"name"`
			Config json.RawMessage `json:"configuration"`
		}
		var s string
		switch {
		case json.Unmarshal(c, &s) == nil:
			out = append(out, s)
		case json.Unmarshal(c, &named) == nil:
			out = append(out, codecText(named.Name, named.Config))
		default:
			out = append(out, jsonBrief(c, 40))
		}
	}
	return strings.Join(out, " -> ")
}

// jsonBrief is compact JSON (strings unquoted) cut to max characters.
func jsonBrief(raw json.RawMessage, max int) string {
	if len(raw) == 0 {
		return "null"
	}
	var s string
	out := ""
	if json.Unmarshal(raw, &s) == nil {
		out = s
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			out = buf.String()
		} else {
			out = string(raw)
		}
	}
	if r := []rune(out); len(r) > max {
		out = string(r[:max-1]) + "…"
	}
	return out
}

// attrsBrief lists attributes as key=value, values cut short, at most 10 of them.
// _ARRAY_DIMENSIONS is left out (it is shown as the dims).
func attrsBrief(attrs map[string]json.RawMessage) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		if k != "_ARRAY_DIMENSIONS" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	const most = 10
	parts := make([]string, 0, min(len(keys), most)+1)
	for i, k := range keys {
		if i == most {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(keys)-most))
			break
		}
		v := attrs[k]
		var s string
		if json.Unmarshal(v, &s) == nil {
			parts = append(parts, fmt.Sprintf("%s=%q", k, jsonBrief(v, 40)))
		} else {
			parts = append(parts, k+"="+jsonBrief(v, 40))
		}
	}
	return strings.Join(parts, ", ")
}

// bytesText is a decimal size: 512 B, 40.0 kB, 1.81 GB.
func bytesText(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
