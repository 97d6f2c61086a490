package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// decodeJSON unmarshals metadata JSON into v. Python's json module writes the bare
// tokens NaN, Infinity and -Infinity (not JSON) into attributes; they are accepted
// and read as the strings "NaN", "Infinity" and "-Infinity".
func decodeJSON(b []byte, v any) error {
	if !json.Valid(b) {
		b = quoteNonFinite(b)
	}
	return json.Unmarshal(b, v)
}

// quoteNonFinite rewrites bare NaN/Infinity/-Infinity tokens outside strings as JSON
// strings. Anything else is copied unchanged, so invalid JSON stays invalid.
func quoteNonFinite(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			out = append(out, c)
			continue
		}
		matched := false
		for _, tok := range [...]string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				out = append(out, '"')
				out = append(out, tok...)
				out = append(out, '"')
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, c)
		}
	}
	return out
}

// parseNamed reads a v3 extension point: a bare name or
// {"name": ..., "configuration": {...}, "must_understand": ...}.
func parseNamed(raw json.RawMessage) (string, json.RawMessage, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		return name, nil, nil
	}
	var obj struct {
		Name          *string         `json:"name"`
		Configuration json.RawMessage `json:"configuration"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", nil, fmt.Errorf("expected a name or {\"name\":...}, got %.60s", string(raw))
	}
	if obj.Name == nil || *obj.Name == "" {
		return "", nil, fmt.Errorf("missing name in %.60s", string(raw))
	}
	if bytes.Equal(bytes.TrimSpace(obj.Configuration), []byte("null")) {
		obj.Configuration = nil
	}
	return *obj.Name, obj.Configuration, nil
}

// mustUnderstand reports whether an unknown metadata field must be understood: any
// value other than an object with "must_understand": false.
func mustUnderstand(raw json.RawMessage) bool {
	var obj struct {
		MustUnderstand *bool `json:"must_understand"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.MustUnderstand == nil {
		return true
	}
	return *obj.MustUnderstand
}

// jsonFloat reads a JSON number or one of the strings "NaN", "Infinity", "-Infinity".
func jsonFloat(raw json.RawMessage) (float64, bool) {
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return f, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, false
	}
	switch s {
	case "NaN", "nan":
		return math.NaN(), true
	case "Infinity", "inf":
		return math.Inf(1), true
	case "-Infinity", "-inf":
		return math.Inf(-1), true
	}
	return 0, false
}

// jsonInt reads a JSON integer exactly (including values beyond 2^53).
func jsonInt(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	// Integral floats such as 7.0.
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return int64(f), true
	}
	return 0, false
}

func jsonUint(raw json.RawMessage) (uint64, bool) {
	s := string(bytes.TrimSpace(raw))
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, true
	}
	if v, ok := jsonInt(raw); ok && v >= 0 {
		return uint64(v), true
	}
	return 0, false
}

func isJSONNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
